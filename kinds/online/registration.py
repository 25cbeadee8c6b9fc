"""The online kind: reasoning runs that serve their policy and learn from users' feedback.

It refines the reasoning kind: its models, run names and evaluation are reasoning's, and a
reasoning config with ``online.enabled: true`` is an online config. Its config adds the
``online`` section (serving, the feedback store, promotion) and its runtime trains on
served responses instead of generating.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinds.online.config import OnlineConfig
from kinds.reasoning.registration import REASONING
from rl_core.kind import Kind, register_kind


def selects(data: Mapping[str, Any]) -> bool:
    """Whether a written reasoning config is an online one: ``online.enabled: true``."""
    online = data.get("online")
    return isinstance(online, Mapping) and online.get("enabled") is True


def runtime_of(cfg: OnlineConfig) -> type:
    """The online runtime class (imported now: it needs Ray and torch)."""
    from kinds.online.runtime import OnlineRuntime

    return OnlineRuntime


ONLINE = register_kind(
    Kind(
        name="online",
        config=OnlineConfig,
        runtime=runtime_of,
        score_metric=REASONING.score_metric,
        task_name=REASONING.task_name,
        protocol=REASONING.protocol,
        data_fingerprint=REASONING.data_fingerprint,
        refines=REASONING.name,
        selects=selects,
    )
)
