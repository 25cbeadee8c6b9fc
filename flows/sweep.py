"""Sweeps: one preset over several seeds (and a grid of overrides), shown together.

    rlpipe sweep --config ppo_cartpole --seeds 0-4
    rlpipe sweep --config ppo_cartpole --seeds 0-2 --grid actor.lr=1e-3,3e-3 run.max_iterations=20

The ``sweep`` flow opens an MLflow parent run, starts the runs as train-CLI subprocesses,
or with ``--deployment flow/name`` as runs of that deployment (``--max-parallel`` at a time;
they report to the same Prefect API and nest under the parent in MLflow), then logs
mean ± std learning curves (``plots/sweep.png``) and a table of final figures (``sweep.md``)
to the parent run and as a Prefect artifact. Rerunning a
sweep reuses its parent run and resumes (or just summarizes) its runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

from mlflow.entities import RunStatus
from mlflow.tracking import MlflowClient
from prefect import flow
from prefect.artifacts import create_markdown_artifact

from flows.prefect_ui import artifact_key
from flows.sweep_children import (
    ChildLauncher,
    DeploymentLauncher,
    SubprocessLauncher,
    check_deployment,
    train_child,
)
from infra.checkpoint.location import run_store_uri
from infra.checkpoint.store import CheckpointError, open_store
from infra.driver.session import default_artifact_location, resolve_tracking_uri
from infra.tracking.secrets import redact_text
from infra.tracking.sweep_report import (
    ChildResult,
    child_curve,
    mean_std_curves,
    render_sweep_png,
    summary_markdown,
)
from rl_core.config import ConfigError, load_config
from rl_core.config.naming import experiment_name
from rl_core.config.sweep import SweepRun, expand_sweep, parse_grid, parse_seeds

logger = logging.getLogger("rlpipe.sweep")
SWEEP_TAG = "rlpipe.sweep"


def plan_sweep(
    preset: str,
    overrides: list[str],
    seeds: list[int],
    grid: list[tuple[str, list[str]]],
    name: str,
) -> tuple[Any, list[SweepRun]]:
    """The base config and every run, each run's config validated (raises ConfigError)."""
    base = load_config(preset, overrides)
    runs = expand_sweep(name, seeds, grid)
    for run in runs:
        load_config(preset, [*overrides, *run.overrides])
    return base, runs


def parent_run(client: MlflowClient, experiment: str, artifacts: str | None, name: str) -> str:
    """The sweep's MLflow parent run: the one an earlier attempt opened, or a new one."""
    found = client.get_experiment_by_name(experiment)
    experiment_id = (
        found.experiment_id
        if found is not None
        else client.create_experiment(experiment, artifact_location=artifacts)
    )
    earlier = client.search_runs(
        [experiment_id], filter_string=f"tags.`{SWEEP_TAG}` = '{name}'", max_results=1
    )
    if earlier:
        client.update_run(earlier[0].info.run_id, RunStatus.to_string(RunStatus.RUNNING))
        return earlier[0].info.run_id
    run = client.create_run(experiment_id, run_name=f"sweep-{name}", tags={SWEEP_TAG: name})
    return run.info.run_id


def child_result(
    client: MlflowClient, run: SweepRun, code: int, output_dir: str, checkpoint_uri: str | None
) -> ChildResult:
    """What a finished child left: its MLflow run (from its checkpoint) and curve."""
    try:
        manifest = open_store(run_store_uri(output_dir, run.name, checkpoint_uri)).latest()
    except CheckpointError as exc:
        logger.warning("%s: no readable checkpoint (%s)", run.name, exc)
        manifest = None
    run_id = (manifest or {}).get("mlflow_run_id")
    curve, hours, key = child_curve(client, run_id) if run_id else ((), None, None)
    return ChildResult(run.name, run.point, run.seed, run_id, code, curve, hours, key)


