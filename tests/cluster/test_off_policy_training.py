"""SAC, CrossQ and RLPD on real Ray workers: the replay buffer goes through a checkpoint so
a resumed run continues bit for bit, retried steps add and sample exactly once, and RLPD
draws its offline share from a file written from a policy's episodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rl_core.config import RLPipeConfig, load_config
from rl_core.data.offline_episodes import collect_transitions
from rl_core.data.replay_buffer import save_transitions
from rl_core.envs import VectorEnvAdapter
from rl_core.models import get_model
from tests.in_process import (
    assert_same_weights,
    checkpoint_and_resume,
    straight_then_resumed,
    train_in_process,
)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_local")]
BASE = [
    "env.num_envs=2",
    "rollout.num_steps=16",
    "model.hidden_sizes=[32,32]",
    "replay.learning_starts=32",
    "replay.batch_size=32",
    "algorithm.off_policy.utd_ratio=0.5",
    "tracking.enabled=false",
]


def config(preset: str = "sac_pendulum", *extra: str) -> RLPipeConfig:
    return load_config(preset, [*BASE, *extra])


def test_resume_with_the_replay_buffer_continues_bit_for_bit(tmp_path: Path) -> None:
    cfg = config()
    straight, results, weights, resumed = straight_then_resumed(cfg, tmp_path, 2, 4)
    sizes = [r["advantage"].metrics["replay/size"] for r in results]
    assert sizes == [32.0, 64.0, 96.0, 128.0]
    steps = [r["update"].metrics["train/gradient_steps"] for r in results]
    assert steps == [16.0] * 4  # utd 0.5 x 32 env steps; the buffer holds 32 from the start
    assert_same_weights(straight, weights)
    assert resumed[0]["advantage"].metrics["replay/size"] == 96.0
    assert (tmp_path / "step_000002" / "replay" / "transitions.safetensors").is_file()


def test_without_the_replay_checkpoint_a_resumed_run_starts_with_an_empty_buffer(
    tmp_path: Path,
) -> None:
    cfg = config(
        "sac_pendulum",
        "replay.checkpoint=false",
        "replay.learning_starts=64",
        "cluster.hybrid_engine=off",
    )
    _, _, rt = train_in_process(cfg, range(2))
    resumed = checkpoint_and_resume(rt, cfg, tmp_path, 2)
    assert not (tmp_path / "step_000002" / "replay").exists()
    _, results, rt = train_in_process(cfg, range(2, 3), runtime=resumed)
    rt.shutdown()
    assert results[0]["advantage"].metrics["replay/size"] == 32.0
    assert results[0]["update"].metrics["train/gradient_steps"] == 0.0  # below learning_starts


def test_retried_advantage_and_update_steps_apply_once() -> None:
    cfg = config("crossq_pendulum")
    straight, _, rt = train_in_process(cfg, range(3))
    rt.shutdown()
    _, _, rt = train_in_process(cfg, range(2))
    for step in ("weight_sync", "rollout", "reward", "advantage", "advantage"):
        getattr(rt, step)(2)  # the second advantage adds nothing
    rt.snapshot("update")
    rt.update(2)
    rt.restore("update")  # as before a retry: weights, optimizers and sampling put back
    rt.update(2)
    retried = rt.actor.get_state_dict()[0]
    (size,) = rt.replay.add({"rewards": np.zeros(0)}, 1)  # an old iteration
    rt.shutdown()
    assert_same_weights(straight, retried)
    assert size["replay/size"] == 96.0


def test_rlpd_learns_from_offline_transitions_and_online_replay(tmp_path: Path) -> None:
    cfg = config("sac_pendulum", "model.critic_norm=layer_norm", "model.num_critics=4")
    env = VectorEnvAdapter(cfg.env, 1, 0)
    torch.manual_seed(0)
    policy = get_model(cfg.model, env.spaces)
    data, returns = collect_transitions(policy, cfg.env, [0, 1])
    assert len(data["rewards"]) == 400 and len(returns) == 2  # two 200-step episodes
    path = save_transitions(data, tmp_path / "offline.safetensors")
    rlpd = load_config(
        "sac_pendulum",
        [
            *BASE,
            "algorithm.loss_type=rlpd",
            "model.critic_norm=layer_norm",
            "model.num_critics=4",
            "algorithm.off_policy.critic_subset=2",
            f"replay.offline_data={path}",
        ],
    )
    _, results, rt = train_in_process(rlpd, range(2))
    (sample,) = rt.replay.sample(2, 32)
    rt.shutdown()
    assert all(np.isfinite(r["update"].metrics["train/critic_loss"]) for r in results)
    # each minibatch: 16 online rows (from the run's 64 transitions), then 16 offline rows
    offline_states = {tuple(s) for s in data["states"].round(6).tolist()}
    rows = sample["states"].reshape(2, 32, -1).round(6)
    assert all(tuple(s) in offline_states for s in rows[:, 16:].reshape(-1, 3).tolist())
