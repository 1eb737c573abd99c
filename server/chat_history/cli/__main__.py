"""``python -m chat_history.cli``: the command-line tool."""

from chat_history.cli.main import main

raise SystemExit(main())
