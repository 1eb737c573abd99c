"""Which Bedrock models take Converse ``cachePoint`` blocks, and where: the model table.

Bedrock refuses a cache point on a model without prompt caching ("You invoked an unsupported
model or your request did not allow prompt caching", reported for Claude 3 Haiku, Claude 3
Sonnet and DeepSeek R1), so a cache point goes only to a model this table names; any other
model id, and an id that names no model (an application inference profile or provisioned
throughput ARN), gets none.

Source: the Amazon Bedrock User Guide, "Prompt caching for faster model inference", section
"Supported models, Regions, and limits" (generally available: Claude 3.7 Sonnet, Claude 3.5
Haiku, the Claude 4 family, Nova Micro, Lite, Pro and Premier; Claude 3.5 Sonnet v2 only for
accounts admitted to the preview, so not here), and the Claude 5 model cards (Opus 5, Sonnet 5
and Fable 5: system, messages and tools). Claude 3 Haiku, Sonnet and Opus, Claude 3.5 Sonnet
(v1 and v2), Claude 2.x and Instant, Nova Sonic, Canvas, Reel and Nova 2 (reported refused with
``extraneous key [cachePoint] is not permitted``) are not in it.

Fields: Claude takes cache points in ``system``, ``messages`` and ``tools``; Nova in ``system``
and ``messages`` only, and not right after a ``toolResult`` block (refused as an extraneous
key), so for Nova a ``toolResult`` block is never the block a cache point follows.

Model ids are read as Bedrock accepts them: a foundation-model id
(``anthropic.claude-sonnet-4-5-20250929-v1:0``), a cross-Region inference profile id (a
geography prefix ``us.``, ``us-gov.``, ``eu.``, ``apac.``, ``au.``, ``jp.``, ``ca.`` or
``global.`` before it), or the ARN of either (``arn:aws…:bedrock:<region>:<account>:
foundation-model/<id>`` or ``…:inference-profile/<profile id>``), in any case.
"""

from __future__ import annotations

import re

import attrs


@attrs.frozen
class CachingModel:
    """A row of the table: the models ``pattern`` matches at the start of the bare model id,
    the fields that take cache points, and whether a cache point may follow a ``toolResult``
    block."""

    name: str
    pattern: re.Pattern[str]
    fields: tuple[str, ...]
    after_tool_result: bool


def _row(name: str, pattern: str, *, claude: bool) -> CachingModel:
    fields = ("system", "messages", "tools") if claude else ("system", "messages")
    return CachingModel(name, re.compile(pattern + r"(?=[-:@]|\Z)"), fields, claude)


#: The models that take cache points (bare ids, lower case; a version suffix may follow).
TABLE: tuple[CachingModel, ...] = (
    _row("Claude 3.7 Sonnet", r"anthropic\.claude-3-7-sonnet", claude=True),
    _row("Claude 3.5 Haiku", r"anthropic\.claude-3-5-haiku", claude=True),
    _row(
        "Claude 4 family (Opus, Sonnet, Haiku 4 and 4.x)",
        r"anthropic\.claude-(?:opus|sonnet|haiku)-4(?:-\d{1,2})?",
        claude=True,
    ),
    _row(
        "Claude 5 (Opus, Sonnet, Fable 5 and 5.x)",
        r"anthropic\.claude-(?:opus|sonnet|fable)-5(?:-\d{1,2})?",
        claude=True,
    ),
    _row(
        "Nova Micro, Lite, Pro, Premier",
        r"amazon\.nova-(?:micro|lite|pro|premier)-v1",
        claude=False,
    ),
)

#: Geography prefixes of cross-Region inference profile ids.
PROFILE_PREFIXES = ("us", "us-gov", "eu", "apac", "au", "jp", "ca", "global")

_ARN = re.compile(
    r"\Aarn:aws(?:-[a-z]+)*:bedrock:[a-z0-9-]*:\d*:"
    r"(?:foundation-model|inference-profile)/(?P<id>.+)\Z"
)
_PROFILE = re.compile(rf"\A(?:{'|'.join(re.escape(p) for p in PROFILE_PREFIXES)})\.")


def bare_model_id(model: str) -> str:
    """The foundation-model id that ``model`` names: an ARN's resource id, without the
    inference profile's geography prefix, in lower case; an application inference profile or
    other ARN is returned whole (no row matches it)."""
    lowered = model.strip().lower()
    arn = _ARN.match(lowered)
    if arn is not None:
        lowered = arn.group("id")
    return _PROFILE.sub("", lowered, count=1)


def caching_model(model: str | None) -> CachingModel | None:
    """The table's row for ``model``, or None when Bedrock does not cache it (or it is
    unknown)."""
    if not model:
        return None
    bare = bare_model_id(model)
    return next((row for row in TABLE if row.pattern.match(bare)), None)
