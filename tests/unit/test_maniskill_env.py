"""The ``maniskill`` env type: spaces, seeds, rewards, pickling by replay, experts, config."""

from __future__ import annotations

import sys

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("mani_skill")

from rl_core.config import load_config  # noqa: E402
from rl_core.config.loader import ConfigError  # noqa: E402
from rl_core.config.policy_sections import EnvConfig  # noqa: E402
from rl_core.data import demos as demos_format  # noqa: E402
from rl_core.data import expert_play  # noqa: E402
from rl_core.envs import (  # noqa: E402
    VectorEnvAdapter,
    make_single_env,  # noqa: E402
    maniskill_registration,  # noqa: E402
)
from rl_core.envs.action_chunk import ActionChunk  # noqa: E402
from rl_core.envs.experts import expert_for  # noqa: E402
from rl_core.envs.maniskill_env import ManiSkillEnv, maniskill_instruction  # noqa: E402
from rl_core.envs.maniskill_experts import EXPERT_TASKS, expert_actions  # noqa: E402
from rl_core.envs.maniskill_sim import score_steps  # noqa: E402
from tests.manipulation_envs import assert_same_frames, play, random_actions  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def renderer_kept_alive():
    """One camera env open for the whole module: ManiSkill builds its renderer's pipelines
    (seconds on a CPU Vulkan driver) when the first camera of a process renders, and again
    after the last env closed."""
    env = ManiSkillEnv("PickCube-v1", obs_mode="rgb", image_size=32)
    env.reset(seed=0)
    yield
    env.close()


def env_cfg(task: str = "PushCube-v1", max_episode_steps: int | None = None, **manipulation):
    settings = {"tasks": [task], "image_size": 32, **manipulation}
    return EnvConfig(
        env_type="maniskill", max_episode_steps=max_episode_steps, manipulation=settings
    )


def make(task: str = "PushCube-v1", **manipulation) -> gym.Env:
    return make_single_env(env_cfg(task, **manipulation))


def play_expert(env: ManiSkillEnv, seed: int) -> tuple[list[float], list[float]]:
    env.reset(seed=seed)
    rewards, successes = [], []
    for _ in range(env.max_episode_steps):
        _, reward, terminated, truncated, info = env.step(expert_actions(env)[0])
        rewards.append(reward)
        successes.append(info["success"])
        if terminated or truncated:
            break
    return rewards, successes


# -- spaces, seeds, rewards -------------------------------------------------------------------


def test_state_observations_seeds_and_truncation():
    env = make(max_episode_steps=5)
    assert env.observation_space.shape == (35,) and env.action_space.shape == (4,)
    first, info = env.reset(seed=7)
    assert first.dtype == np.float32 and env.observation_space.contains(first)
    assert info == {
        "success": 0.0,
        "task": "PushCube-v1",
        "instruction": maniskill_instruction("PushCube-v1"),
    }
    frames = play(env, random_actions(5))
    assert [f[3] for f in frames] == [False] * 4 + [True]  # truncated at max_episode_steps
    again, _ = env.reset(seed=7)
    np.testing.assert_array_equal(first, again)
    assert_same_frames(frames, play(env, random_actions(5)))
    other, _ = env.reset(seed=8)
    assert not np.array_equal(first, other)  # another seed: another cube and goal
    env.close()


def test_pixels_and_instruction_and_frames_for_videos():
    env = make_single_env(env_cfg("PickCube-v1", obs_mode="rgb+state", render_size=48), "rgb_array")
    obs, _ = env.reset(seed=1)
    assert obs["main_images"].shape == (32, 32, 3) and obs["main_images"].dtype == np.uint8
    assert obs["main_images"].std() > 5  # a real picture, not a blank frame
    assert obs["task_descriptions"] == "pick up the cube and move it to the goal"
    assert obs["states"].shape == (42,)
    assert env.observation_space.contains(obs)
    assert env.render().shape == (48, 48, 3)
    env.close()


