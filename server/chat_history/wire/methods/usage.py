"""The usage family: ``chatHistory/reportUsage`` — a provider's reported usage, which calibrates
later estimates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from chat_history.service import usage
from chat_history.service.manager import ChatHistoryManager
from chat_history.wire.checks import (
    model_arg,
)
from chat_history.wire.methods.base import Method, Session
from chat_history.wire.protocol import (
    wire,
)

if TYPE_CHECKING:
    pass


@attrs.define
class ReportUsageParams:
    """``chatHistory/reportUsage``: no conversation key (calibration is per provider and model)."""

    estimated_tokens: int = attrs.field(kw_only=True)
    prompt_tokens: int = attrs.field(kw_only=True)
    provider: str | None = None
    model: str | None = None


def usage_args(params: ReportUsageParams) -> tuple[str | None, str | None, int, int]:
    """``chatHistory/reportUsage``'s (provider, model, estimatedTokens, promptTokens); the
    figures' range is the service's rule (policy.calibration.check_usage)."""
    return params.provider, model_arg(params.model), params.estimated_tokens, params.prompt_tokens


def report_usage(m: ChatHistoryManager, ls: Session, p: ReportUsageParams) -> Any:
    """``chatHistory/reportUsage``: a provider's reported usage calibrates later estimates."""
    return wire(usage.report(m, *usage_args(p)))


METHODS = (Method("chatHistory/reportUsage", ReportUsageParams, report_usage),)
