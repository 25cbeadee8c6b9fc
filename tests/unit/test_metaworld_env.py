"""The ``metaworld`` env type: spaces, seeds, rewards, chunks, pickling, experts, config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import cloudpickle  # noqa: E402 - after MUJOCO_GL
import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("metaworld")

from rl_core.config import load_config  # noqa: E402
from rl_core.config.loader import ConfigError  # noqa: E402
from rl_core.config.policy_sections import EnvConfig  # noqa: E402
from rl_core.envs import VectorEnvAdapter, make_single_env  # noqa: E402
from rl_core.envs.action_chunk import ActionChunk  # noqa: E402
from rl_core.envs.experts import expert_for  # noqa: E402
from rl_core.envs.metaworld_benchmark import metaworld_expert, metaworld_task_names  # noqa: E402
from rl_core.envs.metaworld_env import MetaWorldEnv  # noqa: E402
from rl_core.envs.metaworld_instructions import (  # noqa: E402
    INSTRUCTION_CHARSET,
    INSTRUCTIONS,
    MAX_INSTRUCTION_LENGTH,
    metaworld_instruction,
)
from tests.manipulation_envs import assert_same_frames, play, random_actions  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TWO = ["reach-v3", "push-v3"]


def env_cfg(**manipulation) -> EnvConfig:
    max_steps = manipulation.pop("max_episode_steps", None)
    settings = {"tasks": ["reach-v3"], "image_size": 32, **manipulation}
    return EnvConfig(env_type="metaworld", max_episode_steps=max_steps, manipulation=settings)


def make(**manipulation) -> gym.Env:
    return make_single_env(env_cfg(**manipulation))


# -- spaces and observations ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obs_mode", "tasks", "keys", "dim"),
    [
        ("state", ["reach-v3"], None, 39),
        ("state", TWO, None, 41),
        ("rgb", ["reach-v3"], {"main_images", "task_descriptions"}, None),
        ("rgb+state", TWO, {"main_images", "task_descriptions", "states"}, 41),
    ],
)
def test_spaces_per_obs_mode(obs_mode, tasks, keys, dim):
    env = make(obs_mode=obs_mode, tasks=tasks)
    try:
        obs, info = env.reset(seed=1)
        space = env.observation_space
        assert env.action_space == gym.spaces.Box(-1, 1, (4,), np.float32)
        assert space.contains(obs)
        if keys is None:
            assert space.shape == (dim,) and obs.dtype == np.float32
            states = obs
        else:
            assert isinstance(space, gym.spaces.Dict) and set(space.spaces) == keys
            assert obs["main_images"].shape == (32, 32, 3) and obs["main_images"].dtype == np.uint8
            assert (
                obs["task_descriptions"]
                == INSTRUCTIONS["push-v3" if len(tasks) > 1 else "reach-v3"]
            )
            states = obs.get("states")
        if states is not None and len(tasks) > 1:  # seed 1 plays tasks[1]: its one-hot
            assert states[39:].tolist() == [0.0, 1.0]
        assert info["task"] == tasks[1 % len(tasks)] and info["success"] == 0.0
        assert info["state"].shape == (39,) and info["instruction"] == INSTRUCTIONS[info["task"]]
        obs, *_ = env.step(env.action_space.sample())
        assert space.contains(obs)
    finally:
        env.close()


def test_instructions_and_experts_cover_every_task():
    names = metaworld_task_names()
    assert sorted(INSTRUCTIONS) == sorted(names) and len(names) == 50
    for name in names:
        text = metaworld_instruction(name)
        assert 0 < len(text) <= MAX_INSTRUCTION_LENGTH
        assert set(text) <= set(INSTRUCTION_CHARSET)
        assert callable(metaworld_expert(name).get_action)
    assert metaworld_instruction("pick-place-v3") == "pick up the puck and place it at the goal"
    with pytest.raises(KeyError, match="did you mean 'pick-place-v3'"):
        metaworld_instruction("pick-place-v2")


# -- tasks and initial states by seed ---------------------------------------------------------


def test_seed_picks_task_and_initial_state():
    a, b = MetaWorldEnv(TWO), MetaWorldEnv(TWO)
    try:
        for seed in range(4):
            obs_a, info = a.reset(seed=seed)
            assert info["task"] == TWO[seed % 2]
            obs_b, _ = b.reset(seed=seed)
            np.testing.assert_array_equal(obs_a, obs_b)
        # seeds 0 and 2 play reach-v3 from (most likely) different initial states
        states = {}
        for seed in (0, 2, 4, 6):
            a.reset(seed=seed)
            states[seed] = (a.variation, a.state()[-3:].tolist())  # the goal
        assert len({v for v, _ in states.values()}) > 1
        assert all(0 <= v < 50 for v, _ in states.values())
        # resets without a seed draw from the generator of the last seeded reset
        a.reset(seed=9)
        b.reset(seed=9)
        for _ in range(3):
            np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
            assert (a.task, a.variation) == (b.task, b.variation)
        # a simulator that played other episodes starts an episode like a fresh one
        fresh = MetaWorldEnv(TWO)
        actions = random_actions(20)
        a.reset(seed=0)
        fresh.reset(seed=0)
        assert_same_frames(play(a, actions), play(fresh, actions))
        fresh.close()
    finally:
        a.close()
        b.close()


def test_groups_share_task_and_state_through_the_vector_adapter():
    cfg = env_cfg(tasks=TWO, obs_mode="rgb+state")
    envs = VectorEnvAdapter(cfg, 4, seed=10, group_size=2)
    try:
        obs = envs.observation()
        texts = obs["task_descriptions"]
        assert texts.dtype.kind == "U" and texts.shape == (4,)
        expected = [INSTRUCTIONS[t] for t in ("reach-v3", "reach-v3", "push-v3", "push-v3")]
        assert texts.tolist() == expected
        assert obs["main_images"].shape == (4, 32, 32, 3) and obs["main_images"].dtype == np.uint8
        assert obs["states"].shape == (4, 41) and obs["states"].dtype == np.float32
        for key in ("main_images", "states"):
            np.testing.assert_array_equal(obs[key][0], obs[key][1])
            np.testing.assert_array_equal(obs[key][2], obs[key][3])
        assert not np.array_equal(obs["states"][0], obs["states"][2])
        out = envs.step(np.zeros((4, 4), np.float32))
        assert out["env_obs"]["task_descriptions"].tolist() == expected
        np.testing.assert_array_equal(out["env_obs"]["states"][0], out["env_obs"]["states"][1])
    finally:
        envs.close()


# -- rewards, termination, truncation, chunks -------------------------------------------------


def play_expert(env: gym.Env, seed: int, limit: int = 150) -> list[tuple]:
    expert = expert_for("metaworld")
    obs, info = env.reset(seed=seed)
    steps = []
    for _ in range(limit):
        obs, reward, terminated, truncated, info = env.step(expert(env, obs, info))
        steps.append((float(reward), terminated, truncated, info["success"]))
        if terminated or truncated:
            break
    return steps


def test_reward_modes_and_terminate_on_success():
    dense = play_expert(make(), seed=0)
    success = play_expert(make(reward="success"), seed=0)
    assert len(dense) == len(success) == 150  # no termination: the episode goes on
    first = next(i for i, s in enumerate(success) if s[3] == 1.0)
    assert [r for r, *_ in success] == [1.0 if i == first else 0.0 for i in range(150)]
    assert [s[3] for s in success] == [s[3] for s in dense]  # same trajectory
    assert all(r > 0 for r, *_ in dense) and max(r for r, *_ in dense) > 5
    ended = play_expert(make(reward="success", terminate_on_success=True), seed=0)
    assert len(ended) == first + 1 and ended[-1] == (1.0, True, False, 1.0)
    assert not any(t for _, t, _, _ in ended[:-1])
    reset = play_expert(make(reward="success", reset_on_success=True), seed=0)
    assert len(reset) == first + 1 and reset[-1] == (1.0, False, True, 1.0)  # truncated
    assert not any(t or c for _, t, c, _ in reset[:-1])


def test_max_episode_steps_truncates_in_simulator_steps():
    env = make(max_episode_steps=10)
    env.reset(seed=0)
    flags = [env.step(np.zeros(4, np.float32))[3] for _ in range(10)]
    assert flags == [False] * 9 + [True]
    chunked = make(max_episode_steps=10, action_chunk=4)
    assert chunked.action_space.shape == (16,)
    chunked.reset(seed=0)
    out = [chunked.step(np.zeros(16, np.float32)) for _ in range(3)]
    assert [o[3] for o in out] == [False, False, True]
    assert [o[4]["chunk_steps"] for o in out] == [4, 4, 2]
    # the expert plans a chunk up to the end of the episode
    expert = expert_for("metaworld")
    obs, info = chunked.reset(seed=0)
    out = [chunked.step(expert(chunked, obs, info)) for _ in range(3)]
    assert [o[3] for o in out] == [False, False, True]


def test_chunks_play_like_single_actions_and_render_only_their_last_frame():
    cfg = env_cfg(obs_mode="rgb+state", tasks=["push-v3"])
    single = make_single_env(cfg, render_mode="rgb_array")
    chunked = make_single_env(
        cfg.model_copy(
            update={"manipulation": cfg.manipulation.model_copy(update={"action_chunk": 3})}
        ),
        render_mode="rgb_array",
    )
    actions = random_actions(9, seed=2)
    try:
        single.reset(seed=5)
        chunked.reset(seed=5)
        for chunk in actions.reshape(3, 12):
            rewards = []
            for a in chunk.reshape(3, 4):
                obs, reward, *_ = single.step(a)
                rewards.append(reward)
            obs_c, reward_c, *_ = chunked.step(chunk)
            for key in ("main_images", "states"):
                np.testing.assert_array_equal(obs[key], obs_c[key])
            assert reward_c == pytest.approx(sum(rewards), rel=1e-12)
            np.testing.assert_array_equal(single.render(), chunked.render())
        assert chunked.metadata["render_fps"] == pytest.approx(80 / 3)
    finally:
        single.close()
        chunked.close()


class _Counter(gym.Env):
    """Reward = action; terminates when the running sum passes 5; succeeds at step 2."""

    observation_space = gym.spaces.Box(-100, 100, (1,), np.float32)
    action_space = gym.spaces.Box(-10, 10, (1,), np.float32)
    metadata = {"render_fps": 30}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.total, self.t = 0.0, 0
        return np.zeros(1, np.float32), {"success": 0.0}

    def step(self, action):
        self.t += 1
        self.total += float(action[0])
        obs = np.array([self.total], np.float32)
        return obs, float(action[0]), self.total > 5, False, {"success": float(self.t == 2)}


def test_action_chunk_wrapper():
    env = ActionChunk(_Counter(), 3)
    assert env.action_space.shape == (3,) and env.action_space.low.tolist() == [-10] * 3
    assert env.metadata["render_fps"] == 10.0
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(np.array([1.0, 1.0, 1.0]))
    assert (obs.tolist(), reward, terminated, info["chunk_steps"]) == ([3.0], 3.0, False, 3)
    assert info["success"] == 1.0  # step 2 of the chunk succeeded, step 3 did not
    obs, reward, terminated, truncated, info = env.step(np.array([2.0, 4.0, 100.0]))
    # the sum passes 5 at the second action: the third is not played
    assert (obs.tolist(), reward, terminated, info["chunk_steps"]) == ([9.0], 6.0, True, 2)
    assert info["success"] == 0.0
    with pytest.raises(ValueError, match="Box action space"):
        ActionChunk(gym.make("CartPole-v1"), 2)


# -- pickling ---------------------------------------------------------------------------------


@pytest.mark.parametrize("obs_mode", ["state", "rgb"])
def test_pickled_vector_env_steps_bit_identically(obs_mode):
    # push-v3: contacts, and a reward that reads the simulator through views of its memory
    cfg = env_cfg(tasks=["push-v3"], obs_mode=obs_mode)
    envs = VectorEnvAdapter(cfg, 2, seed=3)
    actions = random_actions(15, seed=1, dim=8).reshape(15, 2, 4)
    try:
        for a in actions[:5]:
            envs.step(a)
        state = envs.get_state()
        assert state is not None and len(state["envs"]) < 200_000  # no MuJoCo model inside
        copy = VectorEnvAdapter(cfg, 2, seed=99)
        copy.set_state(state)
        try:
            for a in actions[5:]:
                x, y = envs.step(a), copy.step(a)
                for key in x["env_obs"]:
                    np.testing.assert_array_equal(x["env_obs"][key], y["env_obs"][key])
                np.testing.assert_array_equal(x["rewards"], y["rewards"])
        finally:
            copy.close()
    finally:
        envs.close()


def test_pickle_round_trip_of_a_chunked_env_keeps_the_episode():
    env = make(action_chunk=2, max_episode_steps=20)
    env.reset(seed=4)
    actions = random_actions(10, dim=8)
    play(env, actions[:3])
    copy = cloudpickle.loads(cloudpickle.dumps(env))
    assert_same_frames(play(env, actions[3:]), play(copy, actions[3:]))  # truncates at 20
    env.close()
    copy.close()


# -- experts, rendering, closing --------------------------------------------------------------


@pytest.mark.parametrize(("obs_mode", "chunk"), [("state", 1), ("rgb", 1), ("state", 5)])
def test_expert_succeeds_at_reach(obs_mode, chunk):
    env = make(obs_mode=obs_mode, action_chunk=chunk, terminate_on_success=True)
    try:
        steps = play_expert(env, seed=0, limit=150 // chunk)
        assert steps[-1][1] and steps[-1][3] == 1.0
    finally:
        env.close()


def test_render_gives_upright_frames_at_render_size():
    import mujoco

    env = make(obs_mode="rgb")
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="rgb_array"):
        assert env.render() is None  # made without render_mode="rgb_array"
    env.close()
    video = make_single_env(env_cfg(obs_mode="rgb", render_size=48), render_mode="rgb_array")
    obs, _ = video.reset(seed=0)
    frame = video.render()
    assert frame.shape == (48, 48, 3) and frame.dtype == np.uint8
    assert obs["main_images"].shape == (32, 32, 3)
    # MuJoCo's own renderer sees corner2 upside down (its up axis points down): ours is that
    # image turned by 180 degrees, not mirrored
    sim = video.unwrapped._sims["reach-v3"]
    reference = mujoco.Renderer(sim.model, 48, 48)
    try:
        reference.update_scene(sim.data, camera="corner2")
        np.testing.assert_array_equal(frame, reference.render()[::-1, ::-1])
    finally:
        reference.close()
        video.close()
    same = make_single_env(env_cfg(obs_mode="rgb"), render_mode="rgb_array")
    obs, _ = same.reset(seed=0)
    np.testing.assert_array_equal(same.render(), obs["main_images"])
    same.close()


def test_closing_and_exiting_with_renderers_is_clean():
    """Also: with no display and no ``MUJOCO_GL``, the envs render headless even when another
    simulator imported MuJoCo first (as ManiSkill3 does), which picks a window backend."""
    code = (
        "import mujoco\n"
        "from rl_core.envs.metaworld_env import MetaWorldEnv\n"
        "a = MetaWorldEnv(['reach-v3'], obs_mode='rgb', image_size=16)\n"
        "b = MetaWorldEnv(['reach-v3'], obs_mode='rgb', image_size=16)\n"
        "a.reset(seed=0); b.reset(seed=0); a.close(); a.close()\n"  # b: left open at exit
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Error" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr


# -- config -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "field", "message"),
    [
        (
            "env.manipulation.tasks=[reach-v3,pick-plce-v3]",
            "env.manipulation.tasks.1",
            "did you mean 'pick-place-v3'",
        ),
        (
            "env.manipulation.obs_mode=pixels",
            "env.manipulation.obs_mode",
            "'state', 'rgb' or 'rgb+state'",
        ),
        ("env.manipulation.camera=corner9", "env.manipulation.camera", "corner2"),
        ("env.manipulation.tasks=[push-v3,push-v3]", "env.manipulation.tasks", "more than once"),
        (
            "env.manipulation.action_chunk=0",
            "env.manipulation.action_chunk",
            "greater than or equal to 1",
        ),
    ],
)
def test_config_errors_name_the_field(override, field, message):
    with pytest.raises(ConfigError) as err:
        load_config("ppo_cartpole", ["env.env_type=metaworld", override])
    line = next(line for line in str(err.value).splitlines() if line.strip().startswith(field))
    assert message in line


def test_config_without_metaworld_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "metaworld.env_dict", None)
    with pytest.raises(ConfigError, match=r"env.env_type = 'metaworld'.*rlpipe\[metaworld\]"):
        load_config("ppo_cartpole", ["env.env_type=metaworld"])
    # other env types do not need it
    assert load_config("ppo_cartpole").env.manipulation.tasks == ["reach-v3"]


def test_an_env_made_in_one_thread_renders_in_another():
    """A Ray actor may step its envs in another thread than the one that made them."""
    import threading

    env = make(obs_mode="rgb")
    first, _ = env.reset(seed=3)
    frames = []

    def step_elsewhere():
        frames.append(env.reset(seed=3)[0]["main_images"])
        frames.append(env.step(np.zeros(4, np.float32))[0]["main_images"])

    worker = threading.Thread(target=step_elsewhere)
    worker.start()
    worker.join()
    assert len(frames) == 2
    np.testing.assert_array_equal(frames[0], first["main_images"])
    env.step(np.zeros(4, np.float32))  # and back in this thread
    env.close()