def test_success_reward_is_paid_once_and_can_end_the_episode():
    env = make(reward="success")
    rewards, successes = play_expert(env.unwrapped, seed=0)
    first = successes.index(1.0)
    assert rewards[first] == 1.0 and sum(rewards) == 1.0
    env = make(reward="success", terminate_on_success=True)
    rewards, successes = play_expert(env.unwrapped, seed=0)
    assert len(rewards) == first + 1 and successes[-1] == 1.0
    env.close()


def test_reset_on_success_truncates_the_successful_step_and_survives_pickling():
    env = make(reset_on_success=True).unwrapped
    env.reset(seed=0)
    ends = []
    for _ in range(env.max_episode_steps):
        _, _, terminated, truncated, info = env.step(expert_actions(env)[0])
        ends.append((terminated, truncated, info["success"]))
        if terminated or truncated:
            break
    assert ends[-1] == (False, True, 1.0) and len(ends) < env.max_episode_steps
    assert not any(t or c for t, c, _ in ends[:-1])
    copy = cloudpickle.loads(cloudpickle.dumps(env))
    assert copy.reset_on_success
    env.close()
    copy.close()


def test_score_steps_ends_episodes_on_success_as_asked():
    def ends(**flags):
        _, terminated, truncated, succeeded = score_steps(
            np.zeros(3),
            np.array([True, True, False]),  # success
            np.array([False, True, False]),  # fail
            np.zeros(3, bool),
            np.array([3, 3, 10]),
            reward_mode="dense",
            max_episode_steps=10,
            **flags,
        )
        assert succeeded.tolist() == [True, True, False]
        return terminated.tolist(), truncated.tolist()

    plain = ends(terminate_on_success=False)
    assert plain == ([False, True, False], [False, False, True])
    terminate = ends(terminate_on_success=True)
    assert terminate == ([True, True, False], [False, False, True])
    reset = ends(terminate_on_success=False, reset_on_success=True)
    assert reset == ([False, True, False], [True, False, True])  # a failure still terminates


def test_instructions_of_tasks_without_an_entry_are_made_from_the_id():
    assert maniskill_instruction("PullCubeTool-v1") == "use the tool to pull the cube closer"
    assert maniskill_instruction("OpenCabinetDrawer-v1") == "solve the task open cabinet drawer"


# -- pickling: replay from seeds -------------------------------------------------------------


@pytest.mark.parametrize("obs_mode", ["state", "rgb"])
def test_a_pickled_env_continues_bit_for_bit(obs_mode):
    env = make(obs_mode=obs_mode)
    env.reset(seed=3)
    play(env, random_actions(6, seed=1))
    copy = cloudpickle.loads(cloudpickle.dumps(env))
    # state: past the end, autoresets from the same generator; rgb (slow to step): 8 steps
    actions = random_actions(60 if obs_mode == "state" else 8, seed=2)
    env_frames, copy_frames = [], []
    for target, frames in ((env, env_frames), (copy, copy_frames)):
        for action in actions:
            frames.extend(play(target, [action]))
            if frames[-1][2] or frames[-1][3]:
                target.reset()
    assert_same_frames(env_frames, copy_frames)
    env.close()
    copy.close()


def test_vector_env_state_restores_through_the_adapter():
    adapter = VectorEnvAdapter(env_cfg(), num_envs=2, seed=5)
    adapter.step(random_actions(2))
    state = adapter.get_state()
    assert state is not None
    expected = [adapter.step(a[None].repeat(2, 0))["env_obs"]["states"] for a in random_actions(3)]
    adapter.set_state(state)
    got = [adapter.step(a[None].repeat(2, 0))["env_obs"]["states"] for a in random_actions(3)]
    np.testing.assert_array_equal(np.stack(expected), np.stack(got))
    adapter.close()


