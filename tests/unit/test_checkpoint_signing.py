"""Signed env states: workers.pt can hold a pickle, but only this user's signed one loads."""

from __future__ import annotations

import logging
import pickle
import stat

import numpy as np
import pytest

from infra.checkpoint import signing
from infra.checkpoint.serialize import bytes_to_object, object_to_bytes, unwrap_bytes, wrap_bytes
from infra.checkpoint.signing import key_file, sign, verify
from infra.checkpoint.store import CheckpointError
from infra.checkpoint.worker_state import (
    ENV_STATE_PURPOSE,
    decode_workers_state,
    encode_workers_state,
)
from rl_core.config import load_config
from rl_core.envs import VectorEnvAdapter
from tests.env_vars import unset
from tests.poison import poisoned_pickle

WHAT = "/ckpt/step_000005/workers.pt"


@pytest.fixture()
def key_path(tmp_path, monkeypatch):
    """A fresh key file of this test (created on first use)."""
    path = tmp_path / "keys" / "mine.key"
    monkeypatch.setenv(signing.KEY_FILE_VAR, str(path))
    return path


def use_key(monkeypatch, path):
    monkeypatch.setenv(signing.KEY_FILE_VAR, str(path))


def cartpole(seed=3):
    cfg = load_config().env
    return VectorEnvAdapter(cfg, 4, seed=seed)


def step(envs, n=5):
    for t in range(n):
        envs.step(np.array([t % 2] * envs.num_envs))


def test_poisoned_pickle_really_runs_code(tmp_path):
    """Control: the stand-in does create its file when unpickled without a check."""
    marker = tmp_path / "pwned"
    pickle.loads(poisoned_pickle(marker))
    assert marker.exists()


def test_key_is_created_once_with_mode_0600(key_path):
    assert not key_path.exists()
    first = sign(b"data", ENV_STATE_PURPOSE)
    assert key_path.is_file()
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert len(bytes.fromhex(key_path.read_text().strip())) == signing.KEY_BYTES
    assert sign(b"data", ENV_STATE_PURPOSE) == first  # same key, same signature
    assert first["alg"] == "hmac-sha256" and len(first["mac"]) == 64


def test_default_key_file_is_in_the_users_config_dir(tmp_path, monkeypatch):
    unset(monkeypatch, signing.KEY_FILE_VAR)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert key_file() == (tmp_path / ".config" / "rlpipe" / "checkpoint.key").resolve()
    sign(b"x", ENV_STATE_PURPOSE)
    assert stat.S_IMODE(key_file().stat().st_mode) == 0o600


def test_unreadable_key_file_is_a_clear_error(key_path):
    key_path.parent.mkdir(parents=True)
    key_path.write_text("not hex\n")
    with pytest.raises(CheckpointError, match=r"mine\.key is unreadable .* hex digits"):
        sign(b"x", ENV_STATE_PURPOSE)


def test_verify_accepts_own_signature_only_for_its_purpose(key_path):
    signature = sign(b"payload", ENV_STATE_PURPOSE)
    verify(b"payload", signature, ENV_STATE_PURPOSE, "f")  # no error
    with pytest.raises(CheckpointError, match="does not match its signature"):
        verify(b"payload", signature, "dcp-metadata", "f")
    with pytest.raises(CheckpointError, match="does not match its signature"):
        verify(b"payl0ad", signature, ENV_STATE_PURPOSE, "f")
    with pytest.raises(CheckpointError, match="f is not signed"):
        verify(b"payload", None, ENV_STATE_PURPOSE, "f")
    with pytest.raises(CheckpointError, match="malformed signature"):
        verify(b"payload", {"mac": "00"}, ENV_STATE_PURPOSE, "f")


# -- workers.pt ------------------------------------------------------------------------------
def saved_workers(envs):
    """workers.pt bytes of one env worker with one slice, as the driver writes them."""
    return encode_workers_state([[envs.get_state()]], [{0: np.zeros(2)}])


def tamper(data, edit):
    """Apply ``edit`` to the decoded workers.pt dict and re-encode it (no re-signing)."""
    workers = unwrap_bytes(bytes_to_object(data, WHAT))
    edit(workers)
    return object_to_bytes(wrap_bytes(workers))


