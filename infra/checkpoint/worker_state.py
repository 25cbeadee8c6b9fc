"""``workers.pt``: the env workers' states and the rollout workers' RNGs of a checkpoint.

The file is data for ``torch.load(weights_only=True)``: tensors, numbers, strings and
containers. The one pickle in it, each env slice's ``envs`` bytes (an arbitrary gymnasium
vector env), carries a signature (:mod:`infra.checkpoint.signing`) that is verified before
the bytes are handed back to an env worker, which unpickles them.
"""

from __future__ import annotations

from typing import Any

from infra.checkpoint.serialize import bytes_to_object, object_to_bytes, unwrap_bytes, wrap_bytes
from infra.checkpoint.signing import sign, verify
from infra.checkpoint.store import CheckpointError

#: Signature purpose of the pickled vector envs.
ENV_STATE_PURPOSE = "env-state"
WORKERS_FORMAT = 2

#: One env worker's state: a list with one dict per env slice, or None (reseed on resume).
EnvWorkerState = list[dict[str, Any]] | None


def encode_workers_state(env_states: list[EnvWorkerState], rollout_rng: list[Any]) -> bytes:
    """The bytes of ``workers.pt``, each env slice's pickled ``envs`` signed.

    Args:
        env_states: ``EnvWorker.get_state()`` of every env worker.
        rollout_rng: ``RolloutWorker.get_rng_state()`` of every rollout worker.
    """
    signed = [None if worker is None else [_signed(s) for s in worker] for worker in env_states]
    state = {"format": WORKERS_FORMAT, "env_states": signed, "rollout_rng": rollout_rng}
    return object_to_bytes(wrap_bytes(state))


def decode_workers_state(
    data: bytes, what: str, trust: bool = False
) -> tuple[list[EnvWorkerState | list[bytes]], list[Any]]:
    """Read ``workers.pt`` and verify every pickled env state before returning it.

    Args:
        data: The file's bytes.
        what: The file's location (for messages).
        trust: Accept env states without a valid signature of this user's key (logged).

    Returns:
        ``(env_states, rollout_rng)``: what :func:`encode_workers_state` took (signatures
        removed); a checkpoint written before env states were signed has raw ``bytes`` per
        slice, returned only when ``trust`` is set.

    Raises:
        CheckpointError: The file is malformed, or an env state is unsigned, signed with
            another key or modified (and ``trust`` is False).
    """
    workers = unwrap_bytes(bytes_to_object(data, what))
    try:
        env_states, rollout_rng = workers["env_states"], workers["rollout_rng"]
        checked = [_verified_worker(w, what, i, trust) for i, w in enumerate(env_states)]
    except (KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{what} is malformed ({exc!r}); refusing to resume") from None
    return checked, rollout_rng


def _signed(state: dict[str, Any]) -> dict[str, Any]:
    return {**state, "signature": sign(state["envs"], ENV_STATE_PURPOSE)}


def _verified_worker(
    worker: Any, what: str, rank: int, trust: bool
) -> list[dict[str, Any] | bytes] | None:
    if worker is None:
        return None
    return [
        _verified(s, f"{what} (env worker {rank}, slice {k})", trust) for k, s in enumerate(worker)
    ]


def _verified(state: Any, what: str, trust: bool) -> dict[str, Any] | bytes:
    if isinstance(state, bytes):  # older checkpoints: the whole env slice pickled, unsigned
        verify(state, None, ENV_STATE_PURPOSE, what, trust)
        return state
    envs = state["envs"]
    if not isinstance(envs, bytes):
        raise TypeError(f"envs is {type(envs).__name__}, expected bytes")
    verify(envs, state.get("signature"), ENV_STATE_PURPOSE, what, trust)
    return {k: v for k, v in state.items() if k != "signature"}
