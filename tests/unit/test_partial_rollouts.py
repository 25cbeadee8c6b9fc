"""A rollout worker's partial-rollout continuation and pinned weight versions, in process on
the tiny LM (no Ray): unfinished responses grow by at most the segment's budget, finished
ones are left alone, and every token names the weight version that generated it."""

from __future__ import annotations

import math

import pytest
import torch

from infra.weight_sync import StaleWeightsError
from kinds.reasoning.workers.llm_rollout_worker import LLMRolloutWorker
from rl_core.config import load_config
from rl_core.models.tiny_lm import create_tiny_lm


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> LLMRolloutWorker:
    model = create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)
    cfg = load_config(
        overrides=[
            "model.model_type=hf_causal_lm",
            f"model.model_path={model}",
            "algorithm.adv_type=grpo",
            "reward.reward_type=math_verify",
            "run.mode=async",
            "algorithm.max_staleness=1",
            "cluster.hybrid_engine=off",
        ]
    )
    rollout = LLMRolloutWorker(cfg.model_dump(mode="json"), 0, ())
    rollout.version = 7
    return rollout


def sampling(max_new_tokens: int) -> dict:
    # no stop token: every response runs to its budget, so the lengths are exact
    return {"max_new_tokens": max_new_tokens, "temperature": 1.0, "stop_token_ids": ()}


PROMPTS = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]


def test_a_continuation_adds_at_most_its_budget_under_its_version(worker) -> None:
    first = worker.generate(PROMPTS, sampling(2), seed=1, version=None)
    assert first["versions"] == [[7, 7]] * 3
    worker.kept = {6: {k: v.clone() for k, v in worker.engine.state_dict().items()}}
    worker.kept[7] = {k: v.clone() for k, v in worker.engine.state_dict().items()}
    more = worker.continue_generation(PROMPTS, first, sampling(5), 2, version=6, budget=1)
    assert [len(r) for r in more["response_ids"]] == [3, 3, 3]
    assert more["versions"] == [[7, 7, 6]] * 3
    assert [r[:2] for r in more["response_ids"]] == first["response_ids"]
    assert [len(lp) for lp in more["logprobs"]] == [3, 3, 3]
    rest = worker.continue_generation(PROMPTS, more, sampling(5), 3, version=7, budget=None)
    assert [len(r) for r in rest["response_ids"]] == [5, 5, 5]
    assert rest["versions"] == [[7, 7, 6, 7, 7]] * 3
    assert rest["finished"] == [False] * 3  # hit max_new_tokens: truncated, as in sync mode


def test_finished_responses_are_left_alone(worker) -> None:
    first = worker.generate(PROMPTS, sampling(2), seed=1, version=None)
    first["finished"][1] = True  # as if it had ended with its stop token
    more = worker.continue_generation(PROMPTS, first, sampling(4), 2, version=7, budget=None)
    assert more["response_ids"][1] == first["response_ids"][1]
    assert [len(r) for r in more["response_ids"]] == [4, 2, 4]


def test_a_version_neither_loaded_nor_kept_is_refused(worker) -> None:
    worker.kept = {}
    with pytest.raises(StaleWeightsError, match="asked for weight version 3 but holds 7"):
        worker.generate(PROMPTS, sampling(2), seed=1, version=3)


def test_a_kept_version_generates_and_the_loaded_one_comes_back(worker) -> None:
    loaded = {k: v.clone() for k, v in worker.engine.state_dict().items()}
    older = {k: torch.zeros_like(v) if v.is_floating_point() else v for k, v in loaded.items()}
    worker.kept = {6: older, 7: loaded}
    mine = worker.generate(PROMPTS, sampling(3), seed=4, version=7)
    old = worker.generate(PROMPTS, sampling(3), seed=4, version=6)
    assert old["versions"] == [[6, 6, 6]] * 3
    # all-zero weights give uniform next-token distributions: every log-prob is -log(V)
    vocab = worker.engine.model.config.vocab_size
    uniform = -math.log(vocab)
    assert all(abs(lp - uniform) < 1e-4 for row in old["logprobs"] for lp in row)
    assert not all(abs(lp - uniform) < 1e-4 for row in mine["logprobs"] for lp in row)
    after = worker.engine.state_dict()
    assert all(torch.equal(after[k], loaded[k]) for k in loaded)  # the loaded one is back
    again = worker.generate(PROMPTS, sampling(3), seed=4, version=7)
    assert again["response_ids"] == mine["response_ids"]
