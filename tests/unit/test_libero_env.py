"""The ``libero`` env type: spaces, seeds, the success reward, pickling by replay, config.

Cheap by design (one state env and one camera env for the module, 32x32 images, few steps).
"""

from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import pytest

pytest.importorskip("libero")

from rl_core.config import load_config  # noqa: E402
from rl_core.config.loader import ConfigError  # noqa: E402
from rl_core.config.policy_sections import EnvConfig  # noqa: E402
from rl_core.envs import (  # noqa: E402
    VectorEnvAdapter,
    libero_suites,
    make_single_env,
)
from rl_core.envs.action_chunk import ActionChunk  # noqa: E402
from rl_core.envs.libero_env import LiberoEnv  # noqa: E402
from rl_core.envs.libero_suites import init_states, suite_task, suite_task_names  # noqa: E402
from tests.manipulation_envs import assert_same_frames, play, random_actions  # noqa: E402

SUITE = "libero_spatial"


def env_cfg(max_episode_steps: int | None = None, **manipulation) -> EnvConfig:
    settings = {"suite": SUITE, "tasks": [0], "image_size": 32, **manipulation}
    return EnvConfig(env_type="libero", max_episode_steps=max_episode_steps, manipulation=settings)


@pytest.fixture(scope="module")
def state_env():
    """Tasks 0 and 1 of libero_spatial, state observations, 6-step episodes."""
    env = make_single_env(env_cfg(6, tasks=[0, 1], obs_mode="state"))
    yield env
    env.close()


@pytest.fixture(scope="module")
def rgb_env():
    """Task 0, camera and proprioception, frames for videos at 48x48."""
    env = make_single_env(env_cfg(obs_mode="rgb+state", render_size=48), "rgb_array")
    yield env
    env.close()


def actions(n: int, seed: int = 0) -> np.ndarray:
    return random_actions(n, seed=seed, dim=7)


# -- spaces, seeds, rewards -------------------------------------------------------------------


def test_spaces_of_each_obs_mode(state_env):
    # 8 numbers of proprioception + 14 per object (5 in libero_spatial's scenes)
    assert state_env.observation_space.shape == (78,)
    assert state_env.action_space.shape == (7,)
    np.testing.assert_array_equal(state_env.action_space.low, -np.ones(7, np.float32))
    rgb = LiberoEnv(SUITE, ["0"], obs_mode="rgb", image_size=32)  # the simulator is made lazily
    assert set(rgb.observation_space.spaces) == {"main_images", "task_descriptions"}
    assert rgb.observation_space["main_images"].shape == (32, 32, 3)
    chunked = make_single_env(env_cfg(action_chunk=2))
    assert isinstance(chunked, ActionChunk) and chunked.action_space.shape == (14,)
    assert chunked.unwrapped.max_episode_steps == 220  # libero_spatial's episode length


def test_pixels_instruction_proprio_and_frames(rgb_env):
    obs, info = rgb_env.reset(seed=0)
    task = suite_task(SUITE, 0)
    assert info == {"success": 0.0, "task": task.name, "instruction": task.instruction}
    assert obs["task_descriptions"] == task.instruction
    assert obs["main_images"].shape == (32, 32, 3) and obs["main_images"].dtype == np.uint8
    assert obs["main_images"].std() > 5  # a real picture, not a blank frame
    assert obs["states"].shape == (8,) and obs["states"].dtype == np.float32
    assert rgb_env.observation_space.contains(obs)
    # upright: the table (light wood) fills the bottom rows, LIBERO's raw image has it on top
    image = obs["main_images"].astype(float)
    assert image[-4:].mean() > image[:4].mean()
    assert rgb_env.render().shape == (48, 48, 3)