# -- experts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("task", EXPERT_TASKS)
def test_the_scripted_expert_solves_its_task(task):
    env = make(task)
    _, successes = play_expert(env.unwrapped, seed=4)
    assert max(successes) == 1.0
    env.close()


def test_expert_chunks_are_the_actions_it_would_choose_step_by_step():
    env = make("PickCube-v1")
    base = env.unwrapped
    base.reset(seed=2)
    play(env, random_actions(3))
    chunk = expert_actions(base, 5)
    stepwise = []
    for _ in range(5):
        stepwise.append(expert_actions(base)[0])
        base.step(stepwise[-1])
    np.testing.assert_array_equal(chunk, np.stack(stepwise))
    chunked = make("PickCube-v1", action_chunk=3)
    assert isinstance(chunked, ActionChunk) and chunked.action_space.shape == (12,)
    obs, info = chunked.reset(seed=2)
    assert expert_for("maniskill")(chunked, obs, info).shape == (12,)
    env.close()
    chunked.close()


def test_expert_demonstrations_in_the_dataset_format(tmp_path):
    cfg = env_cfg("PickCube-v1", obs_mode="rgb+state")
    episodes = expert_play.play_expert_episodes(cfg, [0], expert_for("maniskill"))
    assert episodes[0].success
    assert episodes[0].instruction == "pick up the cube and move it to the goal"
    shard = demos_format.write_shard(tmp_path, 0, episodes)
    demos_format.write_manifest(tmp_path, [shard], cfg.model_dump(mode="json"), "test")
    loaded = demos_format.load_demos(tmp_path)
    assert loaded.episode_success.tolist() == [True]
    assert loaded.observations["main_images"].shape[1:] == (32, 32, 3)
    assert len(loaded.actions) == sum(len(ep.actions) for ep in episodes)


def test_the_expert_refuses_other_control_modes():
    env = make(control_mode="pd_joint_delta_pos")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="pd_ee_delta_pos"):
        expert_actions(env.unwrapped)
    env.close()


# -- errors and config ------------------------------------------------------------------------


def test_bad_camera_control_mode_and_task_are_named():
    with pytest.raises(ValueError, match="no camera 'nope'; allowed: base_camera"):
        ManiSkillEnv("PushCube-v1", obs_mode="rgb", camera="nope")
    with pytest.raises(ValueError, match="refused control_mode 'bogus'.*pd_ee_delta_pos"):
        ManiSkillEnv("PushCube-v1", control_mode="bogus")


@pytest.mark.parametrize(
    ("override", "field", "message"),
    [
        (
            "env.manipulation.tasks=[PushCub-v1]",
            "env.manipulation.tasks.0",
            "did you mean PushCube-v1",
        ),
        ("env.manipulation.tasks=[PushCube-v1,PickCube-v1]", "env.manipulation.tasks", "one task"),
        ("env.kwargs={a: 1}", "env.kwargs", "env.manipulation"),
    ],
)
def test_config_errors_name_the_field(override, field, message):
    with pytest.raises(ConfigError) as err:
        load_config("ppo_pushcube", [override])
    line = next(line for line in str(err.value).splitlines() if line.strip().startswith(field))
    assert message in line


def test_config_says_how_to_install_maniskill_and_vulkan(monkeypatch):
    monkeypatch.setattr(maniskill_registration, "vulkan_driver_present", lambda: False)
    with pytest.raises(ConfigError, match=r"env.env_type = 'maniskill'.*setup_vulkan.sh"):
        load_config("ppo_pushcube")
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "mani_skill.envs", None)
    with pytest.raises(ConfigError, match=r"rlpipe\[maniskill\]"):
        load_config("ppo_pushcube")


def test_metaworld_refuses_a_control_mode():
    with pytest.raises(ConfigError, match="env.manipulation.control_mode"):
        load_config("ppo_metaworld", ["env.manipulation.control_mode=pd_ee_delta_pos"])
