"""A simulated provider for the provider state tests (the property test and bench/replay.py):
every piece of state a test history mints carries its minting facts inside it (the kind,
endpoint and scope it was minted at, its model, the calls of its row, when), and ``refusal``
reads a body as the provider would, refusing what the providers' documented rules refuse, with
their real error answers (docs/providers.md "Provider state"). It reads the body alone, never
the server's rows or its rule table: an independent judge of what ``prepare`` and ``format``
send. ``valid`` says which state a target would take, for the "never dropped" side.

Targets are aliases of ``chatHistory.providers`` (``ALIASES``): a model, an endpoint and a
state scope each; a state ``revoked`` at a target (a rotated key, an expired signature) is
refused there from then on, which a report must recover from in one step."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from chat_history.model import Message, Origin, ToolCall
from chat_history.policy.origins import alias_origin
from chat_history.policy.prepare.compaction import SUMMARY_HEADER
from chat_history.providers.continuation import claude_family
from chat_history.providers.gemini import SKIP_SIGNATURE, generation
from chat_history.settings import ProviderAlias, Settings, load_settings

SONNET = "claude-sonnet-4-5-20250929"
OPUS = "claude-opus-4-1-20250805"
GATEWAY = "https://gw.example/anthropic"

#: The targets: alias name → its settings entry. Each differs from another in one of kind,
#: model (family), endpoint or scope.
ALIASES: dict[str, dict[str, Any]] = {
    "sonnet": {"provider": "anthropic", "model": SONNET},
    "sonnet-dated": {"provider": "anthropic", "model": "claude-sonnet-4-5"},
    "opus": {"provider": "anthropic", "model": OPUS},
    "gw-sonnet": {
        "provider": "anthropic",
        "model": SONNET,
        "endpoint": GATEWAY,
        "stateScope": "team-a",
    },
    "gw-sonnet-b": {
        "provider": "anthropic",
        "model": SONNET,
        "endpoint": GATEWAY,
        "stateScope": "team-b",
    },
    "claude-import": {"provider": "anthropic", "model": SONNET, "stateScope": "import:claude-code"},
    "gpt": {"provider": "openai-responses", "model": "gpt-5.2", "stateScope": "org-1"},
    "gpt-mini": {"provider": "openai-responses", "model": "gpt-5-mini", "stateScope": "org-1"},
    "gpt-org2": {"provider": "openai-responses", "model": "gpt-5.2", "stateScope": "org-2"},
    "codex-import": {
        "provider": "openai-responses",
        "model": "gpt-5-codex",
        "stateScope": "import:codex",
    },
    "opencode-import": {
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "stateScope": "import:opencode",
    },
    "gem3": {"provider": "gemini", "model": "gemini-3-pro-preview"},
    "gem3-flash": {"provider": "gemini", "model": "gemini-3-flash-preview"},
    "gem25": {"provider": "gemini", "model": "gemini-2.5-flash"},
    "gem-tuned": {"provider": "gemini", "model": "tunedModels/shop-assistant-7"},
    "deepseek": {
        "provider": "openai",
        "model": "deepseek-reasoner",
        "endpoint": "https://api.deepseek.com",
    },
    "groq": {
        "provider": "openai",
        "model": "deepseek-r1-distill-llama-70b",
        "endpoint": "https://api.groq.com/openai/v1",
    },
}
#: Targets the simulation treats as Gemini 3 whatever their name says (a tuned model of it):
#: they refuse a current turn whose calls carry no signature.
STRICT_GEMINI = frozenset({"gem-tuned"})
#: The kinds whose state the simulation mints.
MINTING = ("anthropic", "openai-responses", "gemini", "openai")


def settings(**overrides: Any) -> Settings:
    """Settings with ``ALIASES`` (and ``overrides``, nested keys as in settings.md)."""
    loaded = load_settings({"providers": ALIASES, **overrides})
    assert not loaded.problems, loaded.problems
    return loaded.settings


def aliases() -> Mapping[str, ProviderAlias]:
    return settings().providers


def kind_of(target: str) -> str:
    return str(ALIASES[target]["provider"])


# -- minting ------------------------------------------------------------------------------------


def encode(facts: Mapping[str, Any]) -> str:
    """Minting facts as an opaque base64 token (what a provider's signature is to the server)."""
    return base64.b64encode(json.dumps(facts, sort_keys=True).encode()).decode()


def decode(token: Any) -> dict[str, Any] | None:
    """The facts of a token this simulation minted; None for anything else (a placeholder)."""
    if not isinstance(token, str) or token == SKIP_SIGNATURE:
        return None
    try:
        value = json.loads(base64.b64decode(token.encode(), validate=True))
    except ValueError:
        return None
    return value if isinstance(value, dict) and "u" in value else None


def _model_family(kind: str, model: str | None) -> str | None:
    if model is None:
        return None
    if kind == "anthropic":
        return claude_family(model) or model.lower()
    if kind == "gemini":
        name = model.lower().rsplit("/", 1)[-1]
        return name.removesuffix("-preview")
    return model.lower()


@attrs.define
class Registry:
    """Every piece of state minted in a run: uid → its facts; the revocations per target; the
    times summaries and compactions were saved, per conversation."""

    facts: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    revoked: dict[str, set[str]] = attrs.field(factory=dict)
    counter: int = 0

    def mint(self, target: str, marker: str, calls: Sequence[ToolCall], at: int) -> dict[str, Any]:
        """The facts of a new piece of state minted at ``target`` for the row ``marker``."""
        return self.mint_at(alias_origin(target, aliases(), "origin"), marker, calls, at)

    def mint_at(
        self, origin: Origin, marker: str, calls: Sequence[ToolCall], at: int
    ) -> dict[str, Any]:
        """The facts of a new piece of state minted at ``origin`` for the row ``marker``."""
        self.counter += 1
        facts = {
            "u": f"u{self.counter}",
            "k": origin.provider,
            "e": origin.endpoint,
            "s": origin.scope,
            "f": _model_family(origin.provider, origin.model),
            "m": (origin.model or "").lower(),
            "c": [call.id for call in calls],
            "r": marker,
            "at": at,
        }
        self.facts[facts["u"]] = facts
        return facts

    def revoke(self, target: str) -> int:
        """Every state minted so far that ``target`` takes is refused there from now on (a key
        rotated, signatures expired); returns how many."""
        taken = {u for u, f in self.facts.items() if _accepts(target, f)}
        self.revoked.setdefault(target, set()).update(taken)
        return len(taken)


def reply(
    registry: Registry,
    target: str,
    marker: str,
    text: str,
    calls: Sequence[ToolCall] = (),
    at: int = 0,
) -> Message:
    """An assistant row as ``target`` would have answered it: its text (with its marker), its
    calls, the state ``target``'s kind returns, and its origin."""
    kind = kind_of(target)
    data: dict[str, Any] = {}
    facts = registry.mint(target, marker, calls, at)
    if kind == "anthropic":
        thinking = [
            {"type": "thinking", "thinking": f"thinking {facts['u']}", "signature": encode(facts)}
        ]
        if len(calls) > 1:
            more = registry.mint(target, marker, calls, at)
            thinking.append({"type": "redacted_thinking", "data": encode(more)})
        data = {"anthropic": {"thinking": thinking}}
    elif kind == "openai-responses":
        item = {
            "type": "reasoning",
            "id": f"rs_{facts['u']}",
            "summary": [{"type": "summary_text", "text": "planned"}],
            "encrypted_content": encode(facts),
        }
        data = {"openai-responses": {"reasoning": [item], "phase": "final_answer"}}
    elif kind == "gemini":
        if calls:
            signed = {calls[0].id: encode(facts)}
            data = {"gemini": {"thoughtSignatures": signed}}
        else:
            data = {"gemini": {"thoughtSignature": encode(facts)}}
    elif kind == "openai":
        data = {"openai": {"reasoning_content": encode(facts)}}
    return Message(
        role="assistant",
        content=f"{text} {marker}",
        tool_calls=tuple(calls),
        provider_data=data,
        origin=alias_origin(target, aliases(), "origin"),
        timestamp=at,
    )


def reminted(registry: Registry, row: Message, marker: str) -> Message:
    """A row another tool recorded (an import), its marker added and each token of its state
    minted again at its origin: the shape the tool recorded, with facts this simulation reads.
    A row without an origin, or without state, only gets its marker."""
    content = f"{row.content} {marker}"
    origin = row.origin
    if origin is None or not row.provider_data:
        return attrs.evolve(row, content=content)
    at = row.timestamp or 0

    def fresh() -> str:
        return encode(registry.mint_at(origin, marker, row.tool_calls, at))

    data = json.loads(json.dumps(dict(row.provider_data)))
    for block in data.get("anthropic", {}).get("thinking", []):
        if block.get("type") == "thinking":
            block["signature"] = fresh()
        elif block.get("type") == "redacted_thinking":
            block["data"] = fresh()
    for item in data.get("openai-responses", {}).get("reasoning", []):
        item["encrypted_content"] = fresh()
    return attrs.evolve(row, content=content, provider_data=data)


def compaction_items(registry: Registry, target: str, marker: str, at: int) -> list[dict[str, Any]]:
    """What ``target``'s own compaction returns (OpenAI's compaction item, Anthropic's block)."""
    facts = registry.mint(target, marker, (), at)
    if kind_of(target) == "openai-responses":
        return [
            {"type": "compaction", "id": f"cmp_{facts['u']}", "encrypted_content": encode(facts)}
        ]
    return [{"type": "compaction", "content": f"summary {marker}", "signature": encode(facts)}]


# -- judging ------------------------------------------------------------------------------------


def _accepts(target: str, facts: Mapping[str, Any]) -> bool:
    """Whether state with ``facts`` verifies at ``target`` (its kind, endpoint, scope and the
    model family its kind binds it to), before revocations."""
    origin = alias_origin(target, aliases(), "origin")
    kind = origin.provider
    if (facts["k"], facts["e"], facts["s"]) != (kind, origin.endpoint, origin.scope):
        return False
    if kind in ("anthropic", "gemini"):
        return bool(facts["f"] == _model_family(kind, origin.model))
    return True


def _compaction_accepts(target: str, facts: Mapping[str, Any]) -> bool:
    origin = alias_origin(target, aliases(), "origin")
    if (facts["k"], facts["e"], facts["s"]) != (origin.provider, origin.endpoint, origin.scope):
        return False
    return origin.provider != "openai-responses" or facts["m"] == (origin.model or "").lower()


@attrs.frozen
class Refusal:
    """What the provider answered: its status and error body, and whether the refused state was
    revoked on purpose (an injected refusal) or should never have been sent."""

    status: int
    body: Any
    injected: bool
    why: str


def _anthropic_error(where: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": f"{where}: {message}"},
    }


INVALID_SIGNATURE = "Invalid `signature` in `thinking` block"
ENCRYPTED = {
    "error": {
        "message": "The encrypted content gAAA...DQ== could not be verified.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_encrypted_content",
    }
}
CORRUPTED = {
    "error": {"code": 400, "message": "Corrupted thought signature.", "status": "INVALID_ARGUMENT"}
}
MISSING = {
    "error": {
        "code": 400,
        "message": (
            "Function call is missing a thought_signature in functionCall parts. This is "
            "required for tools to work correctly, and missing thought_signature may lead to "
            "degraded model performance. Additional data, function call `default_api:{name}` , "
            "position {position}. Please refer to "
            "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
        ),
        "status": "INVALID_ARGUMENT",
    }
}


@attrs.define
class Standing:
    """When what may stand in a body was saved (a summary, a native compaction): state bound to
    the conversation's prefix minted before it is bound to another conversation."""

    summary_at: int | None = None
    compaction_at: int | None = None


def _stood_in(body: Mapping[str, Any], standing: Standing) -> int | None:
    text = json.dumps(body)
    times = []
    if standing.summary_at is not None and SUMMARY_HEADER.strip() in text:
        times.append(standing.summary_at)
    if standing.compaction_at is not None and '"type": "compaction"' in text:
        times.append(standing.compaction_at)
    return max(times) if times else None


def refusal(
    target: str, body: Mapping[str, Any], registry: Registry, standing: Standing
) -> Refusal | None:
    """What ``target`` answers ``body``: None when it takes it, else its first refusal."""
    revoked = registry.revoked.get(target, set())
    since = _stood_in(body, standing)
    kind = kind_of(target)

    def judge(token: Any, compaction: bool = False) -> tuple[bool, bool] | None:
        """(refused, injected) for one token of state; None when it is not this simulation's."""
        facts = decode(token)
        if facts is None:
            return None
        ok = (_compaction_accepts if compaction else _accepts)(target, facts)
        if not ok:
            return True, False
        if facts["u"] in revoked:
            return True, True
        return False, False

    if kind == "anthropic":
        for i, message in enumerate(body["messages"]):
            blocks = message["content"] if isinstance(message["content"], list) else []
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            for j, block in enumerate(blocks):
                where = f"messages.{i}.content.{j}"
                if block.get("type") == "compaction":
                    verdict = judge(block.get("signature"), compaction=True)
                    if verdict and verdict[0]:
                        error = _anthropic_error(
                            where, "compaction block signature does not verify"
                        )
                        error["error"]["details"] = {"error_code": "compaction_signature_invalid"}
                        return Refusal(400, error, verdict[1], "compaction")
                    continue
                token = (
                    block.get("signature") if block.get("type") == "thinking" else block.get("data")
                )
                if block.get("type") not in ("thinking", "redacted_thinking"):
                    continue
                verdict = judge(token)
                facts = decode(token)
                if verdict is None or facts is None:
                    return Refusal(
                        400, _anthropic_error(where, INVALID_SIGNATURE), False, "foreign"
                    )
                refused, injected = verdict
                if not refused and facts["c"] != uses:
                    refused, injected = True, False  # a sibling tool_use changed
                if not refused and since is not None and facts["at"] <= since:
                    refused, injected = True, False  # bound to the conversation before it
                if refused:
                    return Refusal(
                        400, _anthropic_error(where, INVALID_SIGNATURE), injected, "thinking"
                    )
    elif kind == "openai-responses":
        for item in body["input"]:
            if item.get("type") in ("reasoning", "compaction"):
                verdict = judge(
                    item.get("encrypted_content"), compaction=item["type"] == "compaction"
                )
                if verdict is None or verdict[0]:
                    return Refusal(400, ENCRYPTED, bool(verdict and verdict[1]), item["type"])
    elif kind == "gemini":
        for content in body["contents"]:
            for part in content["parts"]:
                if "thoughtSignature" in part:
                    verdict = judge(part["thoughtSignature"])
                    if verdict is not None and verdict[0]:
                        return Refusal(400, CORRUPTED, verdict[1], "signature")
        missing = _missing_signature(target, body["contents"])
        if missing is not None:
            return missing
    elif kind == "openai":
        for message in body["messages"]:
            if "reasoning_content" in message:
                verdict = judge(message["reasoning_content"])
                if verdict is None or verdict[0]:
                    origin = alias_origin(target, aliases(), "origin")
                    if "groq" in origin.endpoint:
                        text = "property 'reasoning_content' is unsupported"
                        return Refusal(
                            400, {"error": {"message": text}}, False, "reasoning_content"
                        )
                    return Refusal(
                        400,
                        {"error": {"message": "bad reasoning_content"}},
                        False,
                        "reasoning_content",
                    )
    return None


def _missing_signature(target: str, contents: Sequence[Mapping[str, Any]]) -> Refusal | None:
    """Gemini 3's check: each step of the current turn has a signature on its first call."""
    model = ALIASES[target]["model"]
    strict = target in STRICT_GEMINI or (generation(model) or 0) >= 3
    if not strict:
        return None
    start = 0
    for index, content in enumerate(contents):
        if content["role"] == "user" and not any("functionResponse" in p for p in content["parts"]):
            start = index + 1
    for index in range(start, len(contents)):
        content = contents[index]
        first = next((p for p in content["parts"] if "functionCall" in p), None)
        if content["role"] == "model" and first is not None and "thoughtSignature" not in first:
            error = json.loads(json.dumps(MISSING))
            error["error"]["message"] = error["error"]["message"].format(
                name=first["functionCall"]["name"], position=index
            )
            return Refusal(400, error, target in STRICT_GEMINI, "missing")
    return None


def tokens_in(body: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The facts of every token of state a body carries (placeholders left out)."""
    stack: list[Any] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in (
                    "signature",
                    "data",
                    "encrypted_content",
                    "thoughtSignature",
                    "reasoning_content",
                ):
                    facts = decode(value)
                    if facts is not None:
                        yield facts
                        continue
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


def valid_uids(
    target: str,
    body: Mapping[str, Any],
    registry: Registry,
    standing: Standing,
    fenced: set[str],
) -> set[str]:
    """The state of rows this body sends (their markers are in it) that ``target`` takes
    (not revoked, nor fenced by a report the server was given), native compactions aside: what
    the body must carry."""
    text = json.dumps(body)
    since = _stood_in(body, standing)
    revoked = registry.revoked.get(target, set())
    found = set()
    for uid, facts in registry.facts.items():
        if facts["r"] not in text or uid in revoked or uid in fenced:
            continue
        if facts["r"].startswith("cmp"):
            continue
        if not _accepts(target, facts):
            continue
        if kind_of(target) == "anthropic" and since is not None and facts["at"] <= since:
            continue
        found.add(uid)
    return found
