"""Where the database lives when nobody says: ``$CHAT_HISTORY_STORAGE``, else the platform's
per-user data folder. Shared by the server (after ``initializationOptions.storagePath``) and the
CLI (after ``--db``)."""

from __future__ import annotations

import os
from pathlib import Path

STORAGE_ENV = "CHAT_HISTORY_STORAGE"


def default_storage_folder() -> Path:
    """Where the database lives by default: ``$CHAT_HISTORY_STORAGE`` when set, else the per-user
    data folder."""
    env = os.environ.get(STORAGE_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("chat-history-server", appauthor=False))
