"""``rlpipe runs``: the training runs under an output folder, their state and where they are.

Reads each ``<output_dir>/<run>/checkpoints`` store (its ``latest.json``, the committed
config and the run lease) without starting anything; the MLflow run's status comes from
the tracking store the checkpoint names. Runs whose checkpoints live elsewhere
(``run.checkpoint_uri``) are listed with ``--checkpoint-uri``.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from infra.checkpoint.lease import DEFAULT_TTL_S
from infra.checkpoint.lease_holder import stale_reason
from infra.checkpoint.lease_local import LocalLeaseBackend
from infra.checkpoint.reader import CONFIG_FILE
from infra.checkpoint.store import MANIFEST
from infra.tracking.mlflow_tracker import mlflow_run_url

console = Console()
logger = logging.getLogger("rlpipe.runs")


@dataclass(frozen=True)
class RunRow:
    """One run as ``rlpipe runs`` lists it."""

    name: str
    state: str
    iteration: int
    max_iterations: int | None
    checkpoint: str
    mlflow: str
    tracking_uri: str


#: Where ``mlflow ui`` serves a local store by default.
MLFLOW_UI = "http://127.0.0.1:5000"


def run_state(
    store: Path, manifest: dict[str, Any], config: dict[str, Any], mlflow_run: Any | None
) -> str:
    """``running`` (a live process holds its lease), ``finished``, ``failed`` or ``stopped``.

    ``finished``: it reached ``run.max_iterations`` or its target return; ``failed``: its
    MLflow run ended FAILED before that; ``stopped``: anything else (rerun the same command
    to continue it).
    """
    lease = LocalLeaseBackend(store).read()
    if lease is not None and lease.record is not None:
        if stale_reason(lease.record, lease.age_s, DEFAULT_TTL_S) is None:
            return "running"
    state = manifest.get("state", {})
    limit = config.get("run", {}).get("max_iterations")
    if state.get("solved") or (limit is not None and state.get("iteration", 0) >= limit):
        return "finished"
    failed = mlflow_run is not None and mlflow_run.info.status == "FAILED"
    return "failed" if failed else "stopped"


def mlflow_run_of(manifest: dict[str, Any]) -> Any | None:
    """The run's MLflow run (None: none recorded, or its store does not answer)."""
    run_id, uri = manifest.get("mlflow_run_id"), manifest.get("mlflow_tracking_uri")
    if not run_id or not uri or "***" in uri:
        return None
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient(uri).get_run(run_id)
    except (MlflowException, OSError):
        return None


def mlflow_link(manifest: dict[str, Any], mlflow_run: Any | None) -> str:
    """The MLflow UI's page of the run: the tracking server's, or ``mlflow ui``'s for a file store."""
    uri = str(manifest.get("mlflow_tracking_uri") or "")
    if mlflow_run is None:
        return f"{manifest.get('mlflow_run_id') or '-'} ({uri or 'no tracking'})"
    ui = uri.rstrip("/") if uri.startswith(("http://", "https://")) else MLFLOW_UI
    return mlflow_run_url(ui, mlflow_run.info.experiment_id, mlflow_run.info.run_id)


def list_runs(root: Path) -> list[RunRow]:
    """Every run with a committed checkpoint under ``root`` (``<run>/checkpoints`` or ``<run>``)."""
    rows = []
    for manifest_path in sorted(root.glob(f"*/checkpoints/{MANIFEST}")) + sorted(
        root.glob(f"*/{MANIFEST}")
    ):
        store = manifest_path.parent
        try:
            manifest = json.loads(manifest_path.read_text())
            config_path = store / manifest["dir"] / CONFIG_FILE
            config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("skipping %s: unreadable (%s)", manifest_path, exc)
            continue
        mlflow_run = mlflow_run_of(manifest)
        rows.append(
            RunRow(
                name=str(manifest.get("run_name", store.parent.name)),
                state=run_state(store, manifest, config, mlflow_run),
                iteration=int(manifest.get("state", {}).get("iteration", manifest["step"])),
                max_iterations=config.get("run", {}).get("max_iterations"),
                checkpoint=str(store / manifest["dir"]),
                mlflow=mlflow_link(manifest, mlflow_run),
                tracking_uri=str(manifest.get("mlflow_tracking_uri") or ""),
            )
        )
    return rows


def main(argv: list[str] | None = None, prog: str = "rlpipe runs") -> int:
    """List the runs; returns 0 (2: the folder does not exist)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="outputs", help="the runs' run.output_dir")
    parser.add_argument(
        "--checkpoint-uri", default=None, help="a local run.checkpoint_uri, if the runs set one"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    root = Path(args.checkpoint_uri or args.output_dir)
    if not root.is_dir():
        Console(stderr=True).print(f"[red]error:[/red] no folder {root}", highlight=False)
        return 2
    rows = list_runs(root)
    if args.json:
        console.print_json(json.dumps([row.__dict__ for row in rows]))
        return 0
    table = Table(title=f"runs under {root}")
    for column in ("run", "state", "iterations", "last checkpoint", "MLflow run"):
        table.add_column(column, overflow="fold")
    for row in rows:
        total = "?" if row.max_iterations is None else str(row.max_iterations)
        table.add_row(row.name, row.state, f"{row.iteration}/{total}", row.checkpoint, row.mlflow)
    console.print(table)
    if not rows:
        console.print(f"no runs with a committed checkpoint under {root}", highlight=False)
    for uri in sorted({r.tracking_uri for r in rows if r.mlflow.startswith(MLFLOW_UI)}):
        console.print(
            f"MLflow links open with: mlflow ui --backend-store-uri {uri}", highlight=False
        )
    return 0