def test_seeds_pick_task_and_fixed_initial_state(state_env):
    names = suite_task_names(SUITE)
    sim_state = None
    for seed in (0, 2, 101, 1, 5):  # tasks 0, 0, 1, 1, 1: one simulator built in between
        obs, info = state_env.reset(seed=seed)
        assert info["task"] == names[seed % 2] == state_env.task
        assert state_env.init_state_index == (seed // 2) % 50
        sim_state = state_env._sim().get_sim_state()  # noqa: SLF001
        np.testing.assert_array_equal(sim_state, init_states(SUITE, seed % 2)[(seed // 2) % 50])
        assert state_env.observation_space.contains(obs)
    # consecutive (evaluation) seeds: distinct (task, initial state) pairs, 2 x 50 of them
    pairs = {(s % 2, (s // 2) % 50) for s in range(1000, 1100)}
    assert len(pairs) == 100


def test_episodes_repeat_bit_for_bit_and_truncate(state_env):
    first, _ = state_env.reset(seed=4)
    frames = play(state_env, actions(6))
    assert [f[3] for f in frames] == [False] * 5 + [True]  # truncated at max_episode_steps
    state_env.reset(seed=3)  # another episode in between (same simulator, soft reset)
    play(state_env, actions(6, seed=1))
    again, _ = state_env.reset(seed=4)
    np.testing.assert_array_equal(first, again)
    assert_same_frames(frames, play(state_env, actions(6)))


def test_success_reward_is_paid_once_and_can_end_the_episode(state_env, monkeypatch):
    state_env.reset(seed=0)
    sim = state_env._sim()  # noqa: SLF001
    monkeypatch.setattr(sim, "check_success", lambda: state_env.steps >= 2)
    frames = play(state_env, actions(5))
    assert [f[1] for f in frames] == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert [f[4] for f in frames] == [0.0, 1.0, 1.0, 1.0, 1.0]
    assert not any(f[2] for f in frames)
    monkeypatch.setattr(state_env, "terminate_on_success", True)
    state_env.reset(seed=0)
    frames = play(state_env, actions(2))
    assert frames[-1][1:] == (1.0, True, False, 1.0)
    monkeypatch.setattr(state_env, "terminate_on_success", False)
    monkeypatch.setattr(state_env, "reset_on_success", True)
    state_env.reset(seed=0)
    frames = play(state_env, actions(2))
    assert [f[1:] for f in frames] == [(0.0, False, False, 0.0), (1.0, False, True, 1.0)]


# -- pickling: replay from seeds -------------------------------------------------------------


def test_a_pickled_state_env_continues_bit_for_bit_across_autoresets(state_env):
    state_env.reset(seed=7)
    play(state_env, actions(3, seed=1))
    copy = cloudpickle.loads(cloudpickle.dumps(state_env))
    env_frames, copy_frames = [], []
    for target, frames in ((state_env, env_frames), (copy, copy_frames)):
        for action in actions(9, seed=2):  # past the end: autoresets from the same generator
            frames.extend(play(target, [action]))
            if frames[-1][2] or frames[-1][3]:
                target.reset()
    assert_same_frames(env_frames, copy_frames)
    copy.close()


def test_a_pickled_camera_env_continues_bit_for_bit(rgb_env):
    rgb_env.reset(seed=3)
    play(rgb_env, actions(3, seed=1))
    copy = cloudpickle.loads(cloudpickle.dumps(rgb_env))
    assert_same_frames(play(rgb_env, actions(3, seed=2)), play(copy, actions(3, seed=2)))
    np.testing.assert_array_equal(rgb_env.render(), copy.render())
    copy.close()


def test_vector_env_state_restores_through_the_adapter():
    adapter = VectorEnvAdapter(env_cfg(obs_mode="state"), num_envs=2, seed=5)
    adapter.step(actions(2))
    state = adapter.get_state()
    assert state is not None
    expected = [adapter.step(a[None].repeat(2, 0))["env_obs"]["states"] for a in actions(3, 1)]
    adapter.set_state(state)
    got = [adapter.step(a[None].repeat(2, 0))["env_obs"]["states"] for a in actions(3, 1)]
    np.testing.assert_array_equal(np.stack(expected), np.stack(got))
    adapter.close()


# -- config ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "field", "message"),
    [
        (
            "env.manipulation.suite=libero_spacial",
            "env.manipulation.suite",
            "did you mean libero_spatial",
        ),
        (
            "env.manipulation.tasks=[pick_up_the_black_bowl_next_to_the_ramekin_and_place_it_on_a_plate]",
            "env.manipulation.tasks.0",
            "did you mean pick_up_the_black_bowl_next_to_the_ramekin_and_place_it_on_the_plate",
        ),
        ("env.manipulation.tasks=[3,12]", "env.manipulation.tasks.1", "index 0 to 9"),
        (
            "env.manipulation.camera=wrist",
            "env.manipulation.camera",
            "agentview, robot0_eye_in_hand",
        ),
        ("env.manipulation.reward=dense", "env.manipulation.reward", "success"),
        ("env.kwargs={a: 1}", "env.kwargs", "env.manipulation"),
    ],
)
def test_config_errors_name_the_field(override, field, message):
    with pytest.raises(ConfigError) as err:
        load_config("grpo_vla_libero", [override])
    line = next(line for line in str(err.value).splitlines() if line.strip().startswith(field))
    assert message in line


def test_state_observations_need_tasks_of_one_size():
    overrides = ["env.manipulation.suite=libero_10", "env.manipulation.obs_mode=state"]
    with pytest.raises(ConfigError, match=r"env.manipulation.tasks = .*0 \(8\), 2 \(2\)"):
        load_config("grpo_vla_libero", [*overrides, "env.manipulation.tasks=[0,2]"])


def test_config_says_how_to_install_libero(monkeypatch):
    monkeypatch.setitem(sys.modules, "libero.libero.benchmark", None)
    libero_suites.suite_task_names.cache_clear()
    libero_suites._suite.cache_clear()  # noqa: SLF001
    try:
        with pytest.raises(ConfigError, match=r"env.env_type = 'libero'.*rlpipe\[libero\]"):
            load_config("grpo_vla_libero")
    finally:
        libero_suites.suite_task_names.cache_clear()
        libero_suites._suite.cache_clear()  # noqa: SLF001


def test_only_libero_has_suites():
    with pytest.raises(ConfigError, match="env.manipulation.suite = 'libero_goal'.*LIBERO"):
        load_config("ppo_metaworld", ["env.manipulation.suite=libero_goal"])


def test_the_cloning_preset_exports_what_the_rl_preset_loads():
    """``grpo_vla_libero run.init_from=<sft_vla_libero's export>``: same model, same env."""
    sft, rl = load_config("sft_vla_libero"), load_config("grpo_vla_libero")
    for key in ("model_type", "action_chunk", "max_instruction_tokens", "hidden_sizes"):
        assert getattr(sft.model, key, None) == getattr(rl.model, key, None), key
    same_env = ("suite", "tasks", "obs_mode", "image_size", "action_chunk", "camera")
    for key in same_env:
        assert getattr(sft.env.manipulation, key) == getattr(rl.env.manipulation, key), key
    assert sft.demos.import_from is None  # the user's files: no default
