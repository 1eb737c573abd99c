"""Cline tasks: ``<VS Code user data>/User/globalStorage/saoudrizwan.claude-dev/tasks/<task id>/
api_conversation_history.json`` (the task id: its creation time in epoch ms). The format and
what is carried over: ``importers.task_history``, shared with Roo Code."""

from __future__ import annotations

from chat_history.importers.common import Session
from chat_history.importers.task_history import read_tasks, task_importer

SOURCE = "cline"
EXTENSION = "saoudrizwan.claude-dev"


def read(data: bytes, session_id: str) -> list[Session]:
    """The conversation of one Cline task (``session_id``: the task folder's name)."""
    return read_tasks(SOURCE, data, session_id)


IMPORTER = task_importer(SOURCE, EXTENSION, read)
