"""Task options shared by every step.

Steps get only a session id and the iteration number; nothing is cached or persisted
because state lives in Ray workers (Prefect's result cache cannot restore it).
"""

from __future__ import annotations

from typing import Any

from prefect.cache_policies import NO_CACHE

STEP_OPTIONS: dict[str, Any] = {
    "cache_policy": NO_CACHE,
    "persist_result": False,
    "log_prints": False,
}

#: Options for steps that are safe to repeat (idempotent given the workers' state).
RETRYABLE_STEP_OPTIONS: dict[str, Any] = {**STEP_OPTIONS, "retries": 2, "retry_delay_seconds": 0}
