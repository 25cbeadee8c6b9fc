"""A live model (one being trained outside rlpipe, e.g. the TRL anchor's) evaluated as a
run's checkpoint is: :meth:`CheckpointEvaluator.prepare` gives it everything a checkpoint
evaluator has, its reward plan and reward model included."""

from __future__ import annotations

from pathlib import Path

from kinds.reasoning.checkpoint_eval import CheckpointEvaluator
from rl_core.config import load_config
from rl_core.models.tiny_lm import create_tiny_lm


class LiveEvaluator(CheckpointEvaluator):
    def __init__(self, cfg, model, tokenizer) -> None:
        self.prepare(cfg, model, tokenizer)


def test_a_live_model_is_evaluated_like_a_checkpoint(tmp_path: Path) -> None:
    model_dir = create_tiny_lm(str(tmp_path / "tiny"), seed=0)
    cfg = load_config(
        "grpo_arith",
        [
            "run.warm_start=null",
            f"model.model_path={model_dir}",
            "data.eval_size=4",
            "rollout.max_new_tokens=4",
            "eval.pass_k=1",
        ],
    )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    evaluator = LiveEvaluator(cfg, model, tokenizer)
    assert evaluator.model_reward is None and len(evaluator.eval_prompts) == 4
    metrics, rows = evaluator.evaluate(0)
    assert 0.0 <= metrics["eval/accuracy"] <= 1.0 and rows
