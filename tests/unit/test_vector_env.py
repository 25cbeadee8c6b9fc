"""VectorEnvAdapter over gymnasium envs: obs format, seeding, groups, truncation, state."""

import gymnasium as gym
import numpy as np
import pytest

from rl_core.config import load_config
from rl_core.envs import EnvSpaces, VectorEnvAdapter


def env_cfg(env_id="CartPole-v1", **update):
    return load_config().env.model_copy(update={"env_id": env_id, **update})


def make(env_id="CartPole-v1", num_envs=4, seed=0, group_size=1, **update):
    return VectorEnvAdapter(env_cfg(env_id, **update), num_envs, seed=seed, group_size=group_size)


def random_actions(envs, rng, steps):
    space = envs.spaces.action_space
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, size=(steps, envs.num_envs))
    shape = (steps, envs.num_envs, *space.shape)
    return rng.uniform(space.low, space.high, size=shape).astype(np.float32)


def rollout(envs, actions):
    frames = []
    for a in actions:
        out = envs.step(a)
        frames.append(
            (
                out["env_obs"]["states"].copy(),
                out["rewards"].copy(),
                out["terminated"].copy(),
                out["truncated"].copy(),
                out["final_obs"]["states"].copy(),
                list(out["episodes"]),
            )
        )
    return frames


def assert_same(frames_a, frames_b):
    assert len(frames_a) == len(frames_b)
    for fa, fb in zip(frames_a, frames_b, strict=True):
        for xa, xb in zip(fa[:5], fb[:5], strict=True):
            np.testing.assert_array_equal(xa, xb)
        assert fa[5] == fb[5]


@pytest.mark.parametrize(("env_id", "dim"), [("CartPole-v1", 4), ("Pendulum-v1", 3)])
def test_obs_dict_states_float32(env_id, dim):
    envs = make(env_id, num_envs=3)
    try:
        assert isinstance(envs.spaces, EnvSpaces)
        assert envs.spaces.observation_space.shape == (dim,)
        for obs in (envs.observation(), envs.reset(5)):
            assert set(obs) == {"states"}
            assert obs["states"].dtype == np.float32
            assert obs["states"].shape == (3, dim)
        actions = random_actions(envs, np.random.default_rng(0), 1)[0]
        out = envs.step(actions)
        assert out["env_obs"]["states"].shape == (3, dim)
        assert out["env_obs"]["states"].dtype == np.float32
        assert out["rewards"].shape == (3,) and out["rewards"].dtype == np.float32
        assert out["terminated"].dtype == bool and out["truncated"].dtype == bool
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_same_seed_same_trajectories(env_id):
    a, b, c = make(env_id, seed=7), make(env_id, seed=7), make(env_id, seed=8)
    try:
        np.testing.assert_array_equal(a.observation()["states"], b.observation()["states"])
        assert not np.array_equal(a.observation()["states"], c.observation()["states"])
        actions = random_actions(a, np.random.default_rng(1), 60)  # CartPole episodes end
        frames_a = rollout(a, actions)
        assert_same(frames_a, rollout(b, actions))
        if env_id == "CartPole-v1":
            assert any(f[5] for f in frames_a), "expected at least one episode to end"
    finally:
        for e in (a, b, c):
            e.close()


def test_groups_share_reset_seed():
    envs = make(num_envs=4, seed=3, group_size=2)
    try:
        s = envs.observation()["states"]
        np.testing.assert_array_equal(s[0], s[1])
        np.testing.assert_array_equal(s[2], s[3])
        assert not np.array_equal(s[0], s[2])
        # env i is seeded with seed + i // group_size: group 1 equals group 0 of seed 4
        other = make(num_envs=2, seed=4, group_size=2)
        np.testing.assert_array_equal(other.observation()["states"][0], s[2])
        other.close()
    finally:
        envs.close()


