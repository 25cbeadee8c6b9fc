"""The step folder of a checkpoint: every file name in it, and the one way a file is written.

A checkpoint of step ``k`` is the folder ``step_dir_name(k)`` of the run's store::

    step_000010/
    ├── actor_<rank>/model.safetensors     trainer weights (rank 0 of a sharded trainer)
    ├── actor_<rank>/optimizer.pt          optimizer state (embodied trainers)
    ├── actor_<rank>/trainer_state.pt      shuffle generator, weight version, skip streak
    ├── actor_dcp/                         sharded model + optimizer (torch DCP, signed)
    ├── replay/transitions.safetensors     replay buffer rows (``replay.checkpoint``)
    ├── replay/state.pt                    replay buffer cursor and generator
    ├── workers.pt                         env states (signed) and rollout generators
    ├── rollout_pipeline.pt                batches launched ahead (async runs)
    ├── reasoning_state.json               prompt cursor of a reasoning run
    ├── online_state.json                  baseline and simulated user of an online run
    ├── reward_model_state.json            data cursor of a reward-model run
    ├── driver_rng.json                    the driver's python, numpy and torch generators
    ├── config.json                        the resolved config
    ├── spaces.json                        the env spaces (runs of models that take them)
    └── COMPLETE                           written after everything above

The commit protocol's names (``latest.json``, ``step_XXXXXX``, ``COMPLETE``) belong to
:mod:`infra.checkpoint.store` and are re-exported here.

Every file (but those of the sharded folder, which torch DCP writes in the trainer ranks
through :mod:`infra.checkpoint.signed_dcp`) goes through :func:`write_file` and
:func:`read_file` with a :class:`Codec`:
JSON, safetensors, or ``torch.save`` data read back with ``weights_only=True``. The one
pickle a file can hold (the vector envs of ``workers.pt``) is signed when written and
verified before it is handed on (:mod:`infra.checkpoint.worker_state`), so nothing read
through this module runs code.

Driver-side state is declared as a :class:`StatePart` (a file, its codec, how to get the
state and how to put it back); :mod:`infra.checkpoint.parts` walks a runtime's declared
parts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.checkpoint.serialize import (
    bytes_to_object,
    bytes_to_tensors,
    object_to_bytes,
    tensors_to_bytes,
    unwrap_bytes,
    wrap_bytes,
)
from infra.checkpoint.store import (
    COMPLETE_FILE,
    MANIFEST,
    CheckpointError,
    CheckpointStore,
    step_dir_name,
)
from infra.checkpoint.worker_state import decode_workers_state, encode_workers_state

__all__ = [
    "ACTOR_DCP",
    "ACTOR_MODEL",
    "ACTOR_OPTIMIZER",
    "ACTOR_TRAINER_STATE",
    "COMPLETE_BYTES",
    "COMPLETE_FILE",
    "CONFIG_FILE",
    "DRIVER_RNG_FILE",
    "JSON",
    "JSON_INDENTED",
    "MANIFEST",
    "ONLINE_STATE_FILE",
    "PIPELINE_FILE",
    "POLICY_WEIGHTS",
    "RAW",
    "REASONING_STATE_FILE",
    "REPLAY_ARRAYS",
    "REPLAY_STATE",
    "REWARD_MODEL_STATE_FILE",
    "SAFETENSORS",
    "SIGNED_WORKERS",
    "SPACES_FILE",
    "TORCH",
    "TORCH_DATA",
    "WORKERS_FILE",
    "Codec",
    "StatePart",
    "actor_file",
    "has_file",
    "read_file",
    "read_part",
    "sharded_dir",
    "state_dict_part",
    "step_dir_name",
    "write_file",
]

# -- names ---------------------------------------------------------------------------------
#: Files of one trainer rank, under :func:`actor_file`'s ``actor_<rank>/``.
ACTOR_MODEL = "model.safetensors"
ACTOR_OPTIMIZER = "optimizer.pt"
ACTOR_TRAINER_STATE = "trainer_state.pt"
#: The sharded model and optimizer of a language-model trainer (torch DCP, signed metadata).
ACTOR_DCP = "actor_dcp"
#: The replay buffer of an off-policy run.
REPLAY_ARRAYS = "replay/transitions.safetensors"
REPLAY_STATE = "replay/state.pt"
#: Env worker states and rollout generators of an embodied run.
WORKERS_FILE = "workers.pt"
#: Batches launched ahead of the trainer (async runs).
PIPELINE_FILE = "rollout_pipeline.pt"
#: Driver-side state of the kinds: prompt cursor, online baseline, data cursor.
REASONING_STATE_FILE = "reasoning_state.json"
ONLINE_STATE_FILE = "online_state.json"
REWARD_MODEL_STATE_FILE = "reward_model_state.json"
#: The session's files.
DRIVER_RNG_FILE = "driver_rng.json"
CONFIG_FILE = "config.json"
SPACES_FILE = "spaces.json"
#: What ``COMPLETE`` holds.
COMPLETE_BYTES = b"ok\n"


def actor_file(rank: int, name: str) -> str:
    """A trainer rank's file in the step folder: ``actor_<rank>/<name>``."""
    return f"actor_{rank}/{name}"


