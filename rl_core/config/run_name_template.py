"""Run names with the scheduled time in them, for deployments that start a new run each time.

A scheduled ``train-*`` deployment with a fixed ``run_name`` resumes the same run at every
scheduled time: once that run has finished, the later ones have nothing to train. A
``run_name`` with a placeholder, e.g. ``grpo-arith-{scheduled_date}``, names a new run per
scheduled time instead.
"""

from __future__ import annotations

import string
from datetime import UTC, datetime

from rl_core.config.loader import ConfigError

#: Placeholder → strftime format of the flow run's scheduled start (UTC).
RUN_NAME_PLACEHOLDERS = {
    "scheduled_date": "%Y%m%d",
    "scheduled_time": "%Y%m%d-%H%M",
    "scheduled_timestamp": "%Y%m%d-%H%M%S",
}
_ALLOWED = (
    "{scheduled_date} (YYYYMMDD), {scheduled_time} (YYYYMMDD-HHMM) and {scheduled_timestamp} "
    "(YYYYMMDD-HHMMSS)"
)


def expand_run_name(template: str, when: datetime) -> str:
    """``template`` with its placeholders replaced by ``when`` in UTC.

    Args:
        template: A run name, possibly with ``{scheduled_date}`` or ``{scheduled_time}``.
        when: The flow run's scheduled start (a naive datetime counts as UTC).

    Raises:
        ConfigError: An unknown placeholder, or braces that are not a placeholder.
    """
    if "{" not in template and "}" not in template:
        return template
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ConfigError(f"run_name {template!r}: {exc}; placeholders: {_ALLOWED}") from None
    unknown = sorted({f for f in fields if f not in RUN_NAME_PLACEHOLDERS})
    if unknown:
        raise ConfigError(
            f"run_name {template!r}: unknown placeholder {{{unknown[0]}}}; "
            f"placeholders: {_ALLOWED}, the scheduled start of the flow run in UTC"
        )
    utc = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    return template.format(**{k: utc.strftime(f) for k, f in RUN_NAME_PLACEHOLDERS.items()})
