"""TRL ``GRPOTrainer`` as a single-process anchor, configured from an rlpipe config.

The benchmarks call :func:`run_trl` in the driver: it starts this file as a subprocess
(its own imports and threads, one torch thread) with a JSON spec naming an rlpipe preset
and overrides. The subprocess builds the same run with TRL: the same model directory,
arithmetic prompts (rendered by rlpipe's prompt code, in the order rlpipe's prompt sampler
draws them), ``math_verify`` reward, batch, group size, sampling, learning rate,
clipping, loss aggregation and KL coefficient. It times every optimizer step and, when
asked, scores the held-out prompts with rlpipe's own evaluation
(:func:`kinds.reasoning.evaluation.evaluate_heldout`) from a callback, outside the training
clock.

Spec keys: ``preset``, ``overrides``, ``max_steps``, ``output_dir``, and optionally
``evaluate`` (bool), ``eval_interval`` (steps), ``target`` (stop at this accuracy).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SETUP_HINT = "install the anchors: bash scripts/setup_bench.sh"
#: rlpipe ``algorithm.loss_agg_mode`` -> TRL ``loss_type`` with the same normalization.
LOSS_TYPES = {
    "token-mean": "dapo",
    "seq-mean-token-mean": "grpo",
    "seq-mean-token-sum-norm": "dr_grpo",
}
#: rlpipe ``algorithm.adv_type`` -> TRL ``scale_rewards``.
REWARD_SCALING = {"grpo": "group", "dr_grpo": "none"}


def trl_available() -> bool:
    """Whether ``trl`` can be imported in this environment."""
    return importlib.util.find_spec("trl") is not None


def run_trl(spec: dict[str, Any], timeout: float = 3600.0) -> dict[str, Any]:
    """Run the TRL anchor in a subprocess and return its result.

    Args:
        spec: The run (see the module docstring).
        timeout: Seconds before the subprocess is killed.

    Returns:
        ``step_seconds`` (each optimizer step, on_step_begin to on_step_end),
        ``train_seconds`` (wall time of the steps including TRL's own work between them,
        evaluations excluded), ``evals`` (``step``, ``accuracy``, ``train_seconds`` so far,
        ``seconds`` of the evaluation, ``wall_seconds`` since the process started),
        ``setup_seconds`` and ``steps``.

    Raises:
        RuntimeError: The subprocess failed (its output's tail is in the message).
    """
    with tempfile.TemporaryDirectory(prefix="rlpipe-trl-") as tmp:
        spec_file, out_file = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        spec_file.write_text(json.dumps({"output_dir": f"{tmp}/trainer", **spec}))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), str(spec_file), str(out_file)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0 or not out_file.is_file():
            tail = (proc.stdout + proc.stderr)[-3000:]
            raise RuntimeError(f"TRL anchor failed (exit {proc.returncode}):\n{tail}")
        return json.loads(out_file.read_text())


def math_verify(
    prompts: list[str], completions: list[str], answer: list[str], **_: Any
) -> list[float]:
    """rlpipe's ``math_verify`` reward as a TRL reward function (``answer`` column)."""
    from rl_core.rewards.reasoning import math_verify_reward

    scores = math_verify_reward(prompts=prompts, completions=completions, answers=answer)
    return [float(s) for s in scores]


def arithmetic_dataset(cfg: Any, tokenizer: Any, steps: int) -> Any:
    """The prompts rlpipe's run trains on, batch after batch, as a ``datasets.Dataset``.

    Rows (``prompt``, ``answer``) are the first ``steps`` batches of the run's
    :class:`~rl_core.data.PromptSampler` (same seed), in order, so that an unshuffled
    trainer sees the same prompts at each step. Prompts are rendered exactly as rlpipe
    renders them (template, chat template if any).
    """
    from datasets import Dataset

    from rl_core.data import PromptSampler
    from rl_core.llm.prompting import load_task_samples, prompt_text

    train, _ = load_task_samples(cfg.data)
    sampler = PromptSampler(len(train), cfg.data.prompts_per_batch, seed=cfg.run.seed)
    order = [i for _ in range(steps) for i in sampler.next_indices()]
    rows = [
        {"prompt": prompt_text(train[i], cfg.data, tokenizer), "answer": train[i].answer}
        for i in order
    ]
    return Dataset.from_list(rows)


def grpo_config(cfg: Any, output_dir: str, max_steps: int) -> Any:
    """A ``GRPOConfig`` doing what the rlpipe config does: one optimizer step per batch.

    The batch is ``data.prompts_per_batch x algorithm.group_size`` completions, processed in
    micro-batches of ``actor.micro_batch_size`` (gradient accumulation), generated once per
    step.

    Raises:
        ValueError: The rlpipe config uses something this mapping does not cover.
    """
    from trl import GRPOConfig

    from rl_core.training.optim import adam_eps

    algo, actor, rollout = cfg.algorithm, cfg.actor, cfg.rollout
    batch = cfg.data.prompts_per_batch * algo.group_size
    micro = min(actor.micro_batch_size, batch)
    checks = [
        (algo.adv_type not in REWARD_SCALING, f"algorithm.adv_type={algo.adv_type}"),
        (algo.loss_agg_mode not in LOSS_TYPES, f"algorithm.loss_agg_mode={algo.loss_agg_mode}"),
        (algo.normalize_advantages, "algorithm.normalize_advantages=true"),
        (actor.num_minibatches != 1, f"actor.num_minibatches={actor.num_minibatches}"),
        (batch % micro != 0, f"actor.micro_batch_size={micro} (does not divide {batch})"),
        (actor.optimizer == "sgd", "actor.optimizer=sgd"),
    ]
    problems = [text for failed, text in checks if failed]
    if problems:
        raise ValueError(f"no TRL equivalent for: {', '.join(problems)}")
    schedule = actor.lr_schedule
    if schedule == "constant" and actor.warmup_iterations:
        schedule = "constant_with_warmup"
    return GRPOConfig(
        output_dir=output_dir,
        max_steps=max_steps,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=batch // micro,
        num_generations=algo.group_size,
        num_iterations=actor.update_epochs,
        max_completion_length=rollout.max_new_tokens,
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        top_k=rollout.top_k,
        learning_rate=actor.lr,
        lr_scheduler_type=schedule,
        warmup_steps=actor.warmup_iterations,
        optim="adamw_torch",
        adam_epsilon=adam_eps(actor),
        weight_decay=actor.weight_decay,
        max_grad_norm=actor.max_grad_norm or 0.0,
        beta=algo.kl_coef,
        epsilon=algo.clip_ratio_low,
        epsilon_high=algo.clip_ratio_high,
        entropy_coef=algo.entropy_coef,
        loss_type=LOSS_TYPES[algo.loss_agg_mode],
        scale_rewards=REWARD_SCALING[algo.adv_type],
        gradient_checkpointing=cfg.model.gradient_checkpointing,
        seed=cfg.run.seed,
        shuffle_dataset=False,  # the dataset is already in rlpipe's sampling order
        use_cpu=True,
        bf16=False,
        fp16=False,
        logging_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def _evaluator(cfg: Any, model: Any, tokenizer: Any) -> Any:
    """rlpipe's in-process held-out evaluation, on the TRL model being trained."""
    from kinds.reasoning.checkpoint_eval import CheckpointEvaluator

    class TrainingModelEvaluator(CheckpointEvaluator):
        """:class:`CheckpointEvaluator` over a live model instead of a checkpoint."""

        def __init__(self) -> None:
            self.prepare(cfg, model, tokenizer)

    return TrainingModelEvaluator()


def _anchor_callback(
    evaluator: Any, interval: int, target: float | None, before: bool, started: float
) -> Any:
    """A ``TrainerCallback`` that times steps and evaluates every ``interval`` steps.

    Args:
        evaluator: Held-out evaluation of the model being trained, or None.
        interval: Evaluate every this many optimizer steps (and after the last one).
        target: Stop training at the first evaluation with at least this accuracy.
        before: Evaluate before the first step too.
        started: ``perf_counter`` at process start (for ``wall_seconds``).
    """
    import torch
    from transformers import TrainerCallback

    class AnchorCallback(TrainerCallback):
        def __init__(self) -> None:
            self.step_seconds: list[float] = []
            self.train_seconds = 0.0
            self.evals: list[dict[str, float]] = []
            self._begin = self._mark = 0.0

        def _evaluate(self, step: int) -> float:
            rng = torch.get_rng_state()  # evaluation seeds torch; training's RNG stays put
            model = evaluator.model
            was_training = model.training
            model.eval()
            metrics, _ = evaluator.evaluate(step)
            model.train(was_training)
            torch.set_rng_state(rng)
            accuracy = metrics["eval/accuracy"]
            self.evals.append(
                {
                    "step": step,
                    "accuracy": accuracy,
                    "train_seconds": self.train_seconds,
                    "seconds": metrics["seconds"],
                    "wall_seconds": time.perf_counter() - started,
                }
            )
            return accuracy

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if evaluator is not None and before:
                if target is not None and self._evaluate(0) >= target:
                    control.should_training_stop = True

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._begin = time.perf_counter()
            if not self.step_seconds:
                self._mark = self._begin

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            now = time.perf_counter()
            self.step_seconds.append(now - self._begin)
            self.train_seconds += now - self._mark
            self._mark = now
            step, last = state.global_step, state.global_step >= state.max_steps
            due = interval > 0 and step % interval == 0
            if evaluator is not None and (due or last):
                accuracy = self._evaluate(step)
                if target is not None and accuracy >= target:
                    control.should_training_stop = True
                self._mark = time.perf_counter()  # the evaluation is not training time

    return AnchorCallback()


def main(spec_path: str, out_path: str) -> None:
    """Subprocess entry: run the spec'd TRL training and write the result as JSON."""
    started = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    from infra.cluster.runtime_env import limit_threads

    limit_threads()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from rl_core.config import load_config

    spec = json.loads(Path(spec_path).read_text())
    cfg = load_config(spec["preset"], spec["overrides"])
    path = cfg.model.model_path
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        path,
        local_files_only=True,
        dtype=torch.float32,
        attn_implementation=cfg.model.attn_implementation,
    )
    evaluator = _evaluator(cfg, model, tokenizer) if spec.get("evaluate") else None
    interval = spec.get("eval_interval", cfg.run.eval_interval)
    before = cfg.eval.before_training
    callback = _anchor_callback(evaluator, interval, spec.get("target"), before, started)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[math_verify],
        args=grpo_config(cfg, spec["output_dir"], spec["max_steps"]),
        train_dataset=arithmetic_dataset(cfg, tokenizer, spec["max_steps"]),
        processing_class=tokenizer,
        callbacks=[callback],
    )
    setup = time.perf_counter() - started
    trainer.train()
    result = {
        "step_seconds": callback.step_seconds,
        "train_seconds": callback.train_seconds,
        "evals": callback.evals,
        "setup_seconds": setup,
        "steps": len(callback.step_seconds),
    }
    Path(out_path).write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
