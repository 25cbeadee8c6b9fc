"""What a training run shows in the Prefect UI: tags, a progress bar, a final summary.

- The train flow run is tagged with the preset, algorithm and run name (``preset:...``,
  ``algorithm:...``, ``run:...``); child flows and task runs inherit the tags.
- A progress artifact (``<run name>-progress``) moves with every iteration.
- A markdown artifact (``<run name>-summary``) ends the run with the key metrics, the MLflow
  run (a link when MLflow is served over HTTP) and the checkpoint location, secrets masked.

Every call here is best-effort: the UI is a view, so an API error is logged and training
goes on.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    update_progress_artifact,
)
from prefect.client.orchestration import get_client
from prefect.runtime import flow_run

from infra.tracking.mlflow_tracker import mlflow_run_url
from infra.tracking.secrets import redact_text, url_without_credentials
from rl_core.algorithms.naming import algorithm_name
from rl_core.config import RLPipeConfig

logger = logging.getLogger("rlpipe.ui")

#: Summary rows of the final artifact: (result key, label).
SUMMARY_ROWS = (
    ("iterations", "iterations"),
    ("env_steps", "env steps"),
    ("initial_eval_return", "eval before training"),
    ("last_eval_return", "last eval"),
    ("best_eval_return", "best eval"),
    ("solved", "solved"),
    ("resumed_from", "resumed from iteration"),
    ("stopped", "stopped (request or budget)"),
    ("cpu_hours", "CPU-hours (reserved × wall time)"),
    ("gpu_hours", "GPU-hours (reserved × wall time)"),
)


def artifact_key(run_name: str, suffix: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    cleaned = "".join(c if c.isalnum() else "-" for c in run_name.lower()).strip("-")
    return f"{cleaned or 'run'}-{suffix}"


def run_tags(cfg: RLPipeConfig, supervised: bool = False) -> list[str]:
    """The tags of a run: preset, algorithm and run name.

    Args:
        cfg: The run's config.
        supervised: The run is supervised fine-tuning (its algorithm is ``sft``).
    """
    return [
        "rlpipe",
        f"preset:{cfg.preset}",
        f"algorithm:{algorithm_name(cfg.algorithm, supervised=supervised)}",
        f"run:{cfg.run.name}",
    ]


def tag_flow_run(tags: list[str]) -> None:
    """Add ``tags`` to the current flow run (deployment tags are kept)."""
    run_id = flow_run.id
    if not run_id:
        return
    try:
        with get_client(sync_client=True) as client:
            current = client.read_flow_run(run_id).tags or []
            client.update_flow_run(run_id, tags=sorted({*current, *tags}))
    except Exception as exc:  # noqa: BLE001 - the UI is best-effort
        logger.warning("could not tag the flow run: %s", exc)


class ProgressArtifact:
    """A progress bar in the Prefect UI for one flow run (created lazily).

    Each update is an API call (≈ 20 ms on a local server): after the first one, the bar
    moves at most every ``min_interval_s`` seconds, and always when forced (the end).

    Args:
        run_name: The run's name (part of the artifact key).
        total: Iterations of the whole run.
        min_interval_s: Least seconds between two updates that are not forced.
    """

    def __init__(self, run_name: str, total: int, min_interval_s: float = 5.0) -> None:
        self.key = artifact_key(run_name, "progress")
        self.total = max(total, 1)
        self.min_interval_s = min_interval_s
        self.artifact_id: Any = None
        self._shown: float | None = None
        self._updated_at = float("-inf")

    def update(self, done: int, force: bool = False) -> None:
        """Show ``done`` of ``total`` iterations (skipped if the last update is recent)."""
        percent = min(100.0, 100.0 * done / self.total)
        now = time.monotonic()
        if percent == self._shown or (
            not force
            and self.artifact_id is not None
            and now - self._updated_at < self.min_interval_s
        ):
            return
        self._shown, self._updated_at = percent, now
        try:
            if self.artifact_id is None:
                self.artifact_id = create_progress_artifact(
                    progress=percent,
                    key=self.key,
                    description=f"iterations done of {self.total}",
                )
            else:
                update_progress_artifact(self.artifact_id, progress=percent)
        except Exception as exc:  # noqa: BLE001 - the UI is best-effort
            logger.warning("could not update the progress artifact: %s", exc)


def mlflow_run_link(tracking_uri: str | None, experiment_id: str | None, run_id: str | None) -> str:
    """A markdown link to the MLflow run when MLflow is served over HTTP, else how to see it."""
    if not run_id:
        return "MLflow tracking disabled"
    if tracking_uri and tracking_uri.startswith(("http://", "https://")):
        base = url_without_credentials(tracking_uri).rstrip("/")
        return f"[{run_id}]({mlflow_run_url(base, experiment_id, run_id)})"
    shown = redact_text(str(tracking_uri))
    return f"`{run_id}` in `{shown}` (view with `mlflow ui --backend-store-uri {shown}`)"


def summary_markdown(cfg: RLPipeConfig, result: dict[str, Any], experiment_id: str | None) -> str:
    """The final artifact's markdown."""
    lines = [
        f"# rlpipe run `{cfg.run.name}`",
        "",
        f"preset `{cfg.preset}`, algorithm `{result.get('algorithm') or algorithm_name(cfg.algorithm)}`",
        "",
        "| | |",
        "| --- | --- |",
    ]
    for key, label in SUMMARY_ROWS:
        value = result.get(key)
        if value is not None:
            lines.append(
                f"| {label} | {value:.4g} |"
                if isinstance(value, float)
                else f"| {label} | {value} |"
            )
    link = mlflow_run_link(result.get("tracking_uri"), experiment_id, result.get("mlflow_run_id"))
    lines += [
        f"| MLflow run | {link} |",
        f"| checkpoints | `{redact_text(str(result.get('checkpoint_dir')))}` |",
    ]
    if result.get("model_dir"):
        lines.append(f"| exported model | `{redact_text(result['model_dir'])}` |")
    return "\n".join(lines) + "\n"


def publish_summary(cfg: RLPipeConfig, result: dict[str, Any], experiment_id: str | None) -> None:
    """Create the final markdown artifact of the run."""
    try:
        create_markdown_artifact(
            markdown=summary_markdown(cfg, result, experiment_id),
            key=artifact_key(cfg.run.name, "summary"),
            description=f"rlpipe run {cfg.run.name}: key metrics and where things are",
        )
    except Exception as exc:  # noqa: BLE001 - the UI is best-effort
        logger.warning("could not publish the summary artifact: %s", exc)
