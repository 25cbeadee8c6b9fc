"""Evaluate a checkpoint: ``python flows/evaluate.py --run-name NAME [--episodes N]``.

Loads the latest committed checkpoint of a run (or ``--step``) and logs ``eval/*`` to MLflow
as a child run of the training run. Embodied runs: N episodes with deterministic actions on
the run's fixed evaluation seeds. Reasoning runs: greedy accuracy, pass@k and sample rows on
the run's held-out prompts, in this process.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from infra.checkpoint.location import run_store_uri
from infra.checkpoint.reader import locate_checkpoint, read_config, read_policy_weights
from infra.checkpoint.store import CheckpointError, open_store, step_dir_name
from infra.cluster.runtime_env import apply_base_env
from infra.driver.session import resolve_tracking_uri
from infra.extensions import ExtensionError, load_extension_modules
from infra.tracking import MlflowTracker
from infra.tracking.mlflow_tracker import parent_experiment_name
from rl_core.config import ConfigError, RLPipeConfig, validate_config
from rl_core.config.naming import experiment_name

logger = logging.getLogger("rlpipe.evaluate")


@task(name="load_checkpoint", cache_policy=NO_CACHE, persist_result=False)
def load_checkpoint(store_uri: str, step: int | None, trust: bool = False) -> dict[str, Any]:
    """Read config, weights and manifest of a committed checkpoint.

    ``trusted`` in the result: the caller trusts the checkpoint (``--trust-checkpoint``).
    """
    ref = locate_checkpoint(store_uri, step, trust)
    return {
        "config": read_config(ref),
        "weights": {k: v.numpy() for k, v in read_policy_weights(ref).items()},
        "manifest": ref.manifest,
        "step": ref.step,
        "trusted": ref.trusted,
    }


@task(name="evaluate_checkpoint", cache_policy=NO_CACHE, persist_result=False)
def evaluate_checkpoint(
    store_uri: str, ckpt: dict[str, Any], episodes: int, cfg: RLPipeConfig
) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """Evaluate the checkpoint the way its model category does (metrics, rows, headline)."""
    from infra.driver.runtimes import runtime_class

    return runtime_class(cfg).evaluate_checkpoint(store_uri, ckpt, episodes)


@flow(name="evaluate", flow_run_name="evaluate-{run_name}", persist_result=False)
def evaluate(
    run_name: str,
    output_dir: str = "outputs",
    episodes: int = 10,
    step: int | None = None,
    checkpoint_uri: str | None = None,
    trust_checkpoint: bool = False,
) -> dict[str, Any]:
    """Evaluate a run's checkpoint and log ``eval/*`` metrics to a child MLflow run.

    Args:
        run_name: Training run name (validated: one folder name, see ``run.name``).
        output_dir: Output directory the run wrote to.
        episodes: Number of episodes (embodied runs).
        step: Checkpoint step (default: the latest committed one).
        checkpoint_uri: The run's ``run.checkpoint_uri`` (e.g. ``s3://bucket/ckpts``);
            None: its checkpoints are under ``output_dir``.
        trust_checkpoint: Trust the checkpoint's source: its config may ask for the model's
            own code (``model.trust_remote_code``).

    Returns:
        The checkpoint's step and ``eval/*`` metrics; ``{"run_name", "skipped"}`` when the
        run has no committed checkpoint yet and no ``step`` was asked for (a schedule that
        starts before the run's first checkpoint completes with that message).

    Raises:
        CheckpointError: Invalid run name, the asked step missing, a checkpoint that is not
            usable, or one that is not trusted.
    """
    store_uri = run_store_uri(output_dir, run_name, checkpoint_uri)  # validates run_name
    if step is None and open_store(store_uri).latest() is None:
        skipped = (
            f"nothing to evaluate yet: run {run_name!r} has no committed checkpoint in {store_uri}"
        )
        logger.warning("%s", skipped)
        return {"run_name": run_name, "skipped": skipped}
    apply_base_env()
    load_extension_modules()
    ckpt = load_checkpoint(store_uri, step, trust_checkpoint)
    cfg = validate_config(ckpt["config"], source=f"{store_uri} config.json")
    metrics, rows, headline = evaluate_checkpoint(store_uri, ckpt, episodes, cfg)
    summary: dict[str, Any] = {"run_name": run_name, "step": ckpt["step"], **metrics}
    if cfg.tracking.enabled:
        parent = ckpt["manifest"].get("mlflow_run_id")
        uri = resolve_tracking_uri(cfg.tracking.tracking_uri, Path(output_dir).resolve())
        tracker = MlflowTracker(
            uri,
            parent_experiment_name(uri, parent) or experiment_name(cfg),
            run_name=f"evaluate-{run_name}-{step_dir_name(ckpt['step'])}",
            tags={
                "mlflow.parentRunId": parent or "",
                "rlpipe.run_name": run_name,
                "rlpipe.kind": "evaluation",
            },
        )
        tracker.log_metrics(metrics, step=ckpt["step"], synchronous=True)
        if rows:
            tracker.log_table(rows, f"eval/samples_{ckpt['step']:06d}.json")
        tracker.finish()
        summary["mlflow_run_id"] = tracker.run_id
    logger.info("evaluated %s step %d: %s", run_name, ckpt["step"], headline)
    return summary


def main(argv: list[str] | None = None, prog: str = "python flows/evaluate.py") -> int:
    """CLI entry point."""
    from flows.cli import add_trust_checkpoint_flag, prefect_api, print_error, run_name_arg

    parser = argparse.ArgumentParser(
        prog=prog,
        description="Evaluate a run's checkpoint: loads the latest committed checkpoint (or "
        "--step) and logs eval/* to MLflow as a child run of the training run. Embodied runs: "
        "--episodes episodes with deterministic actions on the run's fixed evaluation seeds; "
        "reasoning runs: greedy accuracy, pass@k and sample rows on the run's held-out "
        "prompts.",
    )
    parser.add_argument(
        "--run-name", required=True, type=run_name_arg, help="the run to evaluate (its run.name)"
    )
    parser.add_argument(
        "--output-dir",
        default="outputs",
        help="the run's run.output_dir, where its checkpoints are (default: %(default)s)",
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=10,
        help="episodes to play (embodied runs; default: %(default)s)",
    )
    parser.add_argument(
        "--step",
        type=int,
        default=None,
        help="evaluate the checkpoint of this step (default: the latest committed one)",
    )
    parser.add_argument(
        "--checkpoint-uri",
        default=None,
        help="the run's run.checkpoint_uri (a path or s3://bucket/prefix), if it set one",
    )
    add_trust_checkpoint_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        with prefect_api(Path(args.output_dir)):
            summary = evaluate(
                args.run_name,
                args.output_dir,
                args.episodes,
                args.step,
                args.checkpoint_uri,
                args.trust_checkpoint,
            )
    except (CheckpointError, ConfigError, ExtensionError) as exc:
        print_error(exc)
        return 2
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
