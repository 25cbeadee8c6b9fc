"""An evaluation episode rendered to an animated GIF (runs in any process, e.g. a Ray task).

The env is built with ``render_mode="rgb_array"`` (classic control renders with pygame,
MuJoCo offscreen with ``MUJOCO_GL=egl``); frames are downscaled and encoded with Pillow.
Envs that cannot render give ``{"gif": None, "skipped": reason}`` instead of failing.
"""

from __future__ import annotations

import io
import logging
import os
import time
from typing import Any

import numpy as np
import torch

from infra.cluster.runtime_env import limit_threads
from kinds.embodied.config import EmbodiedConfig
from rl_core.config import validate_config
from rl_core.envs import VectorEnvAdapter
from rl_core.models import get_model

logger = logging.getLogger(__name__)

#: Defaults for headless rendering (kept when already set).
RENDER_ENV = {
    "MUJOCO_GL": "egl",
    "PYGAME_HIDE_SUPPORT_PROMPT": "1",
    "SDL_AUDIODRIVER": "dummy",  # pygame.init() would look for a sound server
    "SDL_VIDEODRIVER": "dummy",
}


def encode_gif(frames: list[np.ndarray], frame_ms: int, scale: float = 1.0) -> bytes:
    """Encode RGB frames ``[H, W, 3]`` (uint8) as a looping animated GIF.

    One 64-colour palette, computed from up to 8 evenly spaced frames, serves every frame
    (rendered scenes keep their colours; per-frame palettes cost ~10x more).

    Args:
        frames: The frames, in order (at least one).
        frame_ms: Display time of each frame in milliseconds (GIF players floor it at 20).
        scale: Size factor applied to every frame.
    """
    from PIL import Image

    images = [_scaled(Image.fromarray(_rgb(frame)), scale) for frame in frames]
    picks = [images[i] for i in np.linspace(0, len(images) - 1, min(8, len(images))).astype(int)]
    montage = Image.new("RGB", (picks[0].width, picks[0].height * len(picks)))
    for i, pick in enumerate(picks):
        montage.paste(pick, (0, i * pick.height))
    palette = montage.quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    paletted = [im.quantize(palette=palette, dither=Image.Dither.NONE) for im in images]
    buffer = io.BytesIO()
    paletted[0].save(
        buffer,
        format="GIF",
        save_all=True,
        append_images=paletted[1:],
        duration=max(20, int(frame_ms)),
        loop=0,
    )
    return buffer.getvalue()


def _rgb(frame: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(frame)[..., :3], dtype=np.uint8)


def _scaled(image: Any, scale: float) -> Any:
    """Downscale by ``scale`` (integer factors use Pillow's fast box ``reduce``)."""
    if scale >= 1.0:
        return image
    factor = 1.0 / scale
    if abs(factor - round(factor)) < 1e-6:
        return image.reduce(round(factor))
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, resample=3)  # BICUBIC


def render_episode(config: dict[str, Any], state_dict: dict[str, Any], seed: int) -> dict[str, Any]:
    """Play one episode of the policy with rendering and encode it as a GIF.

    Actions follow ``eval.deterministic``; every ``eval.video_frame_skip``-th frame is kept,
    at most ``eval.video_max_frames`` (the episode is cut there).

    Args:
        config: Resolved run config (dict).
        state_dict: Policy weights (numpy arrays or tensors).
        seed: Reset seed of the episode.

    Returns:
        ``{"gif": bytes | None, "frames", "return", "length", "seconds", "skipped"}``;
        ``skipped`` names the reason when no GIF was made.
    """
    from infra.extensions import load_extension_modules

    started = time.perf_counter()
    limit_threads()
    load_extension_modules()
    for key, value in RENDER_ENV.items():
        os.environ.setdefault(key, value)
    cfg = validate_config(config, source="evaluation video")
    result: dict[str, Any] = {"gif": None, "frames": 0, "return": 0.0, "length": 0}
    try:
        envs = VectorEnvAdapter(cfg.env, 1, seed=seed, render_mode="rgb_array")
    except Exception as exc:  # noqa: BLE001 - any env may refuse rgb_array rendering
        return {**result, "seconds": time.perf_counter() - started, "skipped": repr(exc)}
    try:
        policy = get_model(cfg.model, envs.spaces)
        policy.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in state_dict.items()})
        policy.eval()
        frames, ret, length = _play_rendered(envs, policy, cfg)
    except Exception as exc:  # noqa: BLE001 - rendering backends fail in many ways
        return {**result, "seconds": time.perf_counter() - started, "skipped": repr(exc)}
    finally:
        envs.close()
    result.update({"return": ret, "length": length, "frames": len(frames)})
    if len(frames) == 0:
        result["skipped"] = "the env rendered no rgb_array frames"
    else:
        fps = float(envs.vec.metadata.get("render_fps") or 30)
        frame_ms = int(1000 * cfg.eval.video_frame_skip / fps)
        result["gif"] = encode_gif(frames, frame_ms, cfg.eval.video_scale)
        result["skipped"] = None
    result["seconds"] = time.perf_counter() - started
    return result


@torch.no_grad()
def _play_rendered(
    envs: VectorEnvAdapter, policy: Any, cfg: EmbodiedConfig
) -> tuple[list, float, int]:
    """Play until the episode ends or the frame cap; returns ``(frames, return, length)``."""
    mode = "eval" if cfg.eval.deterministic else "train"
    generator = torch.Generator().manual_seed(0)
    frames: list[np.ndarray] = []
    obs = envs.observation()
    total, length = 0.0, 0
    for step in range(cfg.eval.max_steps):
        if step % cfg.eval.video_frame_skip == 0:
            frame = envs.vec.render()
            frame = frame[0] if isinstance(frame, (tuple, list)) else frame
            if not isinstance(frame, np.ndarray) or frame.ndim != 3:
                return [], total, length
            frames.append(frame)
            if len(frames) >= cfg.eval.video_max_frames:
                break
        actions, _ = policy.predict_action_batch(
            obs, mode=mode, compute_values=False, generator=generator
        )
        out = envs.step(actions)
        total += float(out["rewards"][0])
        length += 1
        if out["terminated"][0] or out["truncated"][0]:
            break
        obs = out["env_obs"]
    return frames, total, length
