"""End-to-end sessions: the real ``python -m chat_history`` process over stdio, driven by a
pytest-lsp client that keeps params and results as plain JSON."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from tests.conftest import Databases, databases_of
from tests.e2e import reliability

from chat_history.wire.lsp import _converter as json_converter

SERVER = [sys.executable, "-m", "chat_history"]


class Session:
    """One server process and the client talking to it."""

    def __init__(self, client: LanguageClient, storage: Path) -> None:
        self.client = client
        self.storage = storage
        self.trimmed: list[dict[str, Any]] = []
        self.configuration_requests = 0
        self.initialize_result: types.InitializeResult | None = None

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return await asyncio.wait_for(
            self.client.protocol.send_request_async(method, params or {}), 30
        )

    async def append(self, conversation: str, *messages: dict[str, Any], **extra: Any) -> Any:
        return await self.request(
            "chatHistory/append",
            {"conversationId": conversation, "messages": list(messages), **extra},
        )

    @property
    def warnings(self) -> list[str]:
        return [m.message for m in self.client.messages]

    def set_configuration(self, settings: Any) -> None:
        self.client.set_configuration({"chatHistory": settings})

    async def settle(self, pulls: int = 0) -> None:
        """Wait until the server pulled configuration ``pulls`` times in all, then until it
        answered a request sent after that."""
        for _ in range(500):
            if self.configuration_requests >= pulls:
                break
            await asyncio.sleep(0.01)
        assert self.configuration_requests >= pulls, "the server never pulled its settings"
        for _ in range(2):  # a request that needs no storage: answered -32602 in order
            with contextlib.suppress(JsonRpcInvalidParams):
                await self.request("chatHistory/get", {"conversationId": ""})


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=json_converter)
    features = {
        k: v for k, v in DEFAULT_CLIENT_FEATURES.items() if k != types.WORKSPACE_CONFIGURATION
    }
    register_lsp_features(client, features)
    return client


StartSession = Callable[..., Awaitable[Session]]


@pytest.fixture(scope="module")
def module_databases(engine: str, request: pytest.FixtureRequest) -> Iterator[Databases | None]:
    """``databases`` for a module-scoped fixture (one server for a module's tests)."""
    yield from databases_of(engine, request)


@contextlib.contextmanager
def servers_on(databases: Databases | None) -> Iterator[None]:
    """The reliability helpers' servers started in the block use ``databases``."""
    reliability.DATABASES = databases
    try:
        yield
    finally:
        reliability.DATABASES = None


@pytest.fixture
def server_databases(databases: Databases | None) -> Iterator[Databases | None]:
    """The reliability helpers' servers (tests/e2e/reliability.py) on the test's engine: a module
    marked ``engines`` takes it with ``pytest.mark.usefixtures("server_databases")``."""
    reliability.DATABASES = databases
    try:
        yield databases
    finally:
        reliability.DATABASES = None


@pytest.fixture
async def start_session(tmp_path: Path, databases: Databases | None) -> AsyncIterator[StartSession]:
    """Start a server; ``settings`` go in initializationOptions, ``configuration`` answers
    workspace/configuration (when the client declares it). On PostgreSQL (``engine``), each
    storage folder names a database of its own (``initializationOptions.database``)."""
    sessions: list[Session] = []

    async def start(
        *,
        settings: Any = None,
        configuration: Any = None,
        declare_configuration: bool = True,
        storage: Path | None = None,
        init_options: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        workspace_folders: list[types.WorkspaceFolder] | None = None,
    ) -> Session:
        folder = storage if storage is not None else tmp_path / f"store{len(sessions)}"
        config = ClientServerConfig(
            server_command=SERVER,
            client_factory=make_client,
            server_env={**os.environ, **(env or {})},
        )
        client = await config.start()
        session = Session(client, folder)
        client.feature("chatHistory/trimmed")(lambda params: session.trimmed.append(params))

        def answer_configuration(params: types.ConfigurationParams) -> list[Any]:
            session.configuration_requests += 1
            return [
                client.get_configuration(section=item.section, scope_uri=item.scope_uri)
                for item in params.items
            ]

        client.feature(types.WORKSPACE_CONFIGURATION)(answer_configuration)
        sessions.append(session)
        if configuration is not None:
            session.set_configuration(configuration)
        options: dict[str, Any] = {"storagePath": str(folder)}
        if databases is not None:
            options["database"] = databases.url(folder)
        if settings is not None:
            options["settings"] = settings
        options.update(init_options or {})
        session.initialize_result = await client.initialize_session(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(
                    workspace=types.WorkspaceClientCapabilities(configuration=declare_configuration)
                ),
                initialization_options=options,
                workspace_folders=workspace_folders,
            )
        )
        await session.settle(pulls=1 if declare_configuration else 0)
        return session

    yield start
    for session in sessions:
        server = session.client._server
        try:
            if session.client.capabilities is not None:
                await asyncio.wait_for(session.client.shutdown_session(), 10)
        finally:
            if server is not None and server.returncode is None:
                server.kill()
            await asyncio.wait_for(session.client.stop(), 10)


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """A project folder for an ACP session (its ``cwd``), empty."""
    folder = tmp_path / "project"
    folder.mkdir()
    return folder
