"""One GRPO step at a realistic size on one GPU: bare loop against the train flow.

The model is Qwen2-0.5B-shaped (hidden 896, 24 layers, 14 heads, 2 key/value heads, MLP
4864, vocabulary 151936) with random weights, built from a ``transformers`` config and saved
with the project's byte-level tokenizer (nothing is downloaded). The step: ``--prompts``
arithmetic prompts x ``--group`` sampled responses of ``--new-tokens`` tokens (a random
model rarely stops early), scoring, the trainer's log-probs, GRPO advantages, one update.

* bare loop: a plain Hugging Face model and AdamW in this process with the project's GRPO
  advantages and update (``rl_core``); no Ray, Prefect or MLflow (``_step_bare.py``);
* train flow: the same shape through the train flow (Ray workers, iteration flows, MLflow)
  for ``--iterations`` iterations, read from its ``time/*`` and throughput metrics.

Prints, side by side with the ratio: seconds per step, generation tokens/s, update tokens/s,
update MFU against the card's bf16 dense peak (FLOPs = 6 x parameters x update tokens), and
the flow's orchestration share of an iteration. Medians after one warm-up, [min-max].

Then the trainer's passes at reasoning lengths (``--long-rows`` responses of
``--long-response`` tokens, spread 16x, after ``--long-prompt`` tokens of prompt): the
log-prob pass and one update, padded (micro-batches of ``--micro-batch`` rows at the
batch's width) against packed (micro-batches up to ``--max-tokens`` real tokens as one
sequence each): real tokens/s of each, the ratio, and the update MFU of each
(``_trainer_step.py``; ``--no-long`` skips it).

Usage: ``python benchmarks/gpu_step.py [--prompts 64] [--group 8] [--new-tokens 512]
[--micro-batch 16] [--repeats 3] [--iterations 5] [--no-flow] [--no-long] [--tiny]``. Without CUDA it
runs ``--tiny`` (2 layers; 4 prompts x 4 responses x 16 tokens unless given; float32 on
the CPU) so the script keeps working; those figures are no GPU result.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import torch
from _runs import flow_run_metrics  # sets up the path and env first
from _spread import spread
from _step_bare import BareStep
from _step_long_batch import long_batch
from _step_model import QWEN2_05B, TINY, build_model_dir, count_parameters, model_dtype, peak_tflops
from _trainer_step import timed_steps

from infra.cluster.runtime_env import limit_threads
from rl_core.config import ConfigError, load_config

FLOW_KEYS = (
    "time/iteration",
    "time/orchestration",
    "time/rollout",
    "time/update",
    "rollout/tokens_per_second",
    "train/tokens_per_second",
)
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # also in the flow's workers
TARGETS = "targets: orchestration <= 3% of an iteration, flow <= 1.05x bare, update MFU >= 40%"


def shape_overrides(model_dir: Path, args: argparse.Namespace, device: torch.device) -> list[str]:
    """The run's shape as overrides of the ``grpo_arith`` preset (no SFT warm start)."""
    return [
        "run.warm_start=null",
        f"model.model_path={model_dir}",
        f"model.dtype={'bfloat16' if device.type == 'cuda' else 'float32'}",
        f"data.prompts_per_batch={args.prompts}",
        f"algorithm.group_size={args.group}",
        f"rollout.max_new_tokens={args.new_tokens}",
        f"actor.micro_batch_size={args.micro_batch}",
        "actor.num_minibatches=1",
        "actor.update_epochs=1",
    ]


def run_bare(model_dir: Path, ovr: list[str], device: torch.device, repeats: int) -> list[dict]:
    """``repeats`` timed steps after a warm-up one; the model is freed afterwards."""
    bare = BareStep(model_dir, load_config("grpo_arith", ovr), device, model_dtype(device))
    try:
        bare.step(0)  # warm-up: CUDA kernels, allocator
        return [bare.step(i + 1) for i in range(repeats)]
    finally:
        bare.close()


def run_flow(ovr: list[str], device: torch.device, iterations: int, out: Path) -> dict | str:
    """The train flow's per-iteration series (its first iteration dropped), or why not."""
    extra = [
        f"run.max_iterations={iterations}",
        "run.eval_interval=0",
        "run.checkpoint_interval=0",
        "eval.before_training=false",
        "run.name=gpu-step",
        f"run.output_dir={out}",
    ]
    try:  # a checkout whose config has no cluster.device places GPUs its own way
        load_config("grpo_arith", [f"cluster.device={device.type}"])
        extra.append(f"cluster.device={device.type}")
    except ConfigError:
        pass
    try:
        run = flow_run_metrics("grpo_arith", [*ovr, *extra], out, FLOW_KEYS)
    except Exception as exc:  # noqa: BLE001 - the bare figures are still printed
        return f"train flow failed: {type(exc).__name__}: {str(exc)[:400]}"
    return {k: v[1:] if len(v) > 1 else v for k, v in run["series"].items()}


