"""Settings of the off-policy family (SAC, CrossQ, RLPD, IQL) and the rules relating them.

``algorithm.off_policy``, ``algorithm.iql`` and ``replay``, plus the checks that relate
them to the model and the run.

Used when ``algorithm.loss_type`` names an off-policy algorithm
(:mod:`rl_core.algorithms.actor_critic_family`); an on-policy run that sets them is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from rl_core.config.limits import MAX_EPOCHS, MAX_MINIBATCHES, MAX_STEPS
from rl_core.config.sections import Section

#: Most transitions a replay buffer may hold.
MAX_REPLAY_CAPACITY = 100_000_000


class OffPolicyConfig(Section):
    """Update rule of SAC, CrossQ, RLPD and IQL (``algorithm.off_policy``)."""

    utd_ratio: float = Field(
        1.0,
        gt=0.0,
        le=1_000.0,
        description="Gradient steps per env step collected (update-to-data ratio); an "
        "iteration runs round(utd_ratio * env steps of the iteration) steps.",
    )
    tau: float = Field(
        0.005, gt=0.0, le=1.0, description="Polyak rate of the target critics (not crossq)."
    )
    init_alpha: float = Field(1.0, gt=0.0, description="Initial entropy temperature.")
    autotune_alpha: bool = Field(True, description="Tune the temperature to target_entropy.")
    target_entropy: float | None = Field(
        None, description="Entropy the temperature aims at (None: -action dimensions)."
    )
    actor_update_interval: int = Field(
        1,
        ge=1,
        le=MAX_EPOCHS,
        description="Critic steps per actor and temperature step (policy delay; crossq: 3; "
        "iql: value steps per actor step).",
    )
    critic_subset: int | None = Field(
        None,
        ge=1,
        le=64,
        description="TD target: minimum over this many randomly chosen critics (rlpd: 2); "
        "None: over all.",
    )
    critic_lr: float | None = Field(
        None,
        gt=0.0,
        description="Learning rate of the critics (iql: and of V); None: actor.lr; follows "
        "actor.lr_schedule like it.",
    )
    alpha_lr: float | None = Field(
        None, gt=0.0, description="None: actor.lr; follows actor.lr_schedule like it."
    )
    adam_beta1: float = Field(
        0.9, ge=0.0, lt=1.0, description="Adam/AdamW beta1 (crossq: 0.5; sgd: keep 0.9)."
    )


class IQLConfig(Section):
    """Implicit Q-Learning's own settings (``algorithm.iql``; Kostrikov et al., 2021)."""

    expectile: float = Field(
        0.7,
        gt=0.0,
        lt=1.0,
        description="τ of the expectile regression of V(s) towards the target critics' "
        "smallest Q(s, a) of the dataset action: 0.5 fits the dataset policy's value, "
        "towards 1 the best action the data took.",
    )
    temperature: float = Field(
        3.0,
        ge=0.0,
        le=1_000.0,
        description="β of the actor's advantage weights exp(β·(Q − V)); 0 weighs every "
        "dataset action 1 (behaviour cloning).",
    )
    max_weight: float = Field(
        100.0, gt=0.0, le=1e6, description="Largest advantage weight (the clip of exp(β·A))."
    )


class ReplayConfig(Section):
    """The replay buffer worker of an off-policy run."""

    capacity: int = Field(
        1_000_000, ge=1, le=MAX_REPLAY_CAPACITY, description="Most transitions kept."
    )
    batch_size: int = Field(256, ge=1, le=MAX_MINIBATCHES, description="Rows per gradient step.")
    learning_starts: int = Field(
        1_000,
        ge=0,
        le=MAX_STEPS,
        description="Transitions collected before the first gradient step.",
    )
    checkpoint: bool = Field(
        True,
        description="Save the buffer with every checkpoint (resume continues exactly); off: a "
        "resumed run starts with an empty buffer.",
    )
    offline_data: str | None = Field(
        None,
        description="rlpd: safetensors file of offline transitions "
        "(scripts/make_offline_data.py writes one); a relative path written in a YAML file "
        "names a file under the working directory, or else one beside the YAML file.",
    )
    offline_fraction: float = Field(
        0.5, gt=0.0, lt=1.0, description="rlpd: share of each minibatch from offline_data."
    )


def off_policy_problems(cfg: Any, spec: Any) -> list[str]:
    """Why a config cannot train with its off-policy algorithm (empty when it can).

    Args:
        cfg: A validated :class:`~rl_core.config.RLPipeConfig` whose ``algorithm.loss_type``
            is an off-policy algorithm.
        spec: That algorithm's :class:`~rl_core.algorithms.actor_critic_family.ActorCriticSpec`.
    """
    from rl_core.registries import registry_for

    loss = cfg.algorithm.loss_type
    problems = []
    builder = registry_for("model").get(cfg.model.model_type).builder
    forward_types = getattr(builder, "forward_types", ())
    missing = [name for name in spec.model_forwards if name not in forward_types]
    if missing:
        problems.append(
            f"model.model_type = {cfg.model.model_type!r} has no {'/'.join(missing)} "
            f"branch (use {spec.model!r})"
        )
    if spec.critic_norm is not None and cfg.model.critic_norm != spec.critic_norm:
        problems.append(
            f"model.critic_norm = {cfg.model.critic_norm!r}; {loss} needs {spec.critic_norm!r}"
        )
    subset = cfg.algorithm.off_policy.critic_subset
    if subset is not None and subset > cfg.model.num_critics:
        problems.append(
            f"algorithm.off_policy.critic_subset = {subset} exceeds model.num_critics "
            f"({cfg.model.num_critics})"
        )
    data = cfg.replay.offline_data
    if spec.needs_offline_data and not data:
        problems.append(
            "replay.offline_data is not set; rlpd samples half of each minibatch from offline "
            "transitions (write them with 'python scripts/make_offline_data.py')"
        )
    if data and not spec.needs_offline_data:
        problems.append(f"replay.offline_data is set but {loss} does not read offline data")
    if data and not Path(data).is_file():
        problems.append(f"replay.offline_data = {data!r} does not exist")
    if cfg.run.mode == "async":
        problems.append("run.mode = 'async' is for on-policy PPO (allowed: 'sync')")
    return problems + _optimizer_problems(cfg)


def _optimizer_problems(cfg: Any) -> list[str]:
    """Adam settings an off-policy run with ``actor.optimizer = 'sgd'`` could not apply."""
    actor, beta1 = cfg.actor, cfg.algorithm.off_policy.adam_beta1
    if actor.optimizer != "sgd":
        return []
    problems = []
    if actor.adam_eps is not None:
        problems.append(
            f"actor.adam_eps = {actor.adam_eps!r} has no effect with actor.optimizer = 'sgd' "
            "(allowed: null, or optimizer adam/adamw)"
        )
    default = OffPolicyConfig.model_fields["adam_beta1"].default
    if beta1 != default:
        problems.append(
            f"algorithm.off_policy.adam_beta1 = {beta1!r} has no effect with actor.optimizer "
            f"= 'sgd' (allowed: {default}, or optimizer adam/adamw)"
        )
    return problems
