"""A bare pygls server: the startup floor our server is compared against (it answers
``initialize`` and nothing else)."""

from pygls.lsp.server import LanguageServer

server = LanguageServer("bare-pygls", "0")

if __name__ == "__main__":
    server.start_io()
