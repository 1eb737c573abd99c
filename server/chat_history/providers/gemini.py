"""Google Gemini ``generateContent``: ``systemInstruction`` and ``contents`` (REST camelCase).

Rules applied:

- Every leading system row (before any other row) becomes one text part of
  ``systemInstruction: {"parts": [{"text": …}]}``, in order; omitted when there is none. A later
  system row stays in place as a user turn ``[Application instruction]\n<text>``
  (``plan.later_instructions``), as for Anthropic, so the prefix Gemini's implicit cache
  matches (``systemInstruction`` first) does not change.
- Roles are ``user`` and ``model`` only. Parts hold exactly one of ``text``, ``inlineData``,
  ``functionCall``, ``functionResponse`` (plus ``thoughtSignature`` where echoed); no empty text.
- Images: ``inlineData {mimeType, data}`` for inline png, jpeg, webp, heic and heif (the types
  Gemini documents); other types and URIs become a text note (``fileData`` takes Files API and
  Cloud Storage URIs, not arbitrary URLs).
- An assistant row is a ``model`` turn ``[text?, functionCall…]`` with
  ``functionCall {id, name, args}`` and ``args`` an object.
- All results of a call turn are ``functionResponse {id, name, response: {"output": text}}``
  parts of the next ``user`` turn, first, in call order, one per call (the API wants equal
  counts); the results' images follow them as ``inlineData`` parts of that turn.
- Adjacent turns of one role are merged; a conversation that opens with the model gets a
  ``(continued)`` user turn first (a function-call turn must follow a user turn).
- Thought signatures (Gemini 3 refuses function calls without them) come from
  ``providerData.gemini``, which has this shape::

      {"gemini": {"thoughtSignatures": {"<stored call id>": "<signature>", …},
                  "thoughtSignature": "<signature>"}}

  ``thoughtSignatures`` puts each signature on the ``functionCall`` part of that call;
  ``thoughtSignature`` (one signature for the whole turn, as the API returns it for parallel
  calls) goes on the turn's first ``functionCall`` part, or on its last part when it has no
  calls. Signatures are the base64 text the REST API returned, sent back unchanged.
- Gemini 3 (see ``generation`` for how a ``model`` name maps, aliases and paths included)
  refuses a request whose current turn (the contents after the last user turn that holds no
  ``functionResponse``) has a step without a signature on its first ``functionCall`` part:
  calls made by another provider, or stored without one. Such a part gets Google's documented
  placeholder ``skip_thought_signature_validator``, as a literal string (the API takes it so,
  not base64-encoded), on every step of the current turn, as Google describes for sequential
  calls. A stored signature is never replaced; only a step's first ``functionCall`` part gets
  one (the model signs only that part of parallel calls); earlier turns are left as they are
  (the API does not check them), and so are Gemini 2.x and unnamed models.
- Call ids (``functionCall.id``, and the matching ``functionResponse.id``) are sent to Gemini 3
  and later only, made unique in the body; Gemini 2.x and unnamed models get none, and pair a
  response with its call by position and name (the API's rule: one response per call, in call
  order, in the next turn). Evidence (``sends_call_ids``): google-genai 3.6.1 types the field
  ``Optional`` ("If populated, the client to execute the function_call and return the response
  with the matching id") and passes it through for both backends, so the SDK does not decide;
  the server did: ``Invalid JSON payload received. Unknown name "id" at
  'contents[1].parts[0].function_call': Cannot find field.`` (and the same at
  ``function_response``) from the Developer API with Gemini 2.x (JetBrains/koog#735,
  2025-09), from Vertex (googleapis/java-genai#694, 2025-11; vercel/ai#15664,
  charmbracelet/fantasy#265), and through proxies for "all Gemini models" before 3
  (MoonshotAI/kimi-cli#1582, 2026-03, which strips it). Gemini 3 returns an id on every call
  and expects it echoed: without it parallel calls of one function can be paired wrongly and
  Vertex answers an empty reply (BerriAI/litellm#34603, 2026-07, sending it for Gemini 3+
  only; langchain-ai/langchainjs#11208 found it load-bearing on the Developer API), and Vertex
  has defined ``id`` on both types in ``v1`` and ``v1beta1`` since its 2026-09-21 discovery
  revision, where Gemini 3.5 accepts it and 1.x/2.x clients still omit it
  (anomalyco/opencode#50504). So: ids where the model family needs them, none where older
  endpoints refuse them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from chat_history.model import Message
from chat_history.providers.calls import Result, arguments_object
from chat_history.providers.images import Image, image_note
from chat_history.providers.messages import CONTINUED, alternating_turns
from chat_history.providers.plan import AssistantTurn, UserTurn, plan, provider_data, system_texts

KIND = "gemini"
#: The value Google documents for a function call that has no signature of its own.
SKIP_SIGNATURE = "skip_thought_signature_validator"
_MAJOR_VERSION = re.compile(r"gemini-(\d+)(?:[.-]|$)")
#: Google's floating aliases (``gemini-flash-latest``, ``gemini-flash-lite-latest``,
#: ``gemini-pro-latest``): a tier and ``-latest``, with no version number.
_FLOATING_ALIAS = re.compile(r"gemini-[a-z]+(?:-[a-z]+)*-latest")
#: The generation a floating alias is taken to name: the newest one Google serves under it.
LATEST_GENERATION = 3
#: The image types the Gemini API documents for inline data.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})


def image_part(image: Image) -> dict[str, Any]:
    """An image as Gemini's part: inline data, else a text note."""
    if image.inline_of(IMAGE_TYPES):
        return {"inlineData": {"mimeType": image.mime_type, "data": image.data}}
    return {"text": image_note(image)}


