"""ManiSkill3's batched envs (``env.vectorization: batched``), checked on the CPU backend.

The CPU backend holds one env per simulator, so these tests play one: the same code path
as the GPU backend's hundreds, minus the GPU. Played through the vector adapter, one
batched env must match one single env step for step (seeds, rewards, ends, final
observations, action chunks, successes).
"""

from __future__ import annotations

import cloudpickle
import numpy as np
import pytest

pytest.importorskip("mani_skill")

from rl_core.config import load_config  # noqa: E402
from rl_core.config.loader import ConfigError  # noqa: E402
from rl_core.config.policy_sections import EnvConfig  # noqa: E402
from rl_core.envs import VectorEnvAdapter  # noqa: E402
from rl_core.envs.maniskill_batched import ManiSkillBatchedEnvs  # noqa: E402
from rl_core.envs.maniskill_registration import make_maniskill_batched  # noqa: E402
from rl_core.envs.vector import resolve_vectorization  # noqa: E402
from tests.manipulation_envs import random_actions  # noqa: E402


def env_cfg(max_episode_steps: int = 12, **manipulation) -> EnvConfig:
    settings = {"tasks": ["PushCube-v1"], "image_size": 32, **manipulation}
    return EnvConfig(
        env_type="maniskill", max_episode_steps=max_episode_steps, manipulation=settings
    )


def play_both(cfg: EnvConfig, actions: np.ndarray, seed: int = 7) -> tuple[list, list]:
    """The adapter outputs of ``actions`` played by a single env and by one batched env."""
    runs = []
    for vectorization in ("sync", "batched"):
        adapter = VectorEnvAdapter(cfg, num_envs=1, seed=seed, vectorization=vectorization)
        assert adapter.vectorization == vectorization
        runs.append([adapter.observation()] + [adapter.step(a[None]) for a in actions])
        adapter.close()
    return runs[0], runs[1]


def assert_same_outputs(a: list, b: list) -> None:
    assert len(a) == len(b)
    for out_a, out_b in zip(a, b, strict=True):
        if "env_obs" not in out_a:  # the first observation
            out_a, out_b = {"env_obs": out_a}, {"env_obs": out_b}
        for key in out_a:
            if key == "episodes":
                assert out_a[key] == out_b[key]
            elif isinstance(out_a[key], dict):
                assert out_a[key].keys() == out_b[key].keys()
                for name in out_a[key]:
                    np.testing.assert_array_equal(out_a[key][name], out_b[key][name])
            else:
                np.testing.assert_array_equal(out_a[key], out_b[key])


def test_one_batched_env_plays_as_a_single_env_across_episodes():
    # 30 steps of 12-step episodes: two autoresets, whose seeds come from the first one's
    single, batched = play_both(env_cfg(), random_actions(30, seed=1))
    assert_same_outputs(single, batched)
    assert [len(out["episodes"]) for out in batched[1:]].count(1) == 2
    assert batched[12]["truncated"].tolist() == [True]


def test_one_batched_env_plays_chunks_success_rewards_and_pixels_as_a_single_env():
    # an expert-free success is rare: terminate_on_success and the success reward are
    # compared as they come; pixels with the instruction, chunks of 2 actions
    cfg = env_cfg(
        max_episode_steps=9,
        obs_mode="rgb+state",
        action_chunk=2,
        reward="success",
        terminate_on_success=True,
    )
    actions = random_actions(6, seed=2, dim=8)
    single, batched = play_both(cfg, actions, seed=3)
    assert_same_outputs(single, batched)
    assert batched[0]["task_descriptions"].tolist() == ["push the cube to the red and white target"]
    assert batched[0]["main_images"].shape == (1, 32, 32, 3)
    # 9 steps in chunks of 2: the fifth chunk plays one action and ends the episode (its
    # length counts chunks, the policy's steps)
    assert batched[5]["truncated"].tolist() == [True]
    assert batched[5]["episodes"][0][1] == 5


def test_batched_envs_continue_after_pickling_within_the_state_restore_error():
    adapter = VectorEnvAdapter(env_cfg(), num_envs=1, seed=5, vectorization="batched")
    for action in random_actions(5, seed=3):
        adapter.step(action[None])
    state = adapter.get_state()
    assert state is not None
    actions = random_actions(10, seed=4)  # past the episode's end: the autoreset seed too
    expected = [adapter.step(a[None]) for a in actions]
    adapter.set_state(state)
    got = [adapter.step(a[None]) for a in actions]
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(e["env_obs"]["states"], g["env_obs"]["states"], atol=1e-4)
        np.testing.assert_allclose(e["rewards"], g["rewards"], atol=1e-4)
        assert e["truncated"].tolist() == g["truncated"].tolist()
    assert sum(len(e["episodes"]) for e in got) == 1
    adapter.close()


def test_pickled_batched_envs_hold_arrays_and_settings_only():
    envs = ManiSkillBatchedEnvs(1, max_episode_steps=12, sim_backend="physx_cpu")
    envs.reset(seed=[11])
    state = envs.__getstate__()
    leaves = []

    def collect(tree):
        if isinstance(tree, dict):
            for value in tree.values():
                collect(value)
        else:
            leaves.append(tree)

    collect(state["sim_state"])
    assert leaves and all(isinstance(leaf, np.ndarray) for leaf in leaves)
    assert state["episode_seeds"].tolist() == [11]
    copy = cloudpickle.loads(cloudpickle.dumps(envs))
    np.testing.assert_allclose(copy._observations(), envs._observations(), atol=1e-6)
    copy.close()
    envs.close()


def test_a_start_state_copied_with_reset_to_env_states_is_that_start():
    # what envs of one seed (a GRPO group) rely on: the copy of the first one's start state,
    # goal included, observes as that start
    envs = ManiSkillBatchedEnvs(1, max_episode_steps=12, sim_backend="physx_cpu")
    start_obs, _ = envs.reset(seed=[21])
    start = envs.sim.get_state_dict()
    envs.reset(seed=[22])
    assert not np.allclose(envs._observations(), start_obs)
    import torch

    raw, _ = envs.sim.reset(
        options={"env_idx": torch.tensor([0]), "reset_to_env_states": {"env_states": start}}
    )
    envs._raw_obs = raw
    np.testing.assert_allclose(envs._observations(), start_obs, atol=1e-6)
    envs.close()


def test_auto_picks_the_batched_simulator_only_on_a_gpu_for_env_types_that_have_one():
    assert resolve_vectorization("auto", "maniskill", "cuda:0") == "batched"
    assert resolve_vectorization("auto", "maniskill", "cpu") == "sync"
    assert resolve_vectorization("auto", "gym", "cuda:0") == "sync"
    assert resolve_vectorization("async", "maniskill", "cuda:0") == "async"


def test_several_batched_envs_need_a_gpu():
    with pytest.raises(ValueError, match="GPU simulator.*computes on cpu.*vectorization=sync"):
        make_maniskill_batched(env_cfg(), 4, "cpu")
    with pytest.raises(ValueError, match="CPU backend holds one env"):
        ManiSkillBatchedEnvs(2, sim_backend="physx_cpu")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["env.vectorization=batched"], "env.vectorization.*CartPole|env.vectorization.*gym"),
        (
            [
                "env.env_type=maniskill",
                "env.manipulation.tasks=[PushCube-v1]",
                "env.vectorization=batched",
                "env.num_envs=4",
                "rollout.pipeline_stages=2",
            ],
            "rollout.pipeline_stages=1",
        ),
    ],
)
def test_config_refuses_batched_where_it_cannot_run(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)
