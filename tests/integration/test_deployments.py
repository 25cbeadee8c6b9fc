"""prefect.yaml deploys from a clean checkout against a real Prefect server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL, temporary_settings

from rl_core.config import available_presets
from tests.integration.conftest import ROOT

pytestmark = pytest.mark.integration
PREFECT = str(Path(sys.executable).with_name("prefect"))


def prefect_cli(args: list[str], api: str, home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PREFECT_API_URL=api, PREFECT_HOME=str(home), RLPIPE_ROOT=str(ROOT))
    proc = subprocess.run(
        [PREFECT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"prefect {' '.join(args)} failed:\n{out[-4000:]}"
    return out


def test_deploy_all_creates_every_deployment(prefect_api: str, tmp_path: Path) -> None:
    before = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    prefect_cli(
        ["work-pool", "create", "rlpipe-process", "--type", "process", "--overwrite"],
        prefect_api,
        tmp_path,
    )
    prefect_cli(["--no-prompt", "deploy", "--all"], prefect_api, tmp_path)
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    wanted = {d["name"]: d for d in spec["deployments"]}
    presets = set(available_presets())
    # supervised warm starts are deployed as sft-<name> (flows/sft.py), the rest as train-<preset>
    names = {
        p.replace("_", "-") if p.startswith("sft_") else f"train-{p}".replace("_", "-")
        for p in presets
    }
    assert names <= set(wanted), sorted(names - set(wanted))
    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as api:
        deployments = {d.name: d for d in api.read_deployments()}
        assert set(wanted) <= set(deployments), sorted(set(wanted) - set(deployments))
        for name, want in wanted.items():
            got = deployments[name]
            assert got.work_pool_name == "rlpipe-process", name
            assert got.parameters == want["parameters"], name
            # {{ $RLPIPE_ROOT }} is filled in at deploy time: the checkout the worker runs
            assert got.pull_steps == [
                {"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}
            ], name
        grpo = deployments["train-grpo-arith"]
        assert grpo.parameters["preset"] == "grpo_arith"
        assert api.read_flow(grpo.flow_id).name == "train"
        promote = deployments["promote-newest"]
        assert api.read_flow(promote.flow_id).name == "promote"
        # its trigger: an automation running it on every model registration
        (automation,) = [
            a
            for a in api.read_automations()
            if any(getattr(action, "deployment_id", None) == promote.id for action in a.actions)
        ]
        assert automation.trigger.expect == {"rlpipe.model.registered"}
        (run_promote,) = automation.actions
        assert "rlpipe.model" in str(run_promote.parameters["model_name"])
        # online training: an automation on each batch of feedback an external endpoint has
        online = deployments["train-online-on-feedback"]
        (automation,) = [
            a
            for a in api.read_automations()
            if any(getattr(action, "deployment_id", None) == online.id for action in a.actions)
        ]
        assert automation.trigger.expect == {"rlpipe.feedback.ready"}
        labels = automation.trigger.match.model_dump()
        assert labels["rlpipe.online.trainer"] == "external", labels
        (run_training,) = automation.actions
        assert "event.payload.run_name" in str(run_training.parameters["run_name"])
        (schedule,) = deployments["evaluate-latest"].schedules
        assert schedule.schedule.cron == "0 * * * *" and not schedule.active  # deployed paused
        assert all(not deployments[n].schedules for n in wanted if n != "evaluate-latest")
        # training deployments: one flow run at a time, later starts wait for the slot
        for name in wanted:
            got = deployments[name]
            if name == "evaluate-latest":
                assert got.global_concurrency_limit is None
                continue
            assert got.global_concurrency_limit.limit == 1, name
            assert got.concurrency_options.collision_strategy == "ENQUEUE", name
    after = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    assert after == before  # deploying writes nothing into the checkout
