"""JSON form of gymnasium spaces, so a standalone model directory can rebuild its policy.

A model builder takes ``(model_cfg, spaces)``; exporting a policy stores the spaces next to
its weights so it can be loaded again without constructing the environment.
Supported: ``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Dict``, ``Tuple``,
``Text`` (instructions); :func:`register_space_codec` adds others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

Encoder = Callable[[Any], dict[str, Any]]
Decoder = Callable[[dict[str, Any]], gym.Space]
_ENCODERS: dict[type, tuple[str, Encoder]] = {}
_DECODERS: dict[str, Decoder] = {}


def register_space_codec(cls: type, name: str, encode: Encoder, decode: Decoder) -> None:
    """Teach :func:`space_to_dict` / :func:`space_from_dict` a space class.

    Args:
        cls: The gymnasium space class.
        name: Its name in the JSON form (``{"type": name, ...}``).
        encode: ``space -> dict`` of JSON-able fields (without ``type``).
        decode: ``dict -> space`` (receives the fields written by ``encode``).
    """
    _ENCODERS[cls] = (name, encode)
    _DECODERS[name] = decode


def space_to_dict(space: gym.Space) -> dict[str, Any]:
    """JSON-able description of ``space``.

    Raises:
        TypeError: No codec is registered for the space's class.
    """
    for cls in type(space).__mro__:
        if cls in _ENCODERS:
            name, encode = _ENCODERS[cls]
            return {"type": name, **encode(space)}
    raise TypeError(
        f"cannot describe {type(space).__name__} as JSON; register a codec with "
        "rl_core.envs.spaces.register_space_codec"
    )


def space_from_dict(data: dict[str, Any]) -> gym.Space:
    """Inverse of :func:`space_to_dict`.

    Raises:
        ValueError: Unknown ``type`` or malformed fields.
    """
    kind = data.get("type") if isinstance(data, dict) else None
    if kind not in _DECODERS:
        raise ValueError(
            f"unknown space description {data!r}; known types: {', '.join(sorted(_DECODERS))}"
        )
    fields = {k: v for k, v in data.items() if k != "type"}
    try:
        return _DECODERS[kind](fields)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed {kind} space description {data!r}: {exc}") from None


def _array(values: Any, dtype: str) -> np.ndarray:
    return np.asarray(values, dtype=np.dtype(dtype))


def _float_list(arr: np.ndarray) -> list:
    # JSON has no inf: keep infinities as strings numpy parses back ("inf", "-inf").
    return np.where(np.isfinite(arr), arr, arr.astype(str).astype(object)).tolist()


register_space_codec(
    gym.spaces.Box,
    "Box",
    lambda s: {
        "low": _float_list(s.low),
        "high": _float_list(s.high),
        "shape": list(s.shape),
        "dtype": str(s.dtype),
    },
    lambda d: gym.spaces.Box(
        low=_array(d["low"], d["dtype"]).reshape(d["shape"]),
        high=_array(d["high"], d["dtype"]).reshape(d["shape"]),
        shape=tuple(d["shape"]),
        dtype=np.dtype(d["dtype"]),
    ),
)
register_space_codec(
    gym.spaces.Discrete,
    "Discrete",
    lambda s: {"n": int(s.n), "start": int(s.start)},
    lambda d: gym.spaces.Discrete(int(d["n"]), start=int(d.get("start", 0))),
)
register_space_codec(
    gym.spaces.MultiDiscrete,
    "MultiDiscrete",
    lambda s: {"nvec": s.nvec.tolist(), "start": s.start.tolist()},
    lambda d: gym.spaces.MultiDiscrete(np.asarray(d["nvec"]), start=np.asarray(d["start"])),
)
register_space_codec(
    gym.spaces.MultiBinary,
    "MultiBinary",
    lambda s: {"n": np.asarray(s.n).tolist()},
    lambda d: gym.spaces.MultiBinary(d["n"]),
)
register_space_codec(
    gym.spaces.Dict,
    "Dict",
    lambda s: {"spaces": {k: space_to_dict(v) for k, v in s.spaces.items()}},
    lambda d: gym.spaces.Dict({k: space_from_dict(v) for k, v in d["spaces"].items()}),
)
register_space_codec(
    gym.spaces.Tuple,
    "Tuple",
    lambda s: {"spaces": [space_to_dict(v) for v in s.spaces]},
    lambda d: gym.spaces.Tuple([space_from_dict(v) for v in d["spaces"]]),
)

register_space_codec(
    gym.spaces.Text,
    "Text",
    lambda s: {
        "max_length": int(s.max_length),
        "min_length": int(s.min_length),
        "charset": "".join(sorted(s.character_set)),
    },
    lambda d: gym.spaces.Text(
        int(d["max_length"]), min_length=int(d["min_length"]), charset=str(d["charset"])
    ),
)


def env_spaces_to_dict(spaces: Any) -> dict[str, Any]:
    """JSON form of an :class:`~rl_core.envs.registry.EnvSpaces` (what model builders get)."""
    return {
        "observation_space": space_to_dict(spaces.observation_space),
        "action_space": space_to_dict(spaces.action_space),
    }


def env_spaces_from_dict(data: dict[str, Any]) -> Any:
    """Inverse of :func:`env_spaces_to_dict`."""
    from rl_core.envs.registry import EnvSpaces

    return EnvSpaces(
        space_from_dict(data["observation_space"]), space_from_dict(data["action_space"])
    )
