"""One place that maps a config's pluggable kinds to their registries."""

from __future__ import annotations

from rl_core.registry import Registry

#: The kinds :func:`registry_for` knows.
KINDS = (
    "model",
    "env",
    "advantage",
    "policy_loss",
    "is_correction",
    "reward",
    "kl_estimator",
    "loss_agg_mode",
    "optimizer",
    "lr_schedule",
    "rollout_engine",
    "trainer_backend",
    "tool",
    "tool_parser",
    "agent_loop",
    "agent_context",
    "sandbox",
    "prompt_source",
)


def registry_for(kind: str) -> Registry:
    """Return the registry for ``kind`` with built-ins loaded.

    Args:
        kind: One of :data:`KINDS`.

    Raises:
        KeyError: ``kind`` is none of those.
    """
    from rl_core.agents.context import AGENT_CONTEXTS
    from rl_core.agents.loops import AGENT_LOOPS
    from rl_core.agents.parsers import TOOL_PARSERS
    from rl_core.agents.sandbox import SANDBOXES
    from rl_core.agents.tools import TOOLS
    from rl_core.algorithms.aggregation import LOSS_AGG_MODES
    from rl_core.algorithms.kl import KL_ESTIMATORS
    from rl_core.algorithms.off_policy import IS_CORRECTIONS
    from rl_core.algorithms.registry import ADVANTAGES, POLICY_LOSSES
    from rl_core.data.sources import PROMPT_SOURCES
    from rl_core.envs.registry import ENVS
    from rl_core.llm.implementations import ROLLOUT_ENGINES, TRAINER_BACKENDS
    from rl_core.models.registry import MODELS
    from rl_core.rewards.registry import REWARDS
    from rl_core.training.optim import OPTIMIZERS
    from rl_core.training.schedules import LR_SCHEDULES

    registries: dict[str, Registry] = {
        "model": MODELS,
        "env": ENVS,
        "advantage": ADVANTAGES,
        "policy_loss": POLICY_LOSSES,
        "is_correction": IS_CORRECTIONS,
        "reward": REWARDS,
        "kl_estimator": KL_ESTIMATORS,
        "loss_agg_mode": LOSS_AGG_MODES,
        "optimizer": OPTIMIZERS,
        "lr_schedule": LR_SCHEDULES,
        "rollout_engine": ROLLOUT_ENGINES,
        "trainer_backend": TRAINER_BACKENDS,
        "tool": TOOLS,
        "tool_parser": TOOL_PARSERS,
        "agent_loop": AGENT_LOOPS,
        "agent_context": AGENT_CONTEXTS,
        "sandbox": SANDBOXES,
        "prompt_source": PROMPT_SOURCES,
    }
    registry = registries[kind]
    registry.load_builtins()
    return registry


def load_builtins() -> None:
    """Register rlpipe's built-in entries of every kind (idempotent).

    Each registry loads its own built-ins on first use; this loads them all at once, so a
    module registering its own parts with ``force=True`` replaces built-ins for good.
    """
    for kind in KINDS:
        registry_for(kind)
