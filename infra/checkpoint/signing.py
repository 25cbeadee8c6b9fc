"""Signatures on checkpoint data that only a pickle can hold (HMAC-SHA256, per-user key).

Some state can only be captured by pickling (an arbitrary gymnasium env, the metadata of a
``torch.distributed.checkpoint`` folder), and unpickling runs code. Such data is signed when
it is saved and verified before anything is unpickled, with a key that never lives in a
checkpoint:

- the key file is ``$RLPIPE_KEY_FILE`` if set, else ``~/.config/rlpipe/checkpoint.key``;
- it is created on first use (32 random bytes as hex, mode 0600); Ray workers on this
  machine run as the same user and read the same file.

A signature binds the data to a *purpose* (``"env-state"``, ``"dcp-metadata"``), so data
signed for one use is not accepted for another. Data without a valid signature (missing,
another user's key, modified) is refused with a :class:`CheckpointError` unless the caller
trusts the checkpoint (``run.trust_checkpoint`` / ``--trust-checkpoint``), which loads it
with a logged warning.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import threading
from pathlib import Path
from typing import Any

from infra.checkpoint.store import CheckpointError

logger = logging.getLogger(__name__)

#: Environment variable naming the key file.
KEY_FILE_VAR = "RLPIPE_KEY_FILE"
DEFAULT_KEY_FILE = "~/.config/rlpipe/checkpoint.key"
KEY_BYTES = 32
ALGORITHM = "hmac-sha256"
#: How to load data without a valid signature anyway (quoted in every refusal).
TRUST_HINT = (
    "if you trust where this checkpoint came from, rerun with --trust-checkpoint "
    "(run.trust_checkpoint=true)"
)

_keys: dict[Path, bytes] = {}
_keys_lock = threading.Lock()


def key_file() -> Path:
    """The signing key's path: ``$RLPIPE_KEY_FILE``, else ``~/.config/rlpipe/checkpoint.key``."""
    return Path(os.environ.get(KEY_FILE_VAR) or DEFAULT_KEY_FILE).expanduser().resolve()


def signing_key() -> bytes:
    """This user's signing key, created on first use (cached per key file)."""
    path = key_file()
    with _keys_lock:
        key = _keys.get(path)
        if key is None:
            if not path.exists():
                _create_key_file(path)
            key = _read_key_file(path)
            _keys[path] = key
    return key


def key_id(key: bytes) -> str:
    """A short public name of a key (names it in errors without revealing it)."""
    return hashlib.sha256(b"rlpipe checkpoint key id\0" + key).hexdigest()[:16]


def sign(data: bytes, purpose: str) -> dict[str, str]:
    """The signature of ``data`` for ``purpose`` under this user's key.

    Returns:
        ``{"alg": "hmac-sha256", "key_id": ..., "mac": <hex>}`` (JSON-able).
    """
    key = signing_key()
    return {"alg": ALGORITHM, "key_id": key_id(key), "mac": _mac(key, data, purpose)}


def verify(data: bytes, signature: Any, purpose: str, what: str, trust: bool = False) -> None:
    """Check ``signature`` on ``data`` before the caller unpickles it.

    Args:
        data: The exact bytes that will be unpickled.
        signature: What :func:`sign` returned at save time (None or anything else if the
            file carries none).
        purpose: The purpose it was signed for.
        what: The file (and part of it) in messages.
        trust: Accept data without a valid signature, with a logged warning.

    Raises:
        CheckpointError: No valid signature of this user's key, and ``trust`` is False.
    """
    problem = _problem(data, signature, purpose)
    if problem is None:
        return
    if trust:
        logger.warning(
            "loading %s because the checkpoint is trusted (--trust-checkpoint), although it %s",
            what,
            problem,
        )
        return
    raise CheckpointError(
        f"{what} {problem}; it holds pickled data that could run code when loaded, so it "
        f"was not loaded ({TRUST_HINT})"
    )


def _problem(data: bytes, signature: Any, purpose: str) -> str | None:
    """Why ``signature`` does not vouch for ``data`` (None: it does)."""
    if signature is None:
        return "is not signed"
    if not isinstance(signature, dict) or signature.get("alg") != ALGORITHM:
        return "has a malformed signature"
    key = signing_key()
    mine = key_id(key)
    if signature.get("key_id") != mine:
        return (
            f"was signed with another key (key id {str(signature.get('key_id'))[:16]!r}; "
            f"this user's key {key_file()} has id {mine!r})"
        )
    mac = signature.get("mac")
    if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(key, data, purpose)):
        return "does not match its signature (it was modified after it was saved)"
    return None


def _mac(key: bytes, data: bytes, purpose: str) -> str:
    digest = hmac.new(key, purpose.encode() + b"\0", hashlib.sha256)
    digest.update(data)
    return digest.hexdigest()


def _create_key_file(path: Path) -> None:
    """Write a new random key with mode 0600 (atomic: concurrent creators agree on one)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(KEY_BYTES) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # fails if another process created the key first
            logger.info("created the checkpoint signing key %s", path)
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)


def _read_key_file(path: Path) -> bytes:
    try:
        text = path.read_text().strip()
        key = bytes.fromhex(text)
    except (OSError, ValueError) as exc:
        raise CheckpointError(
            f"checkpoint signing key {path} is unreadable ({exc}); it must hold "
            f"{2 * KEY_BYTES} hex digits (delete it to create a new key, which makes "
            "checkpoints signed with the old one foreign)"
        ) from None
    if len(key) < KEY_BYTES:
        raise CheckpointError(
            f"checkpoint signing key {path} has {len(key)} bytes; it must hold at least "
            f"{KEY_BYTES} ({2 * KEY_BYTES} hex digits)"
        )
    if path.stat().st_mode & 0o077:
        logger.warning(
            "checkpoint signing key %s is readable by other users; run: chmod 600 %s",
            path,
            path,
        )
    return key