def test_reset_with_explicit_seed_list():
    envs = make(num_envs=3)
    try:
        s = envs.reset([5, 5, 6])["states"]
        np.testing.assert_array_equal(s[0], s[1])
        assert not np.array_equal(s[0], s[2])
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_truncation_returns_final_obs_and_episode(env_id):
    envs = make(env_id, num_envs=3, max_episode_steps=5)
    try:
        space = envs.spaces.action_space
        if isinstance(space, gym.spaces.Discrete):
            actions = [np.array([0, 1, 0]), np.array([1, 0, 1])] * 3  # balanced: no fall in 5
        else:
            actions = [np.zeros((3, 1), dtype=np.float32)] * 6
        for t in range(4):
            out = envs.step(actions[t])
            assert not out["truncated"].any() and not out["terminated"].any()
            assert out["episodes"] == []
            np.testing.assert_array_equal(out["final_obs"]["states"], out["env_obs"]["states"])
        prev = out["env_obs"]["states"]
        out = envs.step(actions[4])
        assert out["truncated"].all()
        assert not out["terminated"].any()
        final, reset_obs = out["final_obs"]["states"], out["env_obs"]["states"]
        assert final.shape == reset_obs.shape == (3, envs.spaces.observation_space.shape[0])
        assert not np.allclose(final, reset_obs)
        assert not np.array_equal(final, prev)  # the 5th step's observation, not the 4th
        assert [length for _, length, _ in out["episodes"]] == [5, 5, 5]
        if env_id == "CartPole-v1":
            assert [ret for ret, _, _ in out["episodes"]] == [5.0, 5.0, 5.0]
            # a reset CartPole state lies in [-0.05, 0.05]
            assert np.abs(reset_obs).max() <= 0.05
        # stats restart: the next episode ends after 5 more steps again
        for t in range(5):
            out = envs.step(actions[t % 2])
        assert out["truncated"].all()
        assert [length for _, length, _ in out["episodes"]] == [5, 5, 5]
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_get_state_set_state_round_trip(env_id):
    rng = np.random.default_rng(2)
    envs = make(env_id, seed=11)
    copy = make(env_id, seed=99)
    try:
        rollout(envs, random_actions(envs, rng, 7))
        state = envs.get_state()
        # only the vector env itself is pickled; observations and episode stats are arrays
        assert set(state) == {"envs", "obs", "returns", "lengths", "succeeded", "reports_success"}
        assert isinstance(state["envs"], bytes)
        np.testing.assert_array_equal(state["obs"], envs.observation()["states"])
        np.testing.assert_array_equal(state["lengths"], [7, 7, 7, 7])
        saved_obs = envs.observation()["states"].copy()
        future = random_actions(envs, rng, 60)
        expected = rollout(envs, future)  # original continues from the saved point

        copy.set_state(state)
        np.testing.assert_array_equal(copy.observation()["states"], saved_obs)
        envs.set_state(state)  # original rewound to the saved point
        np.testing.assert_array_equal(envs.observation()["states"], saved_obs)

        assert_same(rollout(copy, future), expected)
        assert_same(rollout(envs, future), expected)
    finally:
        envs.close()
        copy.close()


def test_episode_stats_survive_set_state():
    envs = make(num_envs=2, max_episode_steps=5)
    copy = make(num_envs=2, max_episode_steps=5)
    try:
        for _ in range(3):
            envs.step(np.array([0, 1]))
        copy.set_state(envs.get_state())
        for _ in range(2):
            out = copy.step(np.array([1, 0]))
        assert out["episodes"] == [(5.0, 5, None), (5.0, 5, None)]
    finally:
        envs.close()
        copy.close()


def test_step_latency_waits_once_per_batch_step_and_changes_nothing_else():
    waits = []
    slow = VectorEnvAdapter(
        env_cfg(step_latency_ms=2.5), 4, seed=0, sleep=lambda seconds: waits.append(seconds)
    )
    actions = random_actions(slow, np.random.default_rng(0), 5)
    frames = rollout(slow, actions)
    assert waits == [0.0025] * 5  # one round trip per step of the 4 envs
    fast = make(num_envs=4, seed=0)
    assert fast.step_latency_s == 0.0
    for a, b in zip(frames, rollout(fast, actions), strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


class _Reach(gym.Env):
    """Dict observations with an instruction; succeeds at step 2, ends at step 3 or 4."""

    observation_space = gym.spaces.Dict(
        {
            "states": gym.spaces.Box(-10, 10, (2,), np.float32),
            "task_descriptions": gym.spaces.Text(64),
        }
    )
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.fails = bool(self.np_random.integers(2))
        self.text = "fail" if self.fails else "reach the goal"
        return self._obs(), {"success": 0.0}

    def _obs(self):
        return {"states": np.full(2, self.t, np.float32), "task_descriptions": self.text}

    def step(self, action):
        self.t += 1
        success = float(self.t == 2 and not self.fails)
        return self._obs(), 1.0, self.t >= 3, False, {"success": success}


def test_success_and_text_observations_through_the_adapter():
    from rl_core.envs.registry import ENVS

    ENVS.register("test_reach", lambda cfg, render_mode=None: _Reach(), force=True)
    envs = VectorEnvAdapter(env_cfg(env_type="test_reach"), 6, seed=3)
    obs = envs.observation()
    assert obs["task_descriptions"].shape == (6,) and obs["task_descriptions"].dtype.kind == "U"
    ended = []
    for _ in range(3):
        out = envs.step(np.zeros((6, 1), np.float32))
        ended += out["episodes"]
    # every episode ended at step 3; it succeeded exactly when its text is not "fail"
    assert len(ended) == 6
    texts = out["final_obs"]["task_descriptions"]
    assert [s for _, _, s in ended] == [t != "fail" for t in texts]
    assert out["final_obs"]["states"][:, 0].tolist() == [3.0] * 6
    assert out["env_obs"]["states"][:, 0].tolist() == [0.0] * 6  # already reset
    from rl_core.data.batch import to_torch_tree

    tensors = to_torch_tree(out["env_obs"])
    assert tensors["task_descriptions"].tolist() == out["env_obs"]["task_descriptions"].tolist()
    assert tensors["states"].dtype.is_floating_point
