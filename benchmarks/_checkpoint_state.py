"""The state a continuation depends on, read from a run's latest committed checkpoint.

``benchmarks/chaos.py`` compares it between a faulted run and a fault-free one, bit for bit:
weights, optimizer state, sampler and env state, ``env_steps`` and the trainer's counters.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_safetensors


def env_fingerprint(obj: Any, depth: int = 0) -> Any:
    """The state in a pickled env object, as comparable data.

    Walks the object graph and keeps arrays, numbers, strings and RNG states; skips spaces
    (their samplers are seeded from OS entropy on first use and never drive training) and
    functions (the env constructors).
    """
    import numpy as np

    if depth > 12 or callable(obj) and not hasattr(obj, "__dict__"):
        return None
    if isinstance(obj, np.random.Generator):
        return obj.bit_generator.state
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (int, float, str, bool, bytes)) or obj is None:
        return obj
    if isinstance(obj, dict):
        return {
            str(k): env_fingerprint(v, depth + 1)
            for k, v in obj.items()
            if "space" not in str(k) and not callable(v)
        }
    if isinstance(obj, (list, tuple)):
        return [env_fingerprint(v, depth + 1) for v in obj if not _is_function(v)]
    if type(obj).__module__.startswith("mujoco"):
        return _mujoco_fingerprint(obj)
    if type(obj).__module__.startswith("rl_core.") and _pickles_itself(type(obj)):
        # rlpipe's simulators pickle their state themselves (ManiSkill, LIBERO: seed and
        # actions)
        return {type(obj).__name__: env_fingerprint(obj.__getstate__(), depth + 1)}
    if hasattr(obj, "__dict__"):
        return {type(obj).__name__: env_fingerprint(vars(obj), depth + 1)}
    return re.sub(r" at 0x[0-9a-f]+", "", repr(obj))  # not where it sits in memory


def _pickles_itself(cls: type) -> bool:
    """``cls`` or an rlpipe class it derives from defines ``__getstate__`` (a mixin may)."""
    return any(
        "__getstate__" in vars(base) and base.__module__.startswith("rl_core.")
        for base in cls.__mro__
    )


#: What a MuJoCo simulation's data holds of its state (the rest follows from it).
_MJDATA_STATE = ("time", "qpos", "qvel", "act", "qacc_warmstart", "ctrl", "mocap_pos", "mocap_quat")


def _mujoco_fingerprint(obj: Any) -> Any:
    """MuJoCo's data by its state; other MuJoCo objects (models, contexts) by their type."""
    name = type(obj).__name__
    if name == "MjData":
        return {k: _as_list(getattr(obj, k)) for k in _MJDATA_STATE}
    return name


def _as_list(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def _is_function(obj: Any) -> bool:
    import types

    return isinstance(obj, (types.FunctionType, types.MethodType))


def _workers_state(data: bytes) -> Any:
    """Env states (by content) and rollout RNG states of ``workers.pt``."""
    import cloudpickle

    from infra.checkpoint.worker_state import decode_workers_state

    env_states, rollout_rng = decode_workers_state(data, "workers.pt")
    envs = [
        [_slice_fingerprint(s, cloudpickle) for s in worker] if worker else None
        for worker in env_states
    ]
    return {"env_states": envs, "rollout_rng": rollout_rng}


def _slice_fingerprint(state: Any, cloudpickle: Any) -> Any:
    if isinstance(state, bytes):  # checkpoints of older versions: the whole slice pickled
        return env_fingerprint(cloudpickle.loads(state))
    return {
        k: env_fingerprint(cloudpickle.loads(v) if k == "envs" else v) for k, v in state.items()
    }


def final_state(run_dir: Path) -> dict[str, Any]:
    """Everything a continuation depends on, from the run's latest committed checkpoint."""
    ckpt = run_dir / "checkpoints"
    manifest = json.loads((ckpt / "latest.json").read_text())
    folder = ckpt / manifest["dir"]
    state: dict[str, Any] = {
        "step": manifest["step"],
        "env_steps": manifest["state"]["env_steps"],
    }
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.suffix == ".safetensors":
            state[rel] = load_safetensors(path.read_bytes())
        elif path.name == "workers.pt":
            state[rel] = _workers_state(path.read_bytes())
        elif path.name == "driver_rng.json":
            # Python's global RNG is also drawn by Prefect internals (retry jitter); rlpipe's
            # driver draws from none of the global RNGs, so only numpy/torch are compared.
            rng = json.loads(path.read_bytes())
            state[rel] = {"numpy": rng["numpy"], "torch": rng["torch"]}
        elif path.suffix == ".pt":
            state[rel] = torch.load(io.BytesIO(path.read_bytes()), weights_only=True)
        elif path.suffix in (".distcp", ".json") and path.name not in ("config.json",):
            state[rel] = path.read_bytes()
    return state


def same(a: Any, b: Any) -> bool:
    """Exact equality of nested checkpoint content (tensors bit for bit)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Names of the checkpoint entries that differ."""
    keys = sorted(set(a) | set(b))
    return [k for k in keys if k not in a or k not in b or not same(a[k], b[k])]
