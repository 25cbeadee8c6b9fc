"""What every finished sweep must leave behind, checked the same way whichever way its runs
were started (train-CLI subprocesses or deployment runs)."""

from __future__ import annotations

from typing import Any

from mlflow.tracking import MlflowClient
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.settings import PREFECT_API_URL, temporary_settings

from tests.integration.conftest import CARTPOLE_EXPERIMENT


def check_sweep_report(
    client: MlflowClient, prefect_api: str, name: str, run_names: list[str]
) -> tuple[Any, list[Any], str]:
    """The sweep's FINISHED MLflow parent run holds exactly ``run_names``, ``sweep.md`` and
    ``plots/sweep.png``; the Prefect artifact ``<name>-sweep`` holds the table.

    Returns:
        The parent run, its child runs (by name) and the table's markdown.
    """
    experiment = client.get_experiment_by_name(CARTPOLE_EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("rlpipe.sweep") == name]
    children = sorted(
        (r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id),
        key=lambda r: r.info.run_name,
    )
    assert [c.info.run_name for c in children] == run_names
    assert parent.info.status == "FINISHED"
    assert "sweep.md" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert plots == {"plots/sweep.png"}, plots
    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as api:
        (artifact,) = api.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[f"{name}-sweep"]))
        )
    return parent, children, artifact.data
