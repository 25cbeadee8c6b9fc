"""LLM step benchmark: rollout and training tokens/s, time per step, orchestration share.

Runs GRPO on the tiny model twice with the same workers: a bare loop over the
``ReasoningRuntime`` (no Prefect, no MLflow; rewards scored in-process) and the real train
flow (iteration flows, tasks, MLflow). The bare loop runs once per trainer backend: FSDP2
and megatron-core (tensor parallel across all trainer ranks), the backend column. Then, as
the single-process anchor, TRL's ``GRPOTrainer`` on the same model, prompts, reward and
hyperparameters (in a subprocess, one thread; see ``_trl_anchor.py``). Prints medians side
by side and the ratios.

Finally, full fine-tuning against LoRA adapters (``actor.lora``), both with a separate
rollout worker so the weight sync goes through the object store: trainable parameters,
optimizer-state bytes, checkpoint bytes, weight-sync bytes and seconds, side by side.

Usage: ``python benchmarks/llm_step.py [--iterations 8] [--workers 1] [--no-megatron]
[--no-lora]``
(trainer ranks; with the default placement each rank also holds the rollout engine: the
hybrid engine; megatron splits every layer over the ``--workers`` ranks).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _runs import flow_run_metrics  # noqa: I001 - sets up the path and env first
from _trl_anchor import SETUP_HINT, run_trl, trl_available

from flows.train import prepare_model
from infra.cluster import ray_cluster
from infra.driver.runtimes import run_iteration_in_process
from kinds.reasoning.runtime import ReasoningRuntime
from rl_core.config import load_config

STEPS = ("weight_sync", "rollout", "reward", "advantage", "update")
PRESET = "ppo_cartpole"  # the base the overrides below turn into a GRPO run
TARGET = 2.0  # train flow s/step <= TARGET x TRL s/step


def overrides(model_dir: Path, iterations: int, workers: int) -> list[str]:
    return [
        "model.model_type=hf_causal_lm",
        f"model.model_path={model_dir}",
        "model.tiny_init=true",
        "algorithm.adv_type=grpo",
        "algorithm.group_size=8",
        "algorithm.normalize_advantages=false",
        "reward.reward_type=math_verify",
        "data.prompts_per_batch=16",
        "rollout.max_new_tokens=8",
        f"actor.num_workers={workers}",
        "actor.num_minibatches=1",
        "actor.update_epochs=1",
        "actor.micro_batch_size=32",
        f"run.max_iterations={iterations}",
        "run.eval_interval=0",
        "run.checkpoint_interval=0",
    ]


def megatron_overrides(workers: int) -> list[str]:
    """The same run on the megatron trainer, tensor parallel over every trainer rank."""
    return ["actor.backend=megatron", f"actor.megatron.tensor_model_parallel_size={workers}"]


def bare(ovr: list[str], iterations: int, footprint: Path | None = None) -> dict[str, Any]:
    """Step seconds and tokens/s per iteration of the bare loop; with ``footprint`` (a
    folder for one checkpoint) also what training holds and moves (see :func:`measure`)."""
    cfg = prepare_model(load_config(overrides=[*ovr, "tracking.enabled=false"]))
    runtime = ReasoningRuntime(cfg)
    names = (*STEPS, "iteration", "tokens_per_s", "train_tokens_per_s", "sync_bytes")
    series: dict[str, Any] = {k: [] for k in names}
    try:
        for it in range(iterations):
            start = time.perf_counter()
            t = run_iteration_in_process(runtime, it)  # scoring included in the reward
            series["iteration"].append(time.perf_counter() - start)
            for step in STEPS:
                series[step].append(t[step].seconds)
            series["tokens_per_s"].append(t["rollout"].metrics["rollout/tokens_per_second"])
            series["train_tokens_per_s"].append(t["update"].metrics["train/tokens_per_second"])
            series["sync_bytes"].append(t["weight_sync"].metrics["rollout/weight_sync_bytes"])
        if footprint is not None:
            series["footprint"] = measure(runtime, footprint, iterations)
    finally:
        runtime.shutdown()
        ray_cluster.shutdown()
    return series


def measure(runtime: ReasoningRuntime, folder: Path, step: int) -> dict[str, float]:
    """Trainable parameters, optimizer-state bytes (summed over the trainer ranks) and the
    bytes of one checkpoint written to ``folder``."""
    ranks = runtime.actor.footprint()
    runtime.save_checkpoint(str(folder), step)
    written = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return {
        "trainable_parameters": float(sum(r["trainable_parameters"] for r in ranks)),
        "optimizer_state_bytes": float(sum(r["optimizer_state_bytes"] for r in ranks)),
        "checkpoint_bytes": float(written),
    }


#: LoRA on every linear layer of the tiny model (the ``grpo_arith_lora`` preset's settings).
LORA = ["actor.lora.rank=8", "actor.lora.alpha=16"]


def print_lora_table(full: dict[str, Any], lora: dict[str, Any]) -> None:
    """Full fine-tuning against LoRA, side by side (separate rollout workers: the weight
    sync goes through the object store)."""
    print("\nfull fine-tuning against LoRA (rank 8, every linear layer), separate rollout worker:")
    print(f"{'':>26} {'full':>12} {'LoRA':>12} {'LoRA / full':>12}")

    def row(label: str, a: float, b: float, fmt: str) -> None:
        print(f"{label:>26} {a:>12{fmt}} {b:>12{fmt}} {b / a:>11.3f}x")

    for key, label in (
        ("trainable_parameters", "trainable parameters"),
        ("optimizer_state_bytes", "optimizer state (bytes)"),
        ("checkpoint_bytes", "checkpoint (bytes)"),
    ):
        row(label, full["footprint"][key], lora["footprint"][key], ",.0f")
    row("weight sync (bytes)", med(full["sync_bytes"]), med(lora["sync_bytes"]), ",.0f")
    for step in ("weight_sync", "update"):
        row(f"{step} (s)", med(full[step]), med(lora[step]), ".4f")
    row("iteration (s)", med(full["iteration"]), med(lora["iteration"]), ".3f")


def trl_steps(ovr: list[str], iterations: int) -> list[float] | None:
    """Seconds per ``GRPOTrainer`` step on the same run; None if trl is missing or failed."""
    if not trl_available():
        return None
    spec = {"preset": PRESET, "overrides": ovr, "max_steps": iterations}
    try:
        return run_trl(spec)["step_seconds"]
    except RuntimeError as exc:  # rlpipe's own figures are still printed
        print(exc)
        return None


def med(values: list[float]) -> float:
    return statistics.median(values[1:] if len(values) > 2 else values)  # skip the warm-up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--no-megatron", action="store_true", help="skip the megatron backend's bare loop"
    )
    parser.add_argument(
        "--no-lora", action="store_true", help="skip the full fine-tuning vs LoRA table"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ovr = overrides(Path(tmp) / "tiny", args.iterations, args.workers)
        base = bare(ovr, args.iterations)
        footprints = None
        if not args.no_lora:
            separate = [*ovr, "cluster.hybrid_engine=off"]
            footprints = (
                bare(separate, args.iterations, Path(tmp) / "ckpt-full"),
                bare([*separate, *LORA], args.iterations, Path(tmp) / "ckpt-lora"),
            )
        mega = None
        if not args.no_megatron:
            mega = bare([*ovr, *megatron_overrides(args.workers)], args.iterations)
        keys = tuple(f"time/{s}" for s in STEPS) + (
            "time/iteration",
            "time/orchestration",
            "rollout/tokens_per_second",
            "train/tokens_per_second",
        )
        flow = flow_run_metrics(
            PRESET, [*ovr, f"run.output_dir={tmp}/out"], Path(tmp) / "out", keys
        )
        trl = trl_steps(ovr, args.iterations)  # the same model directory, after both runs
    series = flow["series"]
    print(f"GRPO, tiny model, 16 prompts x 8 responses, {args.workers} trainer rank(s), medians:")
    print(f"{'':>14} {'bare FSDP2':>10} {'bare megatron':>13} {'train flow':>11} {'TRL':>8}")

    def mega_cell(key: str) -> str:
        return f"{med(mega[key]):>12.3f}s" if mega else f"{'-':>13}"

    for step in STEPS:
        print(
            f"{step:>14} {med(base[step]):>9.3f}s {mega_cell(step)} "
            f"{med(series[f'time/{step}']):>10.3f}s {'-':>8}"
        )
    bare_it, flow_it = med(base["iteration"]), med(series["time/iteration"])
    trl_it = f"{med(trl):.3f}s" if trl else "-"
    print(
        f"{'iteration':>14} {bare_it:>9.3f}s {mega_cell('iteration')} {flow_it:>10.3f}s {trl_it:>8}"
    )
    print(f"ratio train flow / bare loop {flow_it / bare_it:.2f}x (train flow: FSDP2)")
    if mega:
        fsdp_tps, mega_tps = med(base["train_tokens_per_s"]), med(mega["train_tokens_per_s"])
        print(
            f"update tokens/s: FSDP2 {fsdp_tps:.0f}, megatron (tensor parallel "
            f"{args.workers}) {mega_tps:.0f}; ratio megatron / FSDP2 {mega_tps / fsdp_tps:.2f}x"
        )
    if trl:
        print(
            f"TRL GRPOTrainer (same model, prompts, reward, batch, lr; one process, one "
            f"thread): {med(trl):.3f} s/step"
        )
        print(
            f"ratio train flow / TRL {flow_it / med(trl):.2f}x (target <= {TARGET:.1f}x); "
            f"bare loop / TRL {bare_it / med(trl):.2f}x"
        )
    elif not trl_available():
        print(f"TRL anchor not run: {SETUP_HINT}")
    orch = med(series["time/orchestration"])
    print(
        f"orchestration {orch * 1000:.0f} ms per iteration ({orch / flow_it:.1%} of it; "
        "fan-out scoring tasks, when used, count as orchestration)"
    )
    print(
        f"rollout tokens/s: bare {med(base['tokens_per_s']):.0f}, "
        f"flow {med(series['rollout/tokens_per_second']):.0f}; training tokens/s: bare "
        f"{med(base['train_tokens_per_s']):.0f}, flow {med(series['train/tokens_per_second']):.0f}"
    )
    if footprints:
        print_lora_table(*footprints)


if __name__ == "__main__":
    main()
