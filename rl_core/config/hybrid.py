"""When a run uses the hybrid engine (rollout and trainer in one worker process).

``cluster.hybrid_engine``: ``auto`` (the default) uses it whenever the placement allows,
``on`` requires it (a config that does not allow it is refused), ``off`` keeps separate
rollout (and reference) workers. Every rollout engine can be hosted (``hf``, ``vllm``: it
sleeps while the trainer computes).
"""

from __future__ import annotations

from typing import Any

from rl_core.config.placement import component_specs, parse_cpu_set


def _cpu_sets(placement: dict[str, str | int]) -> dict[str, Any]:
    # "all" is the same index set wherever it appears; compare specs, not the cluster size
    return {
        name: spec if spec == "all" else parse_cpu_set(spec)
        for name, spec in component_specs(placement).items()
    }


def hybrid_engine_blockers(cfg: Any) -> list[str]:
    """Why this config cannot use the hybrid engine (empty when it can).

    Args:
        cfg: A validated :class:`~rl_core.config.RLPipeConfig`.
    """
    reasons = []
    sets = _cpu_sets(cfg.cluster.component_placement)
    if sets.get("rollout") != sets.get("actor"):
        reasons.append(
            "cluster.component_placement puts rollout and actor on different CPUs or GPUs "
            "(disaggregated placement)"
        )
    if cfg.rollout.num_workers != cfg.actor.num_workers:
        reasons.append(
            f"rollout.num_workers ({cfg.rollout.num_workers}) differs from actor.num_workers "
            f"({cfg.actor.num_workers}): the hybrid engine runs one rollout engine in each "
            "trainer worker"
        )
    if cfg.run.mode == "async":
        reasons.append(
            "run.mode = 'async' collects while the trainer updates, so the rollout policy "
            "needs a process of its own"
        )
    return reasons


def uses_hybrid_engine(cfg: Any) -> bool:
    """True when rollout (and reference) models live in the trainer workers' processes."""
    mode = cfg.cluster.hybrid_engine
    return mode == "on" or (mode == "auto" and not hybrid_engine_blockers(cfg))