def test_workers_state_round_trip_restores_the_envs(key_path):
    envs, copy = cartpole(), cartpole(seed=99)
    try:
        step(envs)
        data = saved_workers(envs)
        env_states, rng = decode_workers_state(data, WHAT)
        assert "signature" not in env_states[0][0]
        copy.set_state(env_states[0][0])
        np.testing.assert_array_equal(copy.observation()["states"], envs.observation()["states"])
        a, b = envs.step(np.ones(4, dtype=np.int64)), copy.step(np.ones(4, dtype=np.int64))
        np.testing.assert_array_equal(a["env_obs"]["states"], b["env_obs"]["states"])
        np.testing.assert_array_equal(rng[0][0], np.zeros(2))
    finally:
        envs.close()
        copy.close()


def poisons(marker, other_key, monkeypatch, mine):
    """workers.pt variants whose env state is the poisoned pickle."""
    envs = cartpole()
    try:
        data = saved_workers(envs)
    finally:
        envs.close()
    poison = poisoned_pickle(marker)

    def swap_blob(workers):  # keeps the (now wrong) signature
        workers["env_states"][0][0]["envs"] = poison

    def unsigned(workers):
        workers["env_states"][0][0].pop("signature")
        workers["env_states"][0][0]["envs"] = poison

    def legacy(workers):  # the layout before env states were signed: raw bytes per slice
        workers.pop("format")
        workers["env_states"] = [[poison]]

    use_key(monkeypatch, other_key)
    foreign_sig = sign(poison, ENV_STATE_PURPOSE)
    use_key(monkeypatch, mine)

    def other_key_signed(workers):
        workers["env_states"][0][0].update(envs=poison, signature=foreign_sig)

    return {
        "modified": (tamper(data, swap_blob), "does not match its signature"),
        "unsigned": (tamper(data, unsigned), "is not signed"),
        "legacy": (tamper(data, legacy), "is not signed"),
        "other key": (tamper(data, other_key_signed), "was signed with another key"),
    }


def test_poisoned_env_state_is_refused_and_runs_nothing(tmp_path, key_path, monkeypatch):
    marker = tmp_path / "pwned"
    cases = poisons(marker, tmp_path / "other.key", monkeypatch, key_path)
    for name, (data, problem) in cases.items():
        with pytest.raises(CheckpointError) as info:
            decode_workers_state(data, WHAT)
        msg = str(info.value)
        assert f"{WHAT} (env worker 0, slice 0) {problem}" in msg, name
        assert "--trust-checkpoint" in msg and "\n" not in msg
        assert not marker.exists(), name


def test_trust_checkpoint_loads_a_foreign_checkpoint_with_a_warning(
    tmp_path, key_path, monkeypatch, caplog
):
    envs, copy = cartpole(), cartpole(seed=99)
    try:
        step(envs, 7)
        use_key(monkeypatch, tmp_path / "colleague.key")  # saved by another user
        data = saved_workers(envs)
        use_key(monkeypatch, key_path)
        with pytest.raises(CheckpointError, match="signed with another key"):
            decode_workers_state(data, WHAT)
        with caplog.at_level(logging.WARNING, logger="infra.checkpoint.signing"):
            env_states, _ = decode_workers_state(data, WHAT, trust=True)
        assert "trusted (--trust-checkpoint), although it was signed with another key" in (
            caplog.text
        )
        copy.set_state(env_states[0][0])
        np.testing.assert_array_equal(copy.observation()["states"], envs.observation()["states"])
    finally:
        envs.close()
        copy.close()


def test_trusted_legacy_env_state_still_restores(key_path):
    """Checkpoints written before signing (whole adapter pickled) resume when trusted."""
    import cloudpickle

    envs, copy = cartpole(), cartpole(seed=99)
    try:
        step(envs)
        legacy = cloudpickle.dumps((envs.vec, envs._obs, envs._returns, envs._lengths))
        data = object_to_bytes(wrap_bytes({"env_states": [[legacy]], "rollout_rng": [{}]}))
        with pytest.raises(CheckpointError, match="is not signed"):
            decode_workers_state(data, WHAT)
        env_states, _ = decode_workers_state(data, WHAT, trust=True)
        copy.set_state(env_states[0][0])
        np.testing.assert_array_equal(copy.observation()["states"], envs.observation()["states"])
    finally:
        envs.close()
        copy.close()


def test_unpicklable_env_worker_state_stays_none(key_path):
    data = encode_workers_state([None, None], [{}])
    assert decode_workers_state(data, WHAT) == ([None, None], [{}])


def test_malformed_workers_file_is_a_checkpoint_error(key_path):
    data = object_to_bytes(wrap_bytes({"env_states": [[{"obs": 1}]], "rollout_rng": []}))
    with pytest.raises(CheckpointError, match=r"workers\.pt is malformed"):
        decode_workers_state(data, WHAT)
