"""Weight-sync buckets: byte cap, oversized tensors, round trip and dtype cast."""

import numpy as np
import torch

from infra.weight_sync import bucket_nbytes, buckets_to_state_dict, state_dict_to_buckets


def make_state_dict():
    g = torch.Generator().manual_seed(0)
    return {
        "a.weight": torch.randn(16, 8, generator=g),  # 512 B
        "a.bias": torch.randn(16, generator=g),  # 64 B
        "b.weight": torch.randn(4, 16, generator=g),  # 256 B
        "big.weight": torch.randn(64, 8, generator=g),  # 2048 B
        "b.bias": torch.randn(4, generator=g),  # 16 B
        "steps": torch.tensor([7, 8], dtype=torch.int64),  # 16 B
    }


def test_buckets_respect_byte_cap_and_order():
    sd = make_state_dict()
    buckets = state_dict_to_buckets(sd, bucket_bytes=600)
    assert [list(b) for b in buckets] == [
        ["a.weight", "a.bias"],  # 576
        ["b.weight"],  # 256 + 2048 would exceed
        ["big.weight"],  # oversized: alone
        ["b.bias", "steps"],  # 32
    ]
    sizes = [sum(a.nbytes for a in b.values()) for b in buckets]
    assert sizes == [576, 256, 2048, 32]
    for bucket, size in zip(buckets, sizes, strict=True):
        assert size <= 600 or len(bucket) == 1
    assert bucket_nbytes(buckets) == sum(t.numel() * t.element_size() for t in sd.values())


def test_oversized_tensor_gets_its_own_bucket():
    sd = {"small": torch.zeros(2), "huge": torch.zeros(1000), "tail": torch.zeros(2)}
    buckets = state_dict_to_buckets(sd, bucket_bytes=100)
    assert [list(b) for b in buckets] == [["small"], ["huge"], ["tail"]]
    assert buckets[1]["huge"].nbytes == 4000


def test_everything_in_one_bucket_when_cap_is_large():
    buckets = state_dict_to_buckets(make_state_dict(), bucket_bytes=64 * 2**20)
    assert len(buckets) == 1 and len(buckets[0]) == 6


def test_round_trip_equals_state_dict():
    sd = make_state_dict()
    buckets = state_dict_to_buckets(sd, bucket_bytes=300)
    assert all(isinstance(a, np.ndarray) for b in buckets for a in b.values())
    out = buckets_to_state_dict(buckets)
    assert list(out) == list(sd)
    for name, tensor in sd.items():
        assert out[name].dtype == tensor.dtype
        torch.testing.assert_close(out[name], tensor, rtol=0, atol=0)


def test_round_trip_from_read_only_arrays_and_into_a_module():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    buckets = state_dict_to_buckets(module.state_dict(), bucket_bytes=40)
    for bucket in buckets:  # arrays from Ray's object store are read-only
        for arr in bucket.values():
            arr.setflags(write=False)
    out = buckets_to_state_dict(buckets)
    out["0.weight"].add_(1.0)  # writable copies, not views of the read-only buffers
    target = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    target.load_state_dict(out)
    torch.testing.assert_close(target[0].weight, module[0].weight + 1.0)
    torch.testing.assert_close(target[2].bias, module[2].bias)


def test_dtype_cast_applies_to_floating_tensors_only():
    sd = make_state_dict()
    buckets = state_dict_to_buckets(sd, bucket_bytes=600, dtype=torch.float16)
    arrays = {k: a for b in buckets for k, a in b.items()}
    assert arrays["a.weight"].dtype == np.float16
    assert arrays["steps"].dtype == np.int64
    # half the bytes for floats: now a.weight, a.bias and b.weight fit together (288+32+128)
    assert list(buckets[0]) == ["a.weight", "a.bias", "b.weight"]
    out = buckets_to_state_dict(buckets)
    assert out["a.weight"].dtype == torch.float16
    torch.testing.assert_close(out["a.weight"], sd["a.weight"].half(), rtol=0, atol=0)
    torch.testing.assert_close(out["a.weight"].float(), sd["a.weight"], rtol=1e-3, atol=1e-3)
    assert out["steps"].tolist() == [7, 8]
    assert sd["a.weight"].dtype == torch.float32  # the source is not modified


def test_gradients_are_detached():
    w = torch.randn(3, requires_grad=True)
    buckets = state_dict_to_buckets({"w": w * 2}, bucket_bytes=1024)
    np.testing.assert_array_equal(buckets[0]["w"], (w * 2).detach().numpy())
