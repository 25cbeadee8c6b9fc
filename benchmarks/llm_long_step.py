"""Trainer throughput at reasoning lengths: packed against padded, beside TRL's trainer.

One batch of ``--rows`` responses whose lengths spread 16x (32-512 tokens by default) after
prompts of 16-64 tokens, on a small Qwen2 with random weights (built locally: nothing is
downloaded). On that same batch and the same initial weights, each side runs the trainer's
two passes: the log-prob pass (the advantage step's) and one update (GRPO loss, backward,
clipping, AdamW step):

* padded: micro-batches of ``--micro-batch`` rows, each padded to the batch's longest
  prompt and response (the layout before packing, and TRL's);
* packed: rlpipe's default path, micro-batches filled up to ``--max-tokens`` real tokens
  and computed as one sequence each (``actor.packing``, ``actor.max_tokens_per_micro_batch``);
* TRL: ``GRPOTrainer``'s own log-prob pass and loss on the same rows in micro-batches of
  ``--micro-batch`` (see ``_trl_step.py``); skipped when trl is not installed
  (``bash scripts/setup_bench.sh`` installs it).

Throughput counts real tokens (prompt + response) per second. Prints medians of
``--repeats`` steps after a warm-up one, with [min-max], and the ratios: packed / padded
(goal >= 1.5x) and rlpipe's packed step / TRL's step (goal <= 1.2x).

Usage: ``python benchmarks/llm_long_step.py [--rows 32] [--micro-batch 8]
[--max-tokens 4096] [--repeats 3] [--no-trl]``
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
from pathlib import Path

import _runs  # noqa: F401 - sets up the path and env first
import torch
from _spread import spread
from _step_long_batch import long_batch
from _step_model import build_model_dir, count_parameters
from _trainer_step import timed_steps
from _trl_anchor import SETUP_HINT, trl_available
from transformers import AutoModelForCausalLM, AutoTokenizer

from infra.cluster.runtime_env import limit_threads
from rl_core.config import load_config
from rl_core.training.micro_batches import MicroBatching

#: A small Qwen2 for the CPU (about 4M parameters; the linear layers dominate the work).
SMALL = {
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 704,
    "vocab_size": 4096,
}
GOALS = "goals: packed >= 1.5x padded (tokens/s); rlpipe packed step <= 1.2x TRL's step"


def grpo_algorithm() -> object:
    """The ``grpo_arith`` preset's algorithm section: token-mean GRPO, no KL."""
    cfg = load_config("grpo_arith", ["algorithm.kl_coef=0.0", "algorithm.entropy_coef=0.0"])
    return cfg.algorithm


def run_rlpipe(model, tokenizer, batch, batching, repeats) -> list[dict[str, float]]:
    """``repeats`` timed trainer steps after a warm-up, on a copy of ``model``."""
    return timed_steps(model, tokenizer, batch, batching, grpo_algorithm(), repeats)


def run_trl(model, tokenizer, batch, micro, repeats) -> list[dict[str, float]] | None:
    """The same with TRL's trainer (None without trl)."""
    if not trl_available():
        print(f"TRL column skipped: trl is not installed ({SETUP_HINT})")
        return None
    from _trl_step import build_trl_trainer, trl_step

    rows, width = batch["response_ids"].shape
    trainer = build_trl_trainer(copy.deepcopy(model), tokenizer, rows, micro, width)
    return [trl_step(trainer, batch, micro) for _ in range(repeats + 1)][1:]


def report(args, long, params, results) -> None:
    """The table: tokens/s of each pass, step seconds, ratios."""
    real = long.real_tokens
    print(
        f"\ntrainer passes at reasoning lengths, Qwen2 {params / 1e6:.1f}M parameters "
        f"(random weights), float32 on the CPU, one thread; {long.describe()}; "
        f"micro-batches of {args.micro_batch} rows (padded, TRL) or up to "
        f"{args.max_tokens} tokens (packed); medians of {args.repeats} steps [min-max]"
    )
    names = [n for n in ("padded", "packed", "TRL") if results.get(n)]
    print(f"{'':22}" + "".join(f"{n:>24}" for n in names))
    for label, key in (("log-prob tokens/s", "logprob_s"), ("update tokens/s", "update_s")):
        cells = [spread([real / r[key] for r in results[n]], "{:.0f}") for n in names]
        print(f"{label:22}" + "".join(f"{c:>24}" for c in cells))
    cells = [spread([r["step_s"] for r in results[n]], "{:.2f}") for n in names]
    print(f"{'step seconds':22}" + "".join(f"{c:>24}" for c in cells))

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    for key, label in (("logprob_s", "log-prob"), ("update_s", "update"), ("step_s", "step")):
        speedup = median("padded", key) / median("packed", key)
        print(f"packed / padded, {label} tokens/s: {speedup:.2f}x")
    if results.get("TRL"):
        for name in ("packed", "padded"):
            ratio = median(name, "step_s") / median("TRL", "step_s")
            print(f"rlpipe {name} step / TRL step (seconds): {ratio:.2f}x")
    print(GOALS)


def main() -> None:
    """Build the model and the batch, run each side, print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32, help="responses in the batch")
    parser.add_argument("--prompt", type=int, nargs=2, default=(16, 64), help="prompt lengths")
    parser.add_argument("--response", type=int, nargs=2, default=(32, 512), help="lengths")
    parser.add_argument("--micro-batch", type=int, default=8, help="rows per padded pass")
    parser.add_argument("--max-tokens", type=int, default=4096, help="tokens per packed pass")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per side")
    parser.add_argument("--no-trl", action="store_true", help="skip the TRL column")
    args = parser.parse_args()
    limit_threads()
    device = torch.device("cpu")
    with tempfile.TemporaryDirectory(prefix="rlpipe-long-step-") as tmp:
        width = args.prompt[1] + args.response[1] + 8
        model_dir = build_model_dir(Path(tmp) / "model", SMALL, width, device)
        model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa")
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
    long = long_batch(
        args.rows, tuple(args.prompt), tuple(args.response), 260, tokenizer.pad_token_id
    )
    batch = long.tensors
    results = {
        "padded": run_rlpipe(
            model, tokenizer, batch, MicroBatching(rows=args.micro_batch, trim=False), args.repeats
        ),
        "packed": run_rlpipe(
            model,
            tokenizer,
            batch,
            MicroBatching(rows=args.micro_batch, max_tokens=args.max_tokens, packed=True),
            args.repeats,
        ),
    }
    if not args.no_trl:
        results["TRL"] = run_trl(model, tokenizer, batch, args.micro_batch, args.repeats)
    report(args, long, count_parameters(model), results)


if __name__ == "__main__":
    main()