#: The policy weights readers of a checkpoint take (evaluation, export, conversion).
POLICY_WEIGHTS = actor_file(0, ACTOR_MODEL)


# -- codecs --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Codec:
    """How a value becomes a file's bytes and back.

    Attributes:
        name: A short name (messages, tests).
        encode: Value → bytes.
        decode: ``(bytes, what, trust)`` → value; ``what`` names the file in errors and
            ``trust`` accepts signed parts without a valid signature (logged).
    """

    name: str
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes, str, bool], Any]


def _json_decode(data: bytes, what: str, trust: bool) -> Any:
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{what} is not valid JSON: {exc}") from None


def _raw_encode(value: bytes) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"a raw checkpoint file takes bytes, not {type(value).__name__}")
    return value


#: Plain JSON (state of the kinds, the driver's generators).
JSON = Codec("json", lambda value: json.dumps(value).encode(), _json_decode)
#: JSON indented for people (config, spaces).
JSON_INDENTED = Codec(
    "json-indented", lambda value: json.dumps(value, indent=2).encode(), _json_decode
)
#: Named tensors as safetensors.
SAFETENSORS = Codec(
    "safetensors", tensors_to_bytes, lambda data, what, trust: bytes_to_tensors(data, what)
)
#: Tensors and containers of primitives, ``torch.save`` / ``torch.load(weights_only=True)``.
TORCH = Codec("torch", object_to_bytes, lambda data, what, trust: bytes_to_object(data, what))
#: As :data:`TORCH`, with raw bytes and numpy arrays wrapped as tensors.
TORCH_DATA = Codec(
    "torch-data",
    lambda value: object_to_bytes(wrap_bytes(value)),
    lambda data, what, trust: unwrap_bytes(bytes_to_object(data, what)),
)
#: ``(env_states, rollout_rng)`` of ``workers.pt``, each env slice's pickle signed.
SIGNED_WORKERS = Codec(
    "signed-workers",
    lambda value: encode_workers_state(*value),
    decode_workers_state,
)
#: Bytes as they are (markers).
RAW = Codec("raw", _raw_encode, lambda data, what, trust: data)


# -- the one write and read ----------------------------------------------------------------
def write_file(store: CheckpointStore, folder: str, name: str, codec: Codec, value: Any) -> None:
    """Write ``value`` as the file ``name`` of the step folder ``folder`` (atomically).

    Args:
        store: The run's store.
        folder: The step folder (:func:`step_dir_name`).
        name: The file's path inside the folder (a name of this module).
        codec: How the value becomes bytes.
        value: The state.
    """
    store.write_bytes(f"{folder}/{name}", codec.encode(value))


def read_file(
    store: CheckpointStore, folder: str, name: str, codec: Codec, trust: bool = False
) -> Any:
    """Read back what :func:`write_file` wrote.

    Args:
        store: The run's store.
        folder: The step folder.
        name: The file's path inside the folder.
        codec: The codec it was written with.
        trust: Accept signed parts without a valid signature of this user's key (logged).

    Raises:
        CheckpointError: The file is missing, malformed, or holds a pickle that is not
            signed with this user's key (and ``trust`` is off).
    """
    path = f"{folder}/{name}"
    return codec.decode(store.read_bytes(path), f"{store.uri}/{path}", trust)


def has_file(store: CheckpointStore, folder: str, name: str) -> bool:
    """Whether the step folder holds the file ``name``."""
    return store.exists(f"{folder}/{name}")


def sharded_dir(store: CheckpointStore, folder: str) -> Path:
    """The local folder of a sharded trainer checkpoint (:data:`ACTOR_DCP`).

    Raises:
        CheckpointError: The store is not on a local file system.
    """
    local = store.local_path(f"{folder}/{ACTOR_DCP}")
    if local is None:
        raise CheckpointError("sharded trainer checkpoints need a local checkpoint store")
    return local


# -- declared driver-side state ------------------------------------------------------------
@dataclass(frozen=True)
class StatePart:
    """State the driver writes into a checkpoint as one file of the step folder.

    Attributes:
        file: The file's path inside the step folder (a name of this module).
        codec: How it is written and read.
        get: The state to save now; None writes no file this time.
        put: Puts the state back: ``put(value, step)`` with the decoded file, or with None
            when an ``optional`` part has no file. None: the file is written for readers of
            the checkpoint (evaluation, export) and not restored.
        optional: A missing file is not an error (``put`` gets None).
    """

    file: str
    codec: Codec
    get: Callable[[], Any]
    put: Callable[[Any, int], None] | None = None
    optional: bool = False


def read_part(store: CheckpointStore, folder: str, part: StatePart, trust: bool = False) -> Any:
    """The decoded file of ``part`` (None when an optional part has none)."""
    if part.optional and not has_file(store, folder, part.file):
        return None
    return read_file(store, folder, part.file, part.codec, trust)


def state_dict_part(file: str, owners: dict[str, Any]) -> StatePart:
    """A JSON part holding ``{key: owner.state_dict()}`` of each owner (a data cursor).

    Put back with each owner's ``load_state_dict``.
    """

    def put(state: dict[str, Any], step: int) -> None:
        for key, owner in owners.items():
            owner.load_state_dict(state[key])

    return StatePart(file, JSON, lambda: {k: o.state_dict() for k, o in owners.items()}, put)
