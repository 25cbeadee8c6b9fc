"""The HF engine runs agent loops: stop texts, per-row limits, finish reasons, and rollout
log-probs equal to the trainer's on multi-turn batches (tool tokens in between)."""

from __future__ import annotations

import pytest
import torch

from infra.llm.engines import HFEngine
from kinds.reasoning.agent_rollout import run_agents
from kinds.reasoning.sections import ReasoningModelConfig
from rl_core.agents.lockstep import GenerationRequest
from rl_core.agents.outcomes import Outcome
from rl_core.agents.parsers import TOOL_PARSERS
from rl_core.agents.tools import TOOLS
from rl_core.llm import SamplingParams, hf_generate, pad_left, pad_right
from rl_core.models.causal_lm import CausalLMPolicy
from rl_core.models.tiny_lm import create_tiny_lm
from tests.fixtures.ext_modules import ext_agent_echo
from tests.fixtures.ext_modules.ext_agent_echo import COMMON


@pytest.fixture(scope="module", autouse=True)
def echo_tool_and_parser():
    """``every_turn_calls`` and ``echo`` (tests/fixtures/ext_modules/ext_agent_echo.py)."""
    ext_agent_echo.register()
    yield
    TOOL_PARSERS.unregister("every_turn_calls")
    TOOLS.unregister("echo")


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> HFEngine:
    path = create_tiny_lm(tmp_path_factory.mktemp("tiny") / "lm", num_hidden_layers=2)
    return HFEngine(ReasoningModelConfig(model_type="hf_causal_lm", model_path=str(path)))


def sampling(engine: HFEngine, **kw) -> SamplingParams:
    return SamplingParams(stop_token_ids=(engine.tokenizer.eos_token_id,), **kw)


def test_rows_end_at_a_stop_text_eos_or_their_own_limit(engine):
    tok = engine.tokenizer
    prompts = [tok(p)["input_ids"] for p in ("12*34=", "7+1=", "<q>", "999*999=", "a", "5")]
    limits = [1, 3, 8, 8, 2, 8]
    params = sampling(engine, max_new_tokens=8, temperature=1.0)
    out = hf_generate(
        engine.model, prompts, params, engine.pad_id, 5, limits, COMMON, engine.tokenizer
    )
    assert len(out.finish_reasons) == len(prompts)
    for ids, lps, why, limit in zip(
        out.response_ids, out.logprobs, out.finish_reasons, limits, strict=True
    ):
        assert 1 <= len(ids) <= limit and len(lps) == len(ids)
        text = tok.decode(ids)
        hits = [i for i in range(len(ids)) if any(c in tok.decode(ids[: i + 1]) for c in COMMON)]
        if why == "stop":  # ends at the first token that completes a stop text
            assert hits and hits[0] == len(ids) - 1, text
        elif why == "eos":
            assert ids[-1] == tok.eos_token_id and not hits[:-1]
        else:
            assert why == "length" and len(ids) == limit and (not hits or hits[0] == limit - 1)
    assert "stop" in out.finish_reasons  # the random model does produce common characters
    again = hf_generate(
        engine.model, prompts, params, engine.pad_id, 5, limits, COMMON, engine.tokenizer
    )
    assert again == out


def test_generate_turns_keeps_each_request_and_the_engine_version(engine):
    tok = engine.tokenizer
    engine.version = 3
    requests = [
        GenerationRequest(tok("1+1=")["input_ids"], COMMON, 4),
        GenerationRequest(tok("2+2=")["input_ids"], (), 2),
        GenerationRequest(tok("3+3=")["input_ids"], COMMON, 1),
    ]
    out = engine.generate_turns(requests, sampling(engine, max_new_tokens=8), seed=1)
    assert [g.version for g in out] == [3, 3, 3]
    assert len(out[1].ids) <= 2 and out[1].finish_reason in ("eos", "length")
    assert len(out[2].ids) == 1


def agent_section(**kw) -> dict:
    return {
        "loop": "tool_loop",
        "parser": "every_turn_calls",
        "tools": ["echo"],
        "max_turns": 4,
        "max_total_tokens": 64,
        "tool_retries": 0,
        **kw,
    }


def test_multi_turn_rollout_logprobs_equal_the_trainers_and_tool_tokens_are_masked(engine):
    tok = engine.tokenizer
    prompts = [tok(p)["input_ids"] for p in ("12*34=", "7+1=", "x", "999*999=")]
    fields = {"max_new_tokens": 6, "temperature": 0.8, "stop_token_ids": (tok.eos_token_id,)}
    out = run_agents(engine, prompts, fields, seed=11, agent=agent_section())
    summaries = out["trajectories"]
    assert any(s["num_turns"] >= 2 for s in summaries), summaries  # multi-turn for real
    for ids, mask, lps, versions, summary in zip(
        out["response_ids"],
        out["loss_masks"],
        out["logprobs"],
        out["versions"],
        summaries,
        strict=True,
    ):
        assert len(ids) == len(mask) == len(lps) == len(versions)
        for start, end, is_model in summary["turn_spans"]:
            assert set(mask[start:end]) <= {int(is_model)}
            if not is_model:  # tool output: no log-prob, no version, exactly the tool's text
                assert set(lps[start:end]) <= {0.0} and set(versions[start:end]) <= {-1}
                assert tok.decode(ids[start:end]).startswith("[got ")
    policy = CausalLMPolicy(engine.model, tok)
    p_ids, p_mask = pad_left(prompts, tok.pad_token_id)
    r_ids, r_mask = pad_right(out["response_ids"], tok.pad_token_id)
    with torch.no_grad():
        trainer = policy.forward(
            "default_forward",
            forward_inputs={
                "prompt_ids": p_ids,
                "prompt_mask": p_mask,
                "response_ids": r_ids,
                "response_mask": r_mask,
            },
            temperature=0.8,
        )["logprobs"]
    compared = 0
    for row, (lps, mask) in enumerate(zip(out["logprobs"], out["loss_masks"], strict=True)):
        model_tokens = torch.tensor(mask, dtype=torch.bool)
        rollout = torch.tensor(lps)[model_tokens]
        recomputed = trainer[row, : len(lps)][model_tokens]
        torch.testing.assert_close(recomputed, rollout, atol=1e-5, rtol=0)
        compared += int(model_tokens.sum())
    assert compared > 0


def test_same_seed_same_trajectories_and_a_failing_tool_is_an_infra_failure(engine):
    tok = engine.tokenizer
    prompts = [tok(p)["input_ids"] for p in ("1", "22", "333")]
    fields = {"max_new_tokens": 5, "temperature": 1.0, "stop_token_ids": (tok.eos_token_id,)}
    first = run_agents(engine, prompts, fields, seed=4, agent=agent_section())
    again = run_agents(engine, prompts, fields, seed=4, agent=agent_section())
    for key in ("response_ids", "logprobs", "loss_masks", "versions"):
        assert first[key] == again[key], key

    def broken(arguments: str) -> str:
        raise OSError("sandbox host unreachable")

    TOOLS.register("echo", broken, force=True)
    try:
        out = run_agents(engine, prompts, fields, seed=4, agent=agent_section(tool_retries=1))
    finally:
        TOOLS.register("echo", ext_agent_echo.echo, force=True)
    called = [s for s in out["trajectories"] if s["num_tool_calls"]]
    assert called and all(s["infra_failed"] for s in called)
    assert all(s["finish_reason"] == "infra_failure" for s in called)
    record = called[0]["tool_calls"][-1]
    assert record["outcome"] == Outcome.INFRA_FAILURE.value and record["attempts"] == 2
