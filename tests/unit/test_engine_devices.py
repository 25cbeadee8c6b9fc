"""Rollout engines and trainer collectives follow the device Ray assigned the worker, never
``torch.cuda.is_available()``; engine factories of the earlier two-argument form still work."""

from __future__ import annotations

import logging
import os
import sys
from types import SimpleNamespace

import pytest
import torch

from infra.llm import distributed, engines
from infra.llm.engines import ENGINES, RolloutEngine, make_engine
from infra.llm.vllm_engine import (
    VLLM_ENV,
    VLLMUnavailableError,
    check_platform,
    engine_kwargs,
    import_vllm,
)
from kinds.reasoning.sections import ReasoningModelConfig as ModelConfig
from kinds.reasoning.sections import ReasoningRolloutConfig as RolloutConfig


class _Engine(RolloutEngine):
    def __init__(self, **seen: object) -> None:
        self.seen = seen

    def generate(self, prompt_ids, sampling, seed):  # pragma: no cover - not called
        raise NotImplementedError

    def update_weights(self, named_tensors, version):  # pragma: no cover - not called
        raise NotImplementedError


@pytest.fixture()
def hf_slot():
    """Lets a test register its own factory as ``hf``; puts the built-in back."""
    builtin = ENGINES.get("hf")
    yield
    ENGINES.register("hf", builtin, force=True)


def test_factories_get_the_device_and_collocation(hf_slot) -> None:
    def new_style(model_cfg, rollout_cfg, device, collocated=False):
        return _Engine(device=device, collocated=collocated)

    ENGINES.register("hf", new_style, force=True)
    engine = make_engine("hf", None, None, "cuda:3", collocated=True)
    assert engine.seen == {"device": torch.device("cuda", 3), "collocated": True}


def test_keyword_catch_all_factories_get_both(hf_slot) -> None:
    ENGINES.register("hf", lambda model_cfg, rollout_cfg, **kw: _Engine(**kw), force=True)
    assert make_engine("hf", None, None, torch.device("cpu")).seen == {
        "device": torch.device("cpu"),
        "collocated": False,
    }


def test_two_argument_factories_still_work_with_a_warning(hf_slot, caplog) -> None:
    def old_style(model_cfg, rollout_cfg):
        return _Engine(args=(model_cfg, rollout_cfg))

    ENGINES.register("hf", old_style, force=True)
    with caplog.at_level(logging.WARNING, logger=engines.__name__):
        engine = make_engine("hf", "m", "r", "cpu", collocated=True)
    assert engine.seen == {"args": ("m", "r")}
    assert "takes no `device` argument" in caplog.text


def test_hf_engine_uses_the_given_device_even_where_cuda_is_available(monkeypatch, tmp_path):
    from rl_core.models.tiny_lm import create_tiny_lm

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    path = create_tiny_lm(tmp_path / "tiny", num_hidden_layers=1)
    model_cfg = ModelConfig(model_type="hf_causal_lm", model_path=str(path))
    engine = make_engine("hf", model_cfg, RolloutConfig(), "cpu")
    assert engine.device == torch.device("cpu")
    assert {p.device.type for p in engine.model.parameters()} == {"cpu"}
    engine.sleep()  # no-op on the CPU: the weights stay where they are
    engine.wake()
    assert {p.device.type for p in engine.model.parameters()} == {"cpu"}


@pytest.mark.parametrize(
    ("backend", "device", "expected"),
    [
        ("auto", "cpu", "gloo"),
        ("auto", torch.device("cuda", 1), "nccl"),
        ("auto", "cuda:0", "nccl"),
        ("gloo", "cuda:0", "gloo"),
        ("nccl", "cpu", "nccl"),
    ],
)
def test_resolve_backend_picks_by_the_ranks_device(monkeypatch, backend, device, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # must not matter
    assert distributed.resolve_backend(backend, device) == expected


def _vllm_settings(**kw: object) -> SimpleNamespace:
    base = {
        "gpu_memory_utilization": 0.3,
        "enforce_eager": True,
        "max_model_len": None,
        "enable_sleep_mode": False,
    }
    return SimpleNamespace(**{**base, **kw})


def _model(dtype: str = "auto") -> SimpleNamespace:
    return SimpleNamespace(model_path="/m", dtype=dtype, trust_remote_code=False)


def test_vllm_arguments_follow_the_device() -> None:
    cpu = engine_kwargs(_model(), _vllm_settings(), on_gpu=False, collocated=True)
    assert cpu["dtype"] == "float32"
    assert "gpu_memory_utilization" not in cpu and "enable_sleep_mode" not in cpu
    assert engine_kwargs(_model("bfloat16"), _vllm_settings(), on_gpu=False)["dtype"] == "float32"

    gpu = engine_kwargs(_model(), _vllm_settings(), on_gpu=True)
    assert (gpu["dtype"], gpu["gpu_memory_utilization"]) == ("bfloat16", 0.3)
    assert gpu["enable_sleep_mode"] is False
    hybrid = engine_kwargs(_model("float16"), _vllm_settings(), on_gpu=True, collocated=True)
    assert (hybrid["dtype"], hybrid["enable_sleep_mode"]) == ("float16", True)
    asked = engine_kwargs(_model(), _vllm_settings(enable_sleep_mode=True), on_gpu=True)
    assert asked["enable_sleep_mode"] is True


def test_vllm_cpu_kv_cache_default_only_for_cpu_workers(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # the import fails after the env is set
    for key in ("VLLM_CPU_KVCACHE_SPACE", *VLLM_ENV):  # (put back as they were afterwards)
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(VLLMUnavailableError):
        import_vllm(torch.device("cuda", 0))
    assert "VLLM_CPU_KVCACHE_SPACE" not in os.environ
    with pytest.raises(VLLMUnavailableError):
        import_vllm("cpu")
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_vllm_build_must_match_the_workers_device() -> None:
    check_platform("cpu", torch.device("cpu"))
    check_platform("cuda", torch.device("cuda", 0))
    with pytest.raises(VLLMUnavailableError, match="Ray assigned this worker cpu"):
        check_platform("cuda", torch.device("cpu"))
    with pytest.raises(VLLMUnavailableError, match="computes on 'cpu'"):
        check_platform("cpu", torch.device("cuda", 0))
    with pytest.raises(VLLMUnavailableError, match="first visible GPU"):
        check_platform("cuda", torch.device("cuda", 2))


@pytest.mark.parametrize(("device", "cpu_attention"), [("cpu", True), ("cuda:1", False)])
def test_megatron_attention_follows_the_ranks_device(monkeypatch, device, cpu_attention) -> None:
    """The megatron backend builds CPU attention for CPU ranks, megatron's own for GPU ranks."""
    pytest.importorskip("megatron.core")
    from infra.llm import megatron_backend

    seen: dict[str, object] = {}

    def build(*args: object, **kwargs: object) -> None:
        seen.update(kwargs)
        raise StopIteration  # enough: the model is not needed

    monkeypatch.setattr(torch.cuda, "is_available", lambda: not cpu_attention)  # must not matter
    monkeypatch.setattr(megatron_backend, "build_gpt_model", build)
    backend = object.__new__(megatron_backend.MegatronBackend)
    backend.cfg = SimpleNamespace(
        actor=SimpleNamespace(
            megatron=SimpleNamespace(sequence_parallel=False, precision="float32")
        )
    )
    backend.shape, backend.tp, backend.device = None, 1, torch.device(device)
    with pytest.raises(StopIteration):
        backend._build({})
    assert seen == {"cpu_attention": cpu_attention}
