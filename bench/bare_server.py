"""A bare pygls server: the startup floor our server is compared against (bench/run.py), and
pygls's own cost of a round trip (bench/roundtrip.py): it answers ``initialize`` and a
``bench/echo`` request with a null result from a plain function run on the event loop, and
nothing else."""

from typing import Any

from pygls.lsp.server import LanguageServer

server = LanguageServer("bare-pygls", "0")


@server.feature("bench/echo")
def echo(ls: LanguageServer, params: Any) -> None:
    """pygls's read, dispatch and write, with no work of ours."""
    return None


if __name__ == "__main__":
    server.start_io()
