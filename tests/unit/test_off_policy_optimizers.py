"""SAC, CrossQ and RLPD take their optimizers from the ``actor`` section: optimizer class,
weight decay, Adam epsilon, learning-rate schedule and warm-up, through a checkpoint too;
settings they could not apply are refused by the config."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from kinds.embodied.workers.off_policy_trainer import OffPolicyActorWorker
from rl_core.config import ConfigError, load_config
from rl_core.envs import EnvSpaces

SPACES = EnvSpaces(
    gym.spaces.Box(-10.0, 10.0, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
)
BATCH = 16


def worker(*overrides: str, preset: str = "sac_pendulum") -> OffPolicyActorWorker:
    cfg = load_config(preset, [f"replay.batch_size={BATCH}", *overrides])
    return OffPolicyActorWorker(cfg.model_dump(mode="json"), 0, (), SPACES)


def sample(seed: int, steps: int = 2) -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(seed)
    rows = steps * BATCH
    return {
        "states": torch.randn(rows, 3, generator=g).numpy(),
        "actions": (torch.rand(rows, 1, generator=g) * 2 - 1).numpy(),
        "rewards": torch.randn(rows, generator=g).numpy(),
        "next_states": torch.randn(rows, 3, generator=g).numpy(),
        "terminated": np.zeros(rows, np.float32),
    }


def optimizers(w: OffPolicyActorWorker) -> dict[str, torch.optim.Optimizer]:
    learner = w.learner
    return {
        "actor": learner.actor_optimizer,
        "critic": learner.critic_optimizer,
        "alpha": learner.alpha_optimizer,
    }


def group(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    (only,) = optimizer.param_groups
    return only


def test_the_defaults_are_fused_adam_with_torch_epsilon() -> None:
    for optimizer in optimizers(worker()).values():
        assert type(optimizer) is torch.optim.Adam
        settings = group(optimizer)
        assert settings["eps"] == 1e-8 and settings["weight_decay"] == 0.0
        assert settings["betas"] == (0.9, 0.999) and settings["fused"] is True
    crossq = worker(preset="crossq_pendulum")
    assert group(crossq.learner.actor_optimizer)["betas"] == (0.5, 0.999)


def test_adamw_with_weight_decay_and_epsilon_is_built_as_configured() -> None:
    w = worker("actor.optimizer=adamw", "actor.weight_decay=0.01", "actor.adam_eps=1e-6")
    built = optimizers(w)
    assert all(type(o) is torch.optim.AdamW for o in built.values())
    assert [group(o)["weight_decay"] for o in built.values()] == [0.01, 0.01, 0.0]
    assert all(group(o)["eps"] == 1e-6 for o in built.values())
    before = [p.detach().clone() for p in w.policy.actor_parameters()]
    assert w.update(0, sample(0))["train/gradient_steps"] == 2.0
    after = w.policy.actor_parameters()
    assert any(not torch.equal(a, p) for a, p in zip(before, after, strict=True))


def test_sgd_is_built_for_actor_critics_and_temperature() -> None:
    built = optimizers(worker("actor.optimizer=sgd", "actor.weight_decay=0.1"))
    assert all(type(o) is torch.optim.SGD for o in built.values())
    assert [group(o)["weight_decay"] for o in built.values()] == [0.1, 0.1, 0.0]


def test_a_linear_schedule_lowers_every_learning_rate_over_the_iterations() -> None:
    w = worker(
        "actor.lr=1e-3",
        "actor.lr_schedule=linear",
        "run.max_iterations=4",
        "algorithm.off_policy.critic_lr=2e-3",
    )
    seen = []
    for it in range(4):
        metrics = w.update(it, sample(it))
        rates = {name: group(o)["lr"] for name, o in optimizers(w).items()}
        assert metrics["train/lr"] == rates["actor"]
        seen.append(rates)
    assert [r["actor"] for r in seen] == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])
    assert [r["critic"] for r in seen] == pytest.approx([2e-3, 1.5e-3, 1e-3, 5e-4])
    assert [r["alpha"] for r in seen] == pytest.approx([r["actor"] for r in seen])


def test_warmup_starts_low_and_a_constant_schedule_keeps_the_rate() -> None:
    warm = worker("actor.lr=1e-3", "actor.warmup_iterations=4")
    assert warm.update(0, sample(0))["train/lr"] == pytest.approx(2.5e-4)
    assert group(warm.learner.critic_optimizer)["lr"] == pytest.approx(2.5e-4)
    steady = worker("actor.lr=1e-3")
    assert [steady.update(it, sample(it))["train/lr"] for it in range(2)] == [1e-3, 1e-3]


def test_a_checkpoint_restores_the_optimizers_and_the_run_continues_bit_for_bit(
    tmp_path,
) -> None:
    overrides = (
        "actor.optimizer=adamw",
        "actor.weight_decay=0.01",
        "actor.lr_schedule=cosine",
        "run.max_iterations=4",
    )
    straight = worker(*overrides)
    for it in range(2):
        straight.update(it, sample(it))
    straight.save_checkpoint(str(tmp_path), "step_000002")
    resumed = worker(*overrides)
    resumed.load_checkpoint(str(tmp_path), "step_000002")
    for name, optimizer in optimizers(resumed).items():
        saved = optimizers(straight)[name].state_dict()
        loaded = optimizer.state_dict()
        assert loaded["param_groups"] == saved["param_groups"], name
        for key, state in saved["state"].items():
            for entry, value in state.items():
                assert torch.equal(loaded["state"][key][entry], value), (name, key, entry)
    for it in range(2, 4):
        assert (
            straight.update(it, sample(it))["train/lr"]
            == resumed.update(it, sample(it))["train/lr"]
        )
    for (key, a), b in zip(
        straight.policy.state_dict().items(), resumed.policy.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), key


PENDULUM = ["env.env_id=Pendulum-v1", "model.model_type=mlp_sac", "algorithm.loss_type=sac"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["actor.optimizer=sgd", "actor.adam_eps=1e-6"],
            "actor.adam_eps = 1e-06 has no effect with actor.optimizer = 'sgd' (allowed: null",
        ),
        (
            ["actor.optimizer=sgd", "algorithm.off_policy.adam_beta1=0.5"],
            "algorithm.off_policy.adam_beta1 = 0.5 has no effect with actor.optimizer = 'sgd' "
            "(allowed: 0.9",
        ),
    ],
)
def test_adam_settings_with_sgd_are_refused_by_name(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_config("ppo_cartpole", [*PENDULUM, *overrides])


def test_honoured_settings_validate() -> None:
    cfg = load_config(
        "sac_pendulum",
        [
            "actor.optimizer=adamw",
            "actor.weight_decay=0.01",
            "actor.adam_eps=1e-6",
            "actor.lr_schedule=cosine",
            "actor.warmup_iterations=2",
        ],
    )
    assert cfg.actor.optimizer == "adamw" and cfg.actor.adam_eps == 1e-6
    assert load_config("sac_pendulum", ["actor.optimizer=sgd"]).actor.optimizer == "sgd"
