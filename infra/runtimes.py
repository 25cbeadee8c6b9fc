"""The built-in model categories: one registry entry each (see :mod:`infra.step_runtime`)."""

from __future__ import annotations

from infra.embodied_runtime import EmbodiedRuntime
from infra.reasoning_runtime import ReasoningRuntime
from infra.step_runtime import register_category

register_category(EmbodiedRuntime)
register_category(ReasoningRuntime)
