"""Manipulation on real Ray workers: Meta-World envs, behaviour cloning from expert
demonstrations, offline RL (IQL) from them, the vision-language-action policy and episode
GRPO. Resumed runs continue bit for bit (the simulators' state is in the checkpoint) and
retried steps apply once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import ray

from infra.driver.runtimes import make_runtime
from rl_core.config import RLPipeConfig, load_config
from rl_core.data import demos as demos_format
from rl_core.data import expert_play
from rl_core.envs.experts import expert_for
from rl_core.steps import Step
from tests.in_process import assert_same_weights, straight_then_resumed, train_in_process

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_local")]
SMALL = [
    "env.num_envs=4",
    "env.max_episode_steps=24",
    "eval.num_episodes=4",
    "eval.num_envs=4",
    "tracking.enabled=false",
]


def state_config(tmp_path: Path, *extra: str) -> RLPipeConfig:
    return load_config(
        "sft_mlp_metaworld",
        [
            *SMALL,
            "rollout.num_steps=12",
            "model.hidden_sizes=[32,32]",
            "demos.batch_size=32",
            "demos.steps_per_iteration=3",
            f"run.output_dir={tmp_path}",
            *extra,
        ],
    )


def vla_config(tmp_path: Path, tiny_lm: str, *extra: str) -> RLPipeConfig:
    return load_config(
        "grpo_vla_metaworld",
        [
            *SMALL,
            "run.warm_start=null",
            f"model.model_path={tiny_lm}",
            "model.tiny_init=false",
            "env.manipulation.image_size=32",
            "env.max_episode_steps=16",
            "rollout.num_steps=4",
            "env.group_size=2",
            "actor.num_minibatches=2",
            "actor.update_epochs=1",
            f"run.output_dir={tmp_path}",
            *extra,
        ],
    )


def write_demos(cfg: RLPipeConfig, episodes: int = 4) -> Path:
    """Expert episodes of the config's env, where the config reads its demonstrations."""
    folder = Path(cfg.demos_path())
    played = expert_play.play_expert_episodes(
        cfg.env, list(range(100, 100 + episodes)), expert_for(cfg.env.env_type)
    )
    shard = demos_format.write_shard(folder, 0, played)
    demos_format.write_manifest(folder, [shard], cfg.env.model_dump(mode="json"), "test")
    return folder


def test_ppo_on_metaworld_resumes_bit_for_bit_with_success_metrics(tmp_path: Path) -> None:
    cfg = state_config(tmp_path)
    straight, results, weights, _ = straight_then_resumed(cfg, tmp_path / "ckpt", 2, 4)
    rollout = results[1]["rollout"].metrics
    assert rollout["env/episodes"] == 4.0  # 4 envs x 24 steps: one episode each by iteration 1
    assert 0.0 <= rollout["env/success_rate"] <= 1.0
    assert_same_weights(straight, weights)


def test_behaviour_cloning_learns_the_expert_and_a_retried_step_applies_once(
    tmp_path: Path,
) -> None:
    # 24-step episodes end before the expert succeeds: clone them all
    cfg = state_config(tmp_path, "demos.steps_per_iteration=10", "demos.successful_only=false")
    write_demos(cfg)
    rt = make_runtime(cfg)
    losses = [rt.run_step(Step.SFT_UPDATE, it).metrics["train/bc_loss"] for it in range(3)]
    assert losses[-1] < losses[0]
    rt.snapshot("sft_update")
    rt.run_step(Step.SFT_UPDATE, 3)
    rt.restore("sft_update")  # as before a retry: weights, optimizer and sampling put back
    rt.run_step(Step.SFT_UPDATE, 3)
    retried = rt.actor.get_state_dict()[0]
    rt.shutdown()
    rt = make_runtime(cfg)
    for it in range(4):
        rt.run_step(Step.SFT_UPDATE, it)
    straight = rt.actor.get_state_dict()[0]
    rt.shutdown()
    assert_same_weights(straight, retried)


def test_iql_trains_from_the_demonstrations_alone_and_evaluates(tmp_path: Path) -> None:
    cfg = load_config(
        "iql_metaworld",
        [
            "env.num_envs=1",
            "env.max_episode_steps=24",
            "env.manipulation.tasks=[reach-v3]",
            "model.hidden_sizes=[32,32]",
            "demos.batch_size=32",
            "demos.steps_per_iteration=3",
            "eval.num_episodes=2",
            "eval.num_envs=2",
            "tracking.enabled=false",
            f"run.output_dir={tmp_path}",
        ],
    )
    write_demos(cfg, episodes=2)
    before = make_runtime(cfg)
    start = before.actor.get_state_dict()[0]
    weights, results, rt = train_in_process(cfg, range(2), runtime=before)
    try:
        assert results[0][Step.ROLLOUT].env_steps == 0  # no env step: the dataset is the data
        update = results[1][Step.UPDATE]
        assert update.env_steps == 3 * 32 and update.metrics["train/gradient_steps"] == 3.0
        assert np.isfinite(update.metrics["train/critic_loss"])
        assert any(not np.array_equal(start[k], weights[k]) for k in start)
        jobs = rt.evaluation_jobs(1)
        played = [
            job.fn(**{**job.kwargs, "state_dict": ray.get(job.kwargs["state_dict"])})
            for job in jobs
        ]
        metrics = rt.evaluate(1, played).metrics
        assert metrics["eval/episodes"] == 2.0 and 0.0 <= metrics["eval/success_rate"] <= 1.0
    finally:
        rt.shutdown()


def test_vla_episode_grpo_from_pixels_and_instructions_resumes_bit_for_bit(
    tmp_path: Path, tiny_lm_one_layer: str
) -> None:
    cfg = vla_config(tmp_path, tiny_lm_one_layer)
    straight, results, weights, _ = straight_then_resumed(cfg, tmp_path / "ckpt", 1, 3)
    assert results[0]["advantage"].metrics["train/advantage_mean"] == pytest.approx(0.0, abs=1e-6)
    assert "env/success_rate" in results[0]["rollout"].metrics
    assert_same_weights(straight, weights)


def test_an_env_worker_runs_maniskill_batched_and_resumes_within_the_restore_error(
    tmp_path: Path,
) -> None:
    # the batched simulator of a GPU env worker, with the one env ManiSkill's CPU backend holds
    cfg = load_config(
        "ppo_pushcube",
        [
            "env.num_envs=1",
            "env.vectorization=batched",
            "env.max_episode_steps=6",
            "rollout.num_steps=8",
            "actor.num_minibatches=2",
            "model.hidden_sizes=[16,16]",
            "tracking.enabled=false",
            f"run.output_dir={tmp_path}",
        ],
    )
    seen = []

    def vectorization(runtime) -> None:
        seen.append(ray.get(runtime.env[0].__ray_call__.remote(lambda w: w.vectorization)))

    straight, results, weights, _ = straight_then_resumed(
        cfg, tmp_path / "ckpt", 1, 2, on_start=vectorization
    )
    assert seen == ["batched"]
    assert [r["rollout"].metrics["env/episodes"] for r in results] == [1.0, 1.0]
    for name, value in straight.items():
        np.testing.assert_allclose(weights[name], value, atol=1e-3, err_msg=name)
