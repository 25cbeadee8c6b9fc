"""The device a worker computes on follows the GPUs Ray assigned it, never "cuda:0 because
it exists"."""

from __future__ import annotations

import pytest
import torch

from infra.cluster.devices import DeviceError, local_cuda_index, resolve_device


def test_a_worker_without_gpus_computes_on_the_cpu_even_where_cuda_is_visible():
    assert resolve_device((), "0,1,2,3", cuda_available=True) == torch.device("cpu")


@pytest.mark.parametrize(
    ("gpu_id", "visible", "index"),
    [(3, "3", 0), (2, "1,2", 1), (5, None, 5), (5, "", 5), (0, " 0 , 4", 0)],
)
def test_the_local_cuda_index_is_the_assigned_gpus_place_among_the_visible_ones(
    gpu_id, visible, index
):
    assert local_cuda_index(gpu_id, visible) == index


def test_an_assigned_gpu_hidden_by_cuda_visible_devices_is_an_error():
    with pytest.raises(DeviceError, match="GPU 2 .*CUDA_VISIBLE_DEVICES='0,1'"):
        local_cuda_index(2, "0,1")


def test_a_worker_given_gpus_uses_the_first_of_them():
    assert resolve_device((6, 7), "6,7", cuda_available=True) == torch.device("cuda", 0)


def test_logical_gpus_without_cuda_fail_unless_allowed():
    with pytest.raises(DeviceError, match=r"GPU\(s\) \[1\] to actor worker 1 .*no CUDA"):
        resolve_device((1,), "1", cuda_available=False, what="actor worker 1")
    assert resolve_device((1,), "1", False, allow_logical=True) == torch.device("cpu")
