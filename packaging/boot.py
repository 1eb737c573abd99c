"""Starts the chat history server shipped inside an extension, two ways:

- bundled libraries: ``python -I -S bundled/boot.py [--check | cli ARGS...]`` with ``bundled/libs``
  (the server and its dependencies, compiled parts for each supported Python) first on the path;
  ``-I -S``: nothing of the user's environment (PYTHONPATH, user or system site-packages) can
  shadow them;
- frozen: the entry script of the PyInstaller build (``server/chat-history-server``), where the
  libraries are already inside.

``cli ARGS`` runs the ``chat-history`` CLI instead of the server (the panel's export). Loads on
any Python >= 3.8 far enough to say that an older one is too old (launch_check.py)."""

import os
import sys


def main() -> None:
    if not getattr(sys, "frozen", False):
        libs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libs")
        sys.path.insert(0, libs)
    from chat_history import launch_check

    if sys.argv[1:2] == ["cli"]:
        problem = launch_check.too_old()
        if problem is not None:
            sys.exit(f"chat-history: {problem}")
        from chat_history.cli.main import main as cli

        sys.exit(cli(sys.argv[2:]))
    from chat_history.__main__ import main as server

    server()


if __name__ == "__main__":
    main()