@flow(name="sweep", flow_run_name="sweep-{name}", log_prints=False)
def sweep(
    preset: str,
    seeds: list[int],
    name: str,
    overrides: list[str] | None = None,
    grid: list[tuple[str, list[str]]] | None = None,
    max_parallel: int = 1,
    deployment: str | None = None,
) -> dict[str, Any]:
    """Train ``preset`` once per seed and grid point and report them together.

    Args:
        preset: Preset name or YAML path.
        seeds: One run per seed (per grid point).
        name: The sweep's name (its runs are ``<name>[-<point>]-s<seed>``).
        overrides: ``section.field=value`` for every run.
        grid: Axes ``(section.field, values)``; their product gives the grid points.
        max_parallel: Runs at a time.
        deployment: ``flow/deployment`` to start each run as a run of that deployment
            (a worker runs it); ``None`` starts train-CLI subprocesses here.

    Returns:
        ``parent_run_id``, ``runs`` (name → exit code), ``failed`` (names), ``plot``.
    """
    overrides, grid = list(overrides or []), list(grid or [])
    base, runs = plan_sweep(preset, overrides, seeds, grid, name)
    output_dir = Path(base.run.output_dir).resolve()
    uri = resolve_tracking_uri(base.tracking.tracking_uri, output_dir)
    client = MlflowClient(uri)
    experiment = experiment_name(base)
    artifacts = base.tracking.artifact_location or default_artifact_location(uri, output_dir)
    parent = parent_run(client, experiment, artifacts, name)
    if "sweep.preset" not in client.get_run(parent).data.params:  # a rerun keeps the first's
        for key, value in {
            "sweep.preset": preset,
            "sweep.seeds": ",".join(map(str, seeds)),
            "sweep.grid": "; ".join(f"{k}={','.join(v)}" for k, v in grid) or "-",
            "sweep.overrides": " ".join(overrides) or "-",
        }.items():
            client.log_param(parent, key, value)
    log_dir = output_dir / f"sweep-{name}"
    log_dir.mkdir(parents=True, exist_ok=True)
    slots = threading.Semaphore(max(1, max_parallel))
    shared = [
        f"run.output_dir={output_dir}",
        f"tracking.parent_run_id={parent}",
        f"tracking.experiment_name={experiment}",
    ]
    if deployment and redact_text(uri) == uri:  # a worker's runs log where the parent is
        shared.append(f"tracking.tracking_uri={uri}")  # (a URI with a secret: its own env)
    launcher: ChildLauncher = (
        DeploymentLauncher(deployment, preset, tuple(overrides), name)
        if deployment
        else SubprocessLauncher(preset, tuple(overrides), log_dir)
    )
    futures = [train_child.submit(run, launcher, shared, slots) for run in runs]
    codes = [f.result() for f in futures]
    children = [
        child_result(client, run, code, str(output_dir), base.run.checkpoint_uri)
        for run, code in zip(runs, codes, strict=True)
    ]
    return report(client, parent, name, children)


def report(
    client: MlflowClient, parent: str, name: str, children: list[ChildResult]
) -> dict[str, Any]:
    """Log the plot and the table to the parent run and to Prefect; end the parent run."""
    score = next((c.score_key for c in children if c.score_key), "eval/return_mean")
    png = render_sweep_png(mean_std_curves(children), f"sweep {name}", score)
    markdown = summary_markdown(name, children, score)
    client.log_text(parent, markdown, "sweep.md")
    client.log_image(parent, _png_image(png), "plots/sweep.png")
    create_markdown_artifact(
        markdown=markdown + "\nThe learning curves: `plots/sweep.png` in the parent MLflow run.\n",
        key=artifact_key(name, "sweep"),
        description=f"rlpipe sweep {name}: final figures per grid point",
    )
    failed = [c.name for c in children if c.exit_code != 0]
    status = RunStatus.FAILED if failed else RunStatus.FINISHED
    client.set_terminated(parent, RunStatus.to_string(status))
    return {
        "parent_run_id": parent,
        "runs": {c.name: c.exit_code for c in children},
        "failed": failed,
        "plot": "plots/sweep.png",
    }


def _png_image(png: bytes) -> Any:
    from io import BytesIO

    from PIL import Image

    return Image.open(BytesIO(png))


def main(argv: list[str] | None = None, prog: str = "python flows/sweep.py") -> int:
    """CLI entry point: 0 when every run finished, 1 when one failed, 2 for bad input."""
    from flows.cli import console, prefect_api, preflight, print_error
    from flows.terminal import Terminal

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="ppo_cartpole", help="preset name or YAML path")
    parser.add_argument("--seeds", default="0-2", help="seeds: a range 0-4 or a list 0,2,7")
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        help="an axis section.field=v1,v2 (repeat for a product of axes)",
    )
    parser.add_argument("--name", default=None, help="sweep name (default: the preset's name)")
    parser.add_argument("--max-parallel", type=int, default=1, help="runs at a time")
    parser.add_argument(
        "--deployment",
        default=None,
        help="start the runs as runs of this deployment (flow/deployment, e.g. "
        "train/train-ppo-cartpole) instead of subprocesses",
    )
    parser.add_argument("overrides", nargs="*", help="dotted overrides for every run")
    args = parser.parse_intermixed_args(argv)
    terminal = Terminal(console)
    try:
        seeds, grid = parse_seeds(args.seeds), parse_grid(args.grid)
        base = load_config(args.config, args.overrides)
        name = args.name or base.preset.replace("_", "-")
        plan_sweep(args.config, args.overrides, seeds, grid, name)
        preflight(base)
    except ConfigError as exc:
        terminal.close()
        print_error(exc)
        return 2
    log_path = terminal.open_log(base.run.output_dir, f"sweep-{name}")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        with prefect_api(Path(base.run.output_dir)):
            if args.deployment:
                check_deployment(args.deployment)
            result = sweep(
                preset=args.config,
                seeds=seeds,
                name=name,
                overrides=args.overrides,
                grid=grid,
                max_parallel=args.max_parallel,
                deployment=args.deployment,
            )
    except ConfigError as exc:  # --deployment names no deployment
        terminal.close()
        print_error(exc, log_path)
        return 2
    except Exception as exc:  # noqa: BLE001 - the traceback goes to the log file
        terminal.log_failure(exc)
        terminal.close()
        print_error(exc, log_path)
        return 1
    terminal.close()
    console.rule(f"rlpipe sweep {name}")
    for run_name, code in result["runs"].items():
        console.print(f"{run_name:>32}: exit {code}", highlight=False)
    console.print(f"MLflow parent run {result['parent_run_id']}: sweep.md, plots/sweep.png")
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