def report(args, device, params, bare: list[dict], flow: dict | str) -> None:
    """Print the table."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (no GPU result)"
    peak = args.peak_tflops or (peak_tflops(name) if device.type == "cuda" else None)
    print(
        f"\nGRPO step, {'tiny' if args.tiny else 'Qwen2-0.5B'} shape ({params / 1e6:.1f}M "
        f"parameters, random weights), {args.prompts} prompts x {args.group} responses, "
        f"{args.new_tokens} new tokens, {model_dtype(device)}, on {name}"
    )
    counted = len(flow["time/iteration"]) if isinstance(flow, dict) else 0
    print(f"medians after a warm-up [min-max] of {len(bare)} bare steps, {counted} flow iterations")
    col = lambda key: [r[key] for r in bare]  # noqa: E731
    gen = [r["response_tokens"] / r["generate_s"] for r in bare]
    upd = [r["update_tokens"] / r["update_s"] for r in bare]
    rows = [("step seconds", col("step_s"), "time/iteration", "{:.2f}")]
    rows += [("generation tokens/s", gen, "rollout/tokens_per_second", "{:.0f}")]
    rows += [("update tokens/s", upd, "train/tokens_per_second", "{:.0f}")]
    print(f"{'':22} {'bare loop':>24} {'train flow':>24} {'flow/bare':>10}")
    for label, values, key, fmt in rows:
        theirs = flow[key] if isinstance(flow, dict) and flow.get(key) else None
        ratio = statistics.median(theirs) / statistics.median(values) if theirs else None
        print(
            f"{label:22} {spread(values, fmt):>24} {spread(theirs, fmt) if theirs else '-':>24} "
            f"{f'{ratio:.2f}x' if ratio else '-':>10}"
        )
    if peak:
        mfu = lambda tps: [6 * params * t / peak / 1e12 * 100 for t in tps]  # noqa: E731
        theirs = flow.get("train/tokens_per_second") if isinstance(flow, dict) else None
        print(
            f"{'update MFU %':22} {spread(mfu(upd), '{:.1f}'):>24} "
            f"{spread(mfu(theirs), '{:.1f}') if theirs else '-':>24}"
        )
        print(
            f"MFU = 6 x {params / 1e6:.1f}M parameters x update tokens (prompt + response, "
            f"every epoch) / update seconds / {peak:.0f} TFLOPS (bf16 dense peak of the card; "
            "attention-score FLOPs not counted)"
        )
    else:
        print("update MFU: no bf16 peak known for this device (--peak-tflops sets one)")
    print(f"bare loop: trainer log-probs {spread(col('logprob_s'))} s per step (flow: advantage)")
    if isinstance(flow, str):
        print(flow)
    elif flow.get("time/orchestration"):
        orch, it = flow["time/orchestration"], flow["time/iteration"]
        share = [100 * o / i for o, i in zip(orch, it, strict=True)]
        print(
            f"train flow orchestration {spread([1000 * o for o in orch], '{:.0f}')} ms per "
            f"iteration = {spread(share, '{:.2f}')} % of it"
        )
    print(TARGETS)


def run_long(model_dir: Path, args: argparse.Namespace, device: torch.device) -> dict:
    """Padded and packed trainer passes on one batch at reasoning lengths."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl_core.training.micro_batches import MicroBatching

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=model_dtype(device)).to(device)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    long = long_batch(
        args.long_rows,
        tuple(args.long_prompt),
        tuple(args.long_response),
        260,
        tokenizer.pad_token_id,
    )
    batch = {k: v.to(device) for k, v in long.tensors.items()}
    algo = load_config("grpo_arith", ["algorithm.kl_coef=0.0"]).algorithm
    sides = {
        "padded": MicroBatching(rows=args.micro_batch, trim=False),
        "packed": MicroBatching(rows=args.micro_batch, max_tokens=args.max_tokens, packed=True),
    }
    results = {"batch": long}
    for name, batching in sides.items():
        try:
            results[name] = timed_steps(model, tokenizer, batch, batching, algo, args.repeats)
        except torch.OutOfMemoryError as exc:
            results[name] = f"out of memory: {str(exc)[:200]}"
        if device.type == "cuda":
            results[f"{name}_peak_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
            torch.cuda.reset_peak_memory_stats(device)
    del model
    return results


def report_long(results: dict, params: int, peak: float | None, args) -> None:
    """Print the padded/packed table of :func:`run_long`."""
    long = results["batch"]
    real = long.real_tokens
    print(
        f"\ntrainer passes at reasoning lengths: {long.describe()}; padded micro-batches of "
        f"{args.micro_batch} rows, packed up to {args.max_tokens} tokens; medians [min-max]"
    )
    sides = [n for n in ("padded", "packed") if isinstance(results.get(n), list)]
    for name in ("padded", "packed"):
        if isinstance(results.get(name), str):
            print(f"{name}: {results[name]}")
    print(f"{'':22}" + "".join(f"{n:>24}" for n in sides))
    for label, key in (("log-prob tokens/s", "logprob_s"), ("update tokens/s", "update_s")):
        cells = [spread([real / r[key] for r in results[n]], "{:.0f}") for n in sides]
        print(f"{label:22}" + "".join(f"{c:>24}" for c in cells))
    if peak:
        cells = [
            spread(
                [6 * params * real / r["update_s"] / peak / 1e12 * 100 for r in results[n]],
                "{:.1f}",
            )
            for n in sides
        ]
        print(f"{'update MFU % (real)':22}" + "".join(f"{c:>24}" for c in cells))
    for name in sides:
        if f"{name}_peak_gib" in results:
            print(f"{name}: peak GPU memory {results[f'{name}_peak_gib']:.1f} GiB")
    if len(sides) == 2:
        for key, label in (("logprob_s", "log-prob"), ("update_s", "update")):
            ratio = statistics.median(r[key] for r in results["padded"]) / statistics.median(
                r[key] for r in results["packed"]
            )
            print(f"packed / padded, {label} tokens/s: {ratio:.2f}x (goal >= 1.5x)")


def main() -> None:
    """Build the model, run both, print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, help="prompts per step (64; --tiny 4)")
    parser.add_argument("--group", type=int, help="responses per prompt (8; --tiny 4)")
    parser.add_argument("--new-tokens", type=int, help="tokens per response (512; --tiny 16)")
    parser.add_argument("--micro-batch", type=int, default=16, help="sequences per backward")
    parser.add_argument("--repeats", type=int, default=3, help="timed bare steps")
    parser.add_argument("--iterations", type=int, default=5, help="train flow iterations")
    parser.add_argument("--no-flow", action="store_true", help="only the bare loop")
    parser.add_argument("--peak-tflops", type=float, help="the card's bf16 dense peak")
    parser.add_argument("--tiny", action="store_true", help="tiny shape (default without CUDA)")
    parser.add_argument("--no-long", action="store_true", help="skip packed vs padded")
    parser.add_argument("--long-rows", type=int, help="responses of that batch (64; --tiny 8)")
    parser.add_argument(
        "--long-prompt", type=int, nargs=2, help="prompt lengths (64 256; --tiny 8 32)"
    )
    parser.add_argument(
        "--long-response", type=int, nargs=2, help="response lengths (128 2048; --tiny 16 256)"
    )
    parser.add_argument("--max-tokens", type=int, help="tokens per packed pass (16384; 2048)")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        limit_threads()
        if not args.tiny:
            print("no CUDA: running the --tiny shape on the CPU")
        args.tiny = True
    sizes = (4, 4, 16, 8, (8, 32), (16, 256), 2048)
    if not args.tiny:
        sizes = (64, 8, 512, 64, (64, 256), (128, 2048), 16384)
    names = ("prompts", "group", "new_tokens", "long_rows", "long_prompt", "long_response")
    for key, default in zip((*names, "max_tokens"), sizes, strict=True):
        if getattr(args, key) is None:
            setattr(args, key, default)
    with tempfile.TemporaryDirectory(prefix="rlpipe-gpu-step-") as tmp:
        shape = TINY if args.tiny else QWEN2_05B
        positions = max(args.new_tokens + 512, args.long_prompt[1] + args.long_response[1] + 8)
        model_dir = build_model_dir(Path(tmp) / "model", shape, positions, device)
        ovr = shape_overrides(model_dir, args, device)
        bare = run_bare(model_dir, ovr, device, args.repeats)
        params = _parameters(model_dir)
        long = None if args.no_long else run_long(model_dir, args, device)
        flow = (
            "train flow not run (--no-flow)"
            if args.no_flow
            else run_flow(ovr, device, args.iterations, Path(tmp) / "out")
        )
    report(args, device, params, bare, flow)
    if long is not None:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
        peak = args.peak_tflops or (peak_tflops(name) if device.type == "cuda" else None)
        report_long(long, params, peak, args)


def _parameters(model_dir: Path) -> int:
    """Parameters of the saved model (tied embeddings once), without loading it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir))
    return count_parameters(model)


if __name__ == "__main__":
    main()
