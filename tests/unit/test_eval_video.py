"""Evaluation videos: GIF encoding, a rendered CartPole episode, envs that cannot render."""

from __future__ import annotations

import io

import gymnasium as gym
import numpy as np
from PIL import Image

from kinds.embodied.video import encode_gif, render_episode
from rl_core.config import load_config
from rl_core.envs import probe_spaces, register_env
from rl_core.models import get_model


def _weights(cfg):
    policy = get_model(cfg.model, probe_spaces(cfg.env))
    return {k: v.numpy() for k, v in policy.state_dict().items()}


def test_encode_gif_frames_size_and_timing() -> None:
    frames = [np.zeros((40, 60, 3), dtype=np.uint8) for _ in range(5)]
    for i, frame in enumerate(frames):  # a square moving right
        frame[10:20, 10 * i : 10 * i + 10] = (255, 200, 0)
    gif = encode_gif(frames, frame_ms=80, scale=0.5)
    image = Image.open(io.BytesIO(gif))
    assert image.format == "GIF" and image.n_frames == 5
    assert image.size == (30, 20) and image.info["duration"] == 80


def test_cartpole_episode_renders_to_a_gif() -> None:
    cfg = load_config("ppo_cartpole", ["eval.video_frame_skip=1", "eval.video_max_frames=8"])
    result = render_episode(cfg.model_dump(mode="json"), _weights(cfg), seed=123)
    assert result["skipped"] is None, result
    image = Image.open(io.BytesIO(result["gif"]))
    assert image.n_frames > 1 and image.size == (300, 200)  # 600x400 at video_scale 0.5
    assert result["frames"] <= 8 and result["length"] >= 1
    again = render_episode(cfg.model_dump(mode="json"), _weights(cfg), seed=123)
    assert again["return"] == result["return"]  # deterministic


class _NoRender(gym.Env):
    """A one-step env whose render() gives nothing."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 1.0, True, False, {}

    def render(self):
        return None


def test_env_without_rgb_frames_is_skipped(clean_registries) -> None:
    register_env("norender_test", lambda env_cfg, render_mode=None: _NoRender(render_mode))
    cfg = load_config("ppo_cartpole", ["env.env_type=norender_test"])
    result = render_episode(cfg.model_dump(mode="json"), _weights(cfg), seed=0)
    assert result["gif"] is None and "no rgb_array frames" in result["skipped"]


def test_env_that_refuses_render_mode_is_skipped(clean_registries) -> None:
    def factory(env_cfg, render_mode=None):
        if render_mode is not None:
            raise ValueError("no rendering here")
        return _NoRender()

    register_env("refuses_test", factory)
    cfg = load_config("ppo_cartpole", ["env.env_type=refuses_test"])
    result = render_episode(cfg.model_dump(mode="json"), _weights(cfg), seed=0)
    assert result["gif"] is None and "no rendering here" in result["skipped"]
