"""One place that maps a config's pluggable kinds to their registries."""

from __future__ import annotations

import importlib

from rl_core.registry import Registry

#: Kind → (module, name) of its registry, imported when first asked for.
_REGISTRIES: dict[str, tuple[str, str]] = {
    "model": ("rl_core.models.registry", "MODELS"),
    "env": ("rl_core.envs.registry", "ENVS"),
    "advantage": ("rl_core.algorithms.registry", "ADVANTAGES"),
    "policy_loss": ("rl_core.algorithms.registry", "POLICY_LOSSES"),
    "is_correction": ("rl_core.algorithms.off_policy", "IS_CORRECTIONS"),
    "reward": ("rl_core.rewards.registry", "REWARDS"),
    "judge_parser": ("rl_core.rewards.model_reward", "JUDGE_PARSERS"),
    "kl_estimator": ("rl_core.algorithms.kl", "KL_ESTIMATORS"),
    "loss_agg_mode": ("rl_core.algorithms.aggregation", "LOSS_AGG_MODES"),
    "optimizer": ("rl_core.training.optim", "OPTIMIZERS"),
    "lr_schedule": ("rl_core.training.schedules", "LR_SCHEDULES"),
    "rollout_engine": ("rl_core.llm.implementations", "ROLLOUT_ENGINES"),
    "trainer_backend": ("rl_core.llm.implementations", "TRAINER_BACKENDS"),
    "tool": ("rl_core.agents.tools", "TOOLS"),
    "tool_parser": ("rl_core.agents.parsers", "TOOL_PARSERS"),
    "agent_loop": ("rl_core.agents.loops", "AGENT_LOOPS"),
    "agent_context": ("rl_core.agents.context", "AGENT_CONTEXTS"),
    "sandbox": ("rl_core.agents.sandbox", "SANDBOXES"),
    "prompt_source": ("rl_core.data.sources", "PROMPT_SOURCES"),
    "single_response_baseline": ("rl_core.online.baseline", "BASELINES"),
}
#: The kinds :func:`registry_for` knows.
KINDS = tuple(_REGISTRIES)


def registry_for(kind: str) -> Registry:
    """Return the registry for ``kind`` with built-ins loaded.

    Args:
        kind: One of :data:`KINDS`.

    Raises:
        KeyError: ``kind`` is none of those.
    """
    try:
        module, attribute = _REGISTRIES[kind]
    except KeyError:
        raise KeyError(f"no registry of {kind!r}; known kinds: {', '.join(KINDS)}") from None
    # only the module of this kind: validating a CartPole config must not import transformers
    registry: Registry = getattr(importlib.import_module(module), attribute)
    registry.load_builtins()
    return registry


def load_builtins() -> None:
    """Register rlpipe's built-in entries of every kind (idempotent).

    Each registry loads its own built-ins on first use; this loads them all at once, so a
    module registering its own parts with ``force=True`` replaces built-ins for good.
    """
    for kind in KINDS:
        registry_for(kind)
