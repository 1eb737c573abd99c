"""A scripted ACP agent built on the official SDK (``acp.Agent`` served by ``acp.run_agent``),
in the manner of the SDK's example agent: it keeps no history (no ``loadSession``, no session
capabilities), and answers each prompt with streamed message chunks, a thought, a tool call
that reads a file and its completion, and a plan. Environment:

- ``ACP_AGENT_LOG``: a file that gets one JSON line per prompt received (session, text blocks);
- ``ACP_AGENT_PID``: a file that gets this process's pid;
- a prompt whose text contains ``permission`` asks the editor's permission for its tool call
  first (``session/request_permission``) and logs the outcome;
- a prompt whose text contains ``crash`` makes it exit after the first chunk (a crash
  mid-reply); ``slow`` makes it sleep 0.5 s between chunks; ``usage`` makes it report the
  session's usage (``usage_update``: 1,200 of 200,000 tokens used, a cost of 0.25 USD);
- ``ACP_AGENT_MESSAGE_IDS``: each reply's message chunks carry a ``messageId`` of their own (the
  ACP draft's message ids), logged with the prompt;
- ``ACP_AGENT_CHILD``: a file that gets the pid of a child process it starts, which sleeps
  (as an npx wrapper's real agent binary does, it outlives the agent unless it is stopped)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

from acp import (
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
)
from acp.interfaces import Client
from acp.schema import AgentMessageChunk, Cost, PermissionOption, ToolCallUpdate, UsageUpdate


class ScriptedAgent(Agent):
    def __init__(self) -> None:
        self.client: Client | None = None
        self.calls = 0

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=protocol_version)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"agent-{uuid.uuid4()}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log = os.environ.get("ACP_AGENT_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"cancel": session_id}) + "\n")

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        assert self.client is not None
        texts = [getattr(block, "text", "") for block in prompt]
        reply = f"reply-{uuid.uuid4()}" if os.environ.get("ACP_AGENT_MESSAGE_IDS") else None
        log = os.environ.get("ACP_AGENT_LOG")
        if log:
            entry: dict[str, Any] = {"session": session_id, "texts": texts}
            if reply is not None:
                entry["messageId"] = reply
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
        asked = texts[-1] if texts else ""
        slow = 0.5 if "slow" in asked else 0.0
        send = self.client.session_update

        def said(text: str) -> AgentMessageChunk:
            if reply is None:
                return update_agent_message_text(text)
            kind = "agent_message_chunk"
            return AgentMessageChunk(
                session_update=kind, content=text_block(text), message_id=reply
            )

        for piece in ("Let me ", "look at ", "that."):
            await send(session_id, said(piece))
            if "crash" in asked:
                os._exit(3)
            await asyncio.sleep(slow)
        await send(session_id, update_agent_thought_text("reading the file"))
        self.calls += 1
        call = f"call-{self.calls}"
        if "permission" in asked:
            allowed = await self.client.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id=call, title="Read notes.txt"),
                options=[PermissionOption(option_id="yes", name="Allow", kind="allow_once")],
            )
            if log:
                with open(log, "a", encoding="utf-8") as f:
                    f.write(
                        json.dumps({"permission": allowed.outcome.model_dump(exclude_none=True)})
                        + "\n"
                    )
        await send(
            session_id,
            start_tool_call(call, "Read notes.txt", kind="read", raw_input={"path": "notes.txt"}),
        )
        await send(
            session_id,
            update_tool_call(
                call, status="completed", content=[tool_content(text_block(f"notes for {asked}"))]
            ),
        )
        for piece in ("Done: ", asked):
            await send(session_id, said(piece))
        if "usage" in asked:
            cost = Cost(amount=0.25, currency="USD")
            usage = UsageUpdate(session_update="usage_update", used=1200, size=200000, cost=cost)
            await send(session_id, usage)
        return PromptResponse(stop_reason="end_turn")


def main() -> None:
    pid = os.environ.get("ACP_AGENT_PID")
    if pid:
        with open(pid, "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
    child = os.environ.get("ACP_AGENT_CHILD")
    if child:
        sleeper = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        with open(child, "w", encoding="utf-8") as f:
            f.write(str(sleeper.pid))
    asyncio.run(run_agent(ScriptedAgent()))


if __name__ == "__main__":
    main()
