"""One place that maps a config's pluggable kinds to their registries."""

from __future__ import annotations

from rl_core.registry import Registry


def registry_for(kind: str) -> Registry:
    """Return the registry for ``kind`` with built-ins loaded.

    Args:
        kind: ``model``, ``env``, ``advantage``, ``policy_loss``, ``is_correction`` or
            ``reward``.
    """
    from rl_core.algorithms.off_policy import IS_CORRECTIONS
    from rl_core.algorithms.registry import ADVANTAGES, POLICY_LOSSES
    from rl_core.envs.registry import ENVS
    from rl_core.models.registry import MODELS
    from rl_core.rewards.registry import REWARDS

    registries: dict[str, Registry] = {
        "model": MODELS,
        "env": ENVS,
        "advantage": ADVANTAGES,
        "policy_loss": POLICY_LOSSES,
        "is_correction": IS_CORRECTIONS,
        "reward": REWARDS,
    }
    return registries[kind]
