"""The worker groups of a reasoning run, for either placement.

* Hybrid engine (collocated placement, the default): one group of trainer ranks, each
  also holding a rollout engine and, with a KL penalty, the reference model.
* Disaggregated: trainer ranks, rollout workers and a reference worker in groups (and
  processes) of their own. The megatron backend keeps the reference in its trainer ranks
  (tensor-parallel like the policy), so it has no reference worker.

Either way, a run whose reward uses a reward model or judge (``reward.model``) has a group of
reward-model workers: on the trainer's devices (``placement: collocated``) or where
``cluster.component_placement`` places ``reward`` (``separate``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from infra.cluster.cluster_placement import ClusterPlacement, place
from infra.cluster.deadlines import Liveness
from infra.cluster.placement import PlacementError
from infra.cluster.worker_group import WorkerGroup
from infra.llm.workers.llm_workers import LLMActorWorker, LLMRefWorker
from kinds.reasoning.workers.llm_hybrid_worker import LLMHybridWorker
from kinds.reasoning.workers.llm_rollout_worker import LLMRolloutWorker
from kinds.reasoning.workers.reward_scorer_worker import RewardScorerWorker
from rl_core.config import RLPipeConfig
from rl_core.config.hybrid import uses_hybrid_engine
from rl_core.config.placement import component_specs
from rl_core.rewards.model_reward import reward_plan

logger = logging.getLogger(__name__)


@dataclass
class ReasoningGroups:
    """Who trains, who generates, who scores reference log-probs.

    Attributes:
        actor: The trainer ranks.
        rollout: The workers that generate (``actor`` itself with the hybrid engine).
        ref: The reference worker (None with the hybrid engine or without a KL penalty).
        reward: The reward-model workers (None without a model reward).
        hybrid: Whether rollout engines and reference live in the trainer ranks.
        placement: Where they run (and, on GPUs, the bundles reserved for them).
    """

    actor: WorkerGroup
    rollout: WorkerGroup
    ref: WorkerGroup | None
    hybrid: bool
    placement: ClusterPlacement | None = None
    reward: WorkerGroup | None = None

    @property
    def all(self) -> list[WorkerGroup]:
        """Every distinct group."""
        others = [] if self.hybrid else [self.rollout, self.ref]
        return [g for g in (self.actor, *others, self.reward) if g is not None]


def start_reasoning_groups(
    cfg: RLPipeConfig, config: dict[str, Any], free_cpus: float = 0.0
) -> ReasoningGroups:
    """Place and start the worker groups of ``cfg``'s placement (not yet waited for).

    Args:
        cfg: The validated run config.
        config: The same config as a plain dict (what workers are built from).
        free_cpus: CPUs to leave free for processes outside the groups (see
            :func:`~infra.cluster.cluster_placement.place`).
    """
    use_ref = cfg.algorithm.kl_coef > 0 and cfg.actor.backend == "fsdp"
    hybrid = uses_hybrid_engine(cfg)
    world = cfg.actor.num_workers
    sizes = {"actor": world}
    if not hybrid:
        sizes["rollout"] = cfg.rollout.num_workers
        if use_ref:  # with the actor (its CPUs, or its first GPU) unless placed elsewhere
            sizes["ref"] = 1
    if reward_plan(cfg.reward).uses_model:
        sizes["reward"] = cfg.reward.model.num_workers
        check_reward_placement(cfg)
    plan = place(cfg, sizes, tensor_parallel=cfg.actor.tensor_parallel_size, free_cpus=free_cpus)
    liveness = Liveness.from_config(cfg.timeouts)
    reward = None
    if "reward" in sizes:
        reward = WorkerGroup(
            "reward",
            RewardScorerWorker,
            sizes["reward"],
            plan["reward"],
            lambda r: (config, r, plan["reward"].cpus),
            liveness,
        )
    actor = WorkerGroup(
        "actor",
        LLMHybridWorker if hybrid else LLMActorWorker,
        world,
        plan["actor"],
        lambda r: (config, r, plan["actor"].cpus, world),
        liveness,
        tensor_parallel=cfg.actor.tensor_parallel_size,
    )
    if hybrid:
        logger.info("hybrid engine: rollout engine and reference inside the trainer ranks")
        return ReasoningGroups(actor, actor, None, hybrid=True, placement=plan, reward=reward)
    rollout = WorkerGroup(
        "rollout",
        LLMRolloutWorker,
        sizes["rollout"],
        plan["rollout"],
        lambda r: (config, r, plan["rollout"].cpus),
        liveness,
    )
    ref = None
    if use_ref:
        ref = WorkerGroup(
            "reference",
            LLMRefWorker,
            1,
            plan["ref"],
            lambda r: (config, r, plan["ref"].cpus),
            liveness,
        )
    return ReasoningGroups(actor, rollout, ref, hybrid=False, placement=plan, reward=reward)


def check_reward_placement(cfg: RLPipeConfig) -> None:
    """Collocated reward-model workers live on the trainer's set: the config may not move them.

    Raises:
        PlacementError: ``reward.model.placement`` is ``collocated`` but
            ``cluster.component_placement`` places ``reward`` elsewhere than ``actor``.
    """
    specs = component_specs(cfg.cluster.component_placement)
    if cfg.reward.model.placement != "collocated" or "reward" not in specs:
        return
    if specs["reward"] != specs.get("actor"):
        raise PlacementError(
            f"reward.model.placement = 'collocated' puts the reward-model workers on the "
            f"trainer's set ({specs.get('actor')!r}), but cluster.component_placement places "
            f"'reward' on {specs['reward']!r}: set reward.model.placement to 'separate', or "
            "leave 'reward' out of the placement"
        )