def _user(turn: UserTurn) -> dict[str, Any]:
    parts = [{"text": s} if isinstance(s, str) else image_part(s) for s in turn.segments]
    return {"role": "user", "parts": parts}


def _signatures(turn: AssistantTurn) -> tuple[dict[str, str], str | None]:
    data = provider_data(turn.row, KIND)
    per_call = data.get("thoughtSignatures")
    by_call: dict[str, str] = {}
    if isinstance(per_call, dict):
        by_call = {k: v for k, v in per_call.items() if isinstance(v, str) and v}
    single = data.get("thoughtSignature")
    return by_call, single if isinstance(single, str) and single else None


def _model(turn: AssistantTurn, with_ids: bool) -> dict[str, Any]:
    by_call, single = _signatures(turn)
    parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.has_text else []
    for call in turn.calls:
        function_call = {"name": call.name, "args": arguments_object(call.source)}
        part: dict[str, Any] = {"functionCall": _with_id(function_call, call.id, with_ids)}
        signature = by_call.get(call.source.id)
        if signature is not None:
            part["thoughtSignature"] = signature
        parts.append(part)
    if single is not None:
        calls = [p for p in parts if "functionCall" in p]
        target = calls[0] if calls else parts[-1]
        target.setdefault("thoughtSignature", single)
    return {"role": "model", "parts": parts}


def _with_id(value: dict[str, Any], call_id: str, with_ids: bool) -> dict[str, Any]:
    return {"id": call_id, **value} if with_ids else value


def _responses(results: Sequence[Result], with_ids: bool) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [
        {
            "functionResponse": _with_id(
                {"name": result.call.name, "response": {"output": result.text}},
                result.call.id,
                with_ids,
            )
        }
        for result in results
    ]
    for result in results:
        parts.extend(image_part(image) for image in result.images())
    return {"role": "user", "parts": parts}


def generation(model: str | None) -> int | None:
    """The Gemini generation (major version) ``model`` names, or None when it names none.

    How a name maps: surrounding whitespace and case are ignored; a path keeps its last
    segment (``models/gemini-3-pro-preview``, Vertex's
    ``projects/P/locations/L/publishers/google/models/gemini-3-pro-preview``, a gateway's
    ``google/gemini-3-flash``) and a Vertex ``@version`` suffix is dropped. ``gemini-N…`` (N a
    number: ``gemini-3-pro-preview``, ``gemini-3.1-flash-lite``, ``gemini-2.5-flash-latest``)
    is generation N. A floating alias, a tier and ``-latest`` with no version number
    (``gemini-flash-latest``, ``gemini-flash-lite-latest``, ``gemini-pro-latest``), is the
    generation Google currently serves under it, taken as ``LATEST_GENERATION`` (3): Google
    moves these aliases to each new release, and they point at Gemini 3 models, which refuse
    a request without thought signatures, while the Gemini 2.5 models the aliases once named
    take the placeholder too. Any other name (``gemini-pro``, ``gemini-exp-1206``, a tuned
    model) names no generation: the body is built as for Gemini 2."""
    if not model:
        return None
    name = model.strip().lower().rsplit("/", 1)[-1].split("@", 1)[0]
    found = _MAJOR_VERSION.match(name)
    if found is not None:
        return int(found.group(1))
    if _FLOATING_ALIAS.fullmatch(name):
        return LATEST_GENERATION
    return None


def needs_signatures(model: str | None) -> bool:
    """Whether ``model`` is Gemini 3 or later, which validates the current turn's signatures."""
    found = generation(model)
    return found is not None and found >= 3


def sends_call_ids(model: str | None) -> bool:
    """Whether ``functionCall.id``/``functionResponse.id`` go in the body: Gemini 3 and later
    (the module docstring gives the evidence)."""
    return needs_signatures(model)


def _sign_current_turn(contents: list[dict[str, Any]]) -> None:
    """The skip placeholder on the first ``functionCall`` part of each step of the current turn
    that has no signature there (in place)."""
    start = 0
    for index, content in enumerate(contents):
        if content["role"] == "user" and not any("functionResponse" in p for p in content["parts"]):
            start = index + 1
    for index in range(start, len(contents)):
        content = contents[index]
        if content["role"] != "model":
            continue
        first_call = next((p for p in content["parts"] if "functionCall" in p), None)
        if first_call is not None and "thoughtSignature" not in first_call:
            parts = [
                {**p, "thoughtSignature": SKIP_SIGNATURE} if p is first_call else p
                for p in content["parts"]
            ]
            contents[index] = {**content, "parts": parts}


def build_body(rows: Sequence[Message], model: str | None = None) -> dict[str, Any]:
    """The ``systemInstruction`` (when any) and ``contents`` for ``rows`` (already swept)."""
    items = plan(rows, later_system="instruction")
    with_ids = sends_call_ids(model)
    contents = alternating_turns(
        items,
        user=_user,
        assistant=lambda turn: _model(turn, with_ids),
        results=lambda results: _responses(results, with_ids),
        content_key="parts",
        opener={"role": "user", "parts": [{"text": CONTINUED}]},
    )
    if needs_signatures(model):
        _sign_current_turn(contents)
    body: dict[str, Any] = {}
    system = system_texts(items)
    if system:
        body["systemInstruction"] = {"parts": [{"text": text} for text in system]}
    body["contents"] = contents
    return body
