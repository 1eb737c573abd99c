"""Roo Code tasks: ``<VS Code user data>/User/globalStorage/rooveterinaryinc.roo-cline/tasks/
<task id>/api_conversation_history.json`` (the task id: a UUID; each message has its ``ts``).
The format and what is carried over: ``importers.task_history``, shared with Cline."""

from __future__ import annotations

from chat_history.importers.common import Session
from chat_history.importers.task_history import read_tasks, task_importer

SOURCE = "roo-code"
EXTENSION = "rooveterinaryinc.roo-cline"


def read(data: bytes, session_id: str) -> list[Session]:
    """The conversation of one Roo Code task (``session_id``: the task folder's name)."""
    return read_tasks(SOURCE, data, session_id)


IMPORTER = task_importer(SOURCE, EXTENSION, read)
