"""The pygls language server, loaded in the background while the front (``wire/server.py``)
serves the first requests: the LSP lifecycle it keeps (``shutdown``, ``exit``, the settings pull
once it has loaded, ``$/`` methods and whatever else an LSP client may send) on the same session
(``wire/session.py``) and the same stdout. Importing this module is what costs: pygls and
lsprotocol (~0.45 s here, ``lsprotocol.types`` ~90 % of it)."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import lsp_method

from chat_history import __version__
from chat_history.settings import SECTION
from chat_history.wire import protocol
from chat_history.wire.lifecycle import shutdown
from chat_history.wire.session import ChatHistoryServer
from chat_history.wire.transport import lsp_adapter
from chat_history.wire.transport.intake import Incoming

log = logging.getLogger("chat_history")

#: the converter pygls uses (tests share it)
_converter = lsp_adapter.converter


class ChatHistoryProtocol(lsp_adapter.AdaptedProtocol):
    """pygls's protocol with this server's lifecycle: document traffic dropped (it is not
    advertised; a client that sends it anyway is not kept in memory)."""

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: Any) -> None:
        """Dropped: no document is kept."""
        return None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: Any) -> None:
        """Dropped: no document is kept."""
        return None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: Any) -> None:
        """Dropped: no document is kept."""
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def lsp_notebook_document__did_open(self, params: Any) -> None:
        """Dropped: no notebook is kept."""
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def lsp_notebook_document__did_change(self, params: Any) -> None:
        """Dropped: no notebook is kept."""
        return None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def lsp_notebook_document__did_close(self, params: Any) -> None:
        """Dropped: no notebook is kept."""
        return None


class ChatHistoryLanguageServer(LanguageServer):
    """pygls's language server on the session: ``shutdown`` answered after the session's started
    requests, the settings pull sent through pygls."""

    def __init__(self, session: ChatHistoryServer) -> None:
        super().__init__(
            "chat-history-server",
            __version__,
            protocol_cls=ChatHistoryProtocol,
            converter_factory=_converter,
            max_workers=2,
        )
        self.session = session
        if session.writer is not None:
            self.protocol.set_writer(session.writer)

        @self.feature(types.SHUTDOWN)
        async def on_shutdown(ls: ChatHistoryLanguageServer, *args: Any) -> None:
            await shutdown(ls.session, *args)

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Error responses already reach the client; expected ones need no log line at all.
        """Log an unexpected server error; expected ones (the protocol's own codes) are already in
        their answers."""
        if isinstance(error, JsonRpcException) and error.code in protocol.EXPECTED_CODES:
            return
        log.error("server error: %s", error)

    def ask_configuration(self) -> Future[Any]:
        """``workspace/configuration`` for the ``chatHistory`` section, through pygls (on the
        event loop): the future of its answer, resolved when pygls reads it."""
        return self.workspace_configuration(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        )

    # -- what the front hands pygls (lsp_adapter) ----------------------------------------------

    def deliver(self, incoming: Incoming) -> Any:
        """A checked message for pygls: the id of a request pygls now handles, else None."""
        return lsp_adapter.deliver(self.protocol, incoming)

    def deliver_answer(self, data: dict[str, Any]) -> None:
        """The client's answer to one of pygls's requests."""
        lsp_adapter.deliver_answer(self.protocol, data)

    def request_future(self, msg_id: Any) -> Any:
        """The future of a client request pygls is handling, if any."""
        return lsp_adapter.request_future(self.protocol, msg_id)

    def fail_server_requests(self, exc: BaseException) -> None:
        """Fail pygls's requests to the client still waiting for an answer."""
        lsp_adapter.fail_server_requests(self.protocol, exc)

    def shutting_down(self) -> bool:
        """Whether pygls has handled ``shutdown``."""
        return lsp_adapter.shutting_down(self.protocol)
