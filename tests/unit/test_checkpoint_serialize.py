import pytest

from infra.checkpoint.serialize import (
    bytes_to_object,
    bytes_to_tensors,
    object_to_bytes,
    unwrap_bytes,
    wrap_bytes,
)
from infra.checkpoint.store import CheckpointError


def test_nested_bytes_survive_a_weights_only_round_trip():
    state = {"env_states": [[b"\x00abc", b""], None], "rollout_rng": [{0: b"xyz"}]}
    loaded = bytes_to_object(object_to_bytes(wrap_bytes(state)), "workers.pt")
    assert unwrap_bytes(loaded) == state


def test_corrupt_files_raise_checkpoint_errors_naming_the_file():
    with pytest.raises(CheckpointError, match="model.safetensors is not a valid safetensors"):
        bytes_to_tensors(b"not safetensors", "step_000002/actor_0/model.safetensors")
    with pytest.raises(CheckpointError, match="optimizer.pt could not be loaded"):
        bytes_to_object(b"garbage", "step_000002/actor_0/optimizer.pt")


def test_numpy_arrays_survive_a_weights_only_round_trip():
    import numpy as np

    state = {
        "obs": np.arange(6, dtype=np.float32).reshape(2, 3),
        "parts": (np.array([1, 2], dtype=np.int64), np.array([True, False])),
        "returns": np.array([0.5, -1.25]),
    }
    loaded = unwrap_bytes(bytes_to_object(object_to_bytes(wrap_bytes(state)), "workers.pt"))
    for key in ("obs", "returns"):
        assert loaded[key].dtype == state[key].dtype
        np.testing.assert_array_equal(loaded[key], state[key])
    assert isinstance(loaded["parts"], tuple)
    np.testing.assert_array_equal(loaded["parts"][1], state["parts"][1])
    with pytest.raises(CheckpointError, match="numpy array of dtype object"):
        wrap_bytes({"obs": np.array([object()])})


def test_cpu_objects_are_written_as_torch_save_writes_them():
    import io
    from collections import namedtuple

    import torch

    from infra.checkpoint.serialize import _has_device_tensors, _to_cpu

    layer = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(layer.parameters())
    layer(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    state = {"optimizer": optimizer.state_dict(), "generator": torch.Generator().get_state()}
    plain = io.BytesIO()
    torch.save(state, plain)
    assert object_to_bytes(state) == plain.getvalue()
    assert not _has_device_tensors(state)
    assert _has_device_tensors({"log_alpha": [torch.zeros((), device="meta")]})
    pair = namedtuple("Pair", "first second")
    nested = {"t": (torch.ones(1), [torch.zeros(2)]), "p": pair(torch.ones(1), 3)}
    moved = _to_cpu(nested)
    assert type(moved["p"]) is pair and moved["p"].second == 3
    assert type(moved["t"]) is tuple and torch.equal(moved["t"][1][0], torch.zeros(2))
