"""Online runs through the train CLI: the policy served on Ray Serve (127.0.0.1), a
simulated user asking it over HTTP, each iteration trained on exactly one batch of the
stored feedback, also when the driver dies after claiming a batch and the run resumes (its
feedback database rebuilt from its S3 mirror)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import sys
import time
from pathlib import Path

import httpx
import pytest

from infra.cluster.devices import ALLOW_LOGICAL_GPUS_VAR
from kinds.online.deployment import REPLICA_CPUS, read_weights
from kinds.online.simulated_user import SimulatedUser
from kinds.online.store import FeedbackStore, Generation
from rl_core.data.arithmetic import ArithmeticTask
from rl_core.online import Feedback
from rl_core.online.simulated_user import QuestionPlan
from tests.integration.conftest import ROOT, run_process, run_train, train_cmd
from tests.integration.online_preset import start_process, tiny_online_preset

pytestmark = pytest.mark.integration

RUN = "online-it"
BATCH = 8
ITERATIONS = 4


@pytest.fixture(scope="module")
def preset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """online_arith on the tiny model (one layer): 4 iterations of 8 feedback records."""
    return tiny_online_preset(tmp_path_factory.mktemp("online"), RUN, BATCH, ITERATIONS)


def batches(db: Path) -> dict[int, list[str]]:
    """Request ids of each claimed batch of the run, in arrival order."""
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "select batch, request_id from feedback where run = ? order by seq", (RUN,)
        ).fetchall()
    out: dict[int, list[str]] = {}
    for batch, request_id in rows:
        out.setdefault(batch, []).append(request_id)
    return out


def metric(output_dir: Path, key: str) -> list[float]:
    with sqlite3.connect(output_dir / "mlflow.db") as con:
        rows = con.execute("select value from metrics where key = ? order by step", (key,))
        return [r[0] for r in rows]


def test_each_record_is_trained_once_across_a_driver_kill_and_a_database_lost_meanwhile(
    tmp_path: Path, train_env: dict[str, str], preset: Path, s3_bucket: str, moto_s3
) -> None:
    import boto3

    # the driver dies in iteration 3's update, after it claimed its batch and after the
    # step-2 checkpoint; then the feedback database is lost: the rerun rebuilds it from its
    # S3 mirror and trains iterations 2 and 3 again, on the batches they had claimed
    env = {**train_env, **moto_s3.env()}
    mirrored = ["--config", str(preset), f"online.mirror=s3://{s3_bucket}/feedback"]
    dies = {**env, "RLPIPE_FAULTS": "exit:update@3"}
    failed = run_process(train_cmd(tmp_path, *mirrored), dies, timeout=600)
    said = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "injected fault exit" in said, said[-4000:]
    db = tmp_path / RUN / "feedback.db"
    before = batches(db)
    assert sorted(before) == [0, 1, 2, 3] and all(len(v) == BATCH for v in before.values())
    s3 = boto3.client("s3", endpoint_url=moto_s3.url)
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=s3_bucket, Prefix="feedback/")
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    with sqlite3.connect(db) as con:
        generations = con.execute("select count(*) from generations").fetchone()[0]
    # the replicas wrote each answered completion and verdict, the trainer each claim
    assert sum(k.startswith("feedback/generations/") for k in keys) == generations
    assert sum(k.startswith("feedback/feedback/") for k in keys) == ITERATIONS * BATCH
    assert sum(k.startswith(f"feedback/claims/{RUN}/") for k in keys) == ITERATIONS
    for lost in tmp_path.joinpath(RUN).glob("feedback.db*"):
        lost.unlink()
    out = run_train(tmp_path, dies, *mirrored)
    assert "was missing: restored" in out and "resumed_from: 2" in out, out[-4000:]
    after = batches(db)
    assert after == before  # the resumed iterations took the batches they had claimed
    with sqlite3.connect(db) as con:
        served = con.execute("select count(*) from generations").fetchone()[0]
        unclaimed = con.execute("select count(*) from feedback where batch is null").fetchone()[0]
    assert served == ITERATIONS * BATCH and unclaimed == 0  # nothing asked twice, none lost
    assert metric(tmp_path, "online/records")[-ITERATIONS:] == [float(BATCH)] * ITERATIONS
    rates = metric(tmp_path, "online/acceptance_rate")
    assert rates and all(0.0 <= r <= 1.0 for r in rates)
    served_dir = tmp_path / RUN / "served"
    assert (served_dir / "current.json").is_file()
    assert len(list(served_dir.glob("v*"))) == 2  # the served version and the one before it


def test_rlpipe_serve_serves_the_run_and_stores_feedback_until_sigterm(
    tmp_path: Path, train_env: dict[str, str], preset: Path
) -> None:
    cmd = [sys.executable, str(ROOT / "flows" / "serve.py"), "--config", str(preset)]
    proc, output = start_process([*cmd, f"run.output_dir={tmp_path}"], train_env)
    try:
        url = output.wait_for(r"serving online-it \(weight version 0\) at (http://\S+)/v1").group(1)
        plan = QuestionPlan(ArithmeticTask().heldout(10), noise=0.0, seed=1)
        user = SimulatedUser(url, plan, model="online-it")
        talks = user.run(3)
        user.close()
        assert all(t.weight_version == 0 for t in talks)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
    said = output.text()
    assert proc.returncode == 0, said[-4000:]
    assert "stopped serving online-it" in said
    db = tmp_path / RUN / "feedback.db"
    with sqlite3.connect(db) as con:
        stored = con.execute("select count(*) from feedback where batch is null").fetchone()[0]
    assert stored == 3  # waiting for the run's next iterations


def test_gated_promotion_serves_new_versions_as_candidates_until_the_users_prefer_one(
    tmp_path: Path, train_env: dict[str, str], preset: Path
) -> None:
    gated = ["--config", str(preset), "tracking.promotion=gated", "run.max_iterations=2"]
    # on a GPU (a logical one here) the trainer reserves its node's CPUs, less the one the
    # policy server's replica needs (else the replica is never scheduled and the run hangs)
    on_gpu = {**train_env, ALLOW_LOGICAL_GPUS_VAR: "1"}
    run_train(tmp_path, on_gpu, *gated, "cluster.device=cuda", "cluster.num_gpus_per_node=1")
    log = (tmp_path / RUN / "rlpipe.log").read_text()
    trainer_cpus = re.search(r"placement actor: 1 worker\(s\) on GPUs 0 .*?([0-9.]+) CPU each", log)
    assert trainer_cpus, log[-4000:]
    assert float(trainer_cpus.group(1)) <= (os.cpu_count() or 1) * 0.99 - REPLICA_CPUS + 1e-3
    weights_file = tmp_path / RUN / "served" / "current.json"
    # each weight sync served the new version beside main (version 0) to half the users: 1 in
    # iteration 1, 2 for the final evaluation
    served = read_weights(weights_file)
    assert (served.version, served.candidate_version, served.candidate_share) == (0, 2, 0.5)
    db = tmp_path / RUN / "feedback.db"
    with sqlite3.connect(db) as con:
        query = "select variant, weight_version, count(*) from generations group by 1, 2"
        answered = {(variant, v): n for variant, v, n in con.execute(query)}
    # iteration 1's batch all by main; iteration 2's split evenly, every second one candidate
    assert answered == {("main", 0): BATCH + BATCH // 2, ("candidate", 1): BATCH // 2}
    assert metric(tmp_path, "online/ab_candidate_version") == [1.0]
    assert metric(tmp_path, "online/ab_main_version") == [0.0, 0.0]
    # users clearly prefer the candidate: 30 more verdicts on each version's answers
    store = FeedbackStore(db)
    for i in range(60):
        version, variant = (2, "candidate") if i % 2 else (0, "main")
        request_id = f"cmpl-{i:032x}"
        store.record_generation(
            Generation(request_id, version, variant, "1+1=", "2", [1], [2], [-0.1], True)
        )
        store.record_feedback(Feedback(request_id, accepted=bool(i % 2)))
    store.close()
    promote = [sys.executable, str(ROOT / "flows" / "promote_served.py"), "--config", str(preset)]
    promote += ["--auto-approve", f"run.output_dir={tmp_path}"]
    decided = run_process(promote, train_env, timeout=300)
    said = decided.stdout + decided.stderr
    assert decided.returncode == 0, said[-4000:]
    summary = json.loads(decided.stdout[decided.stdout.index("{") :])
    assert summary["outcome"] == "auto_approved" and summary["promoted"], summary
    assert (summary["main_version"], summary["candidate_version"]) == (0, 2)
    assert summary["candidate_acceptance"] > summary["main_acceptance"]
    assert read_weights(weights_file).version == 2  # the candidate is main now
    assert read_weights(weights_file).candidate_version is None
    with sqlite3.connect(tmp_path / "mlflow.db") as con:
        tags = dict(con.execute("select key, value from tags where key like 'rlpipe.served%'"))
    assert tags["rlpipe.served_promotion.v2"] == "auto_approved"
    again = run_process(promote, train_env, timeout=300)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert '"outcome": "no_candidate"' in again.stdout


def test_killing_the_server_and_the_trainer_loses_no_feedback_and_trains_each_record_once(
    tmp_path: Path, train_env: dict[str, str], preset: Path
) -> None:
    # the trainer rank dies in iteration 3's update (the run rebuilds it and replays from the
    # step-2 checkpoint); the policy server's replica is SIGKILLed while the simulated user
    # asks iteration 2's questions (Ray Serve restarts it, the user retries)
    env = {**train_env, "RLPIPE_FAULTS": "kill:update@3"}
    proc, output = start_process(train_cmd(tmp_path, "--config", str(preset)), env)
    db = tmp_path / RUN / "feedback.db"
    url = killed = restarted = None
    deadline = time.monotonic() + 600
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            for line in output.take():
                found = re.search(rf"serving {RUN} at (http://\S+)/v1", line)
                url = url or (found.group(1) if found else None)
            if url and killed is None and served_count(db) >= 2 * BATCH + 2:
                killed = httpx.get(f"{url}/health", timeout=30).json()["replica_pid"]
                os.kill(killed, signal.SIGKILL)
            if killed and restarted is None:
                try:
                    restarted = httpx.get(f"{url}/health", timeout=5).json()["replica_pid"]
                except httpx.HTTPError:
                    pass  # (restarting)
            time.sleep(0.02)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = output.text()
    assert proc.returncode == 0, out[-6000:]
    assert killed is not None and restarted not in (None, killed), (killed, restarted)
    assert "injected fault kill" in out and "replaying from iteration 2" in out, out[-6000:]
    claimed = batches(db)
    assert sorted(claimed) == [0, 1, 2, 3] and all(len(v) == BATCH for v in claimed.values())
    ids = [r for batch in claimed.values() for r in batch]
    assert len(set(ids)) == len(ids)  # no record in two batches
    with sqlite3.connect(db) as con:
        unclaimed = con.execute("select count(*) from feedback where batch is null").fetchone()[0]
        answered = con.execute("select count(*) from feedback").fetchone()[0]
    assert unclaimed == 0 and answered == ITERATIONS * BATCH  # every verdict given was trained
    # iterations 2 and 3 ran twice (the replay): each time on the same batch
    assert metric(tmp_path, "online/records")[-ITERATIONS:] == [float(BATCH)] * ITERATIONS


def served_count(db: Path) -> int:
    """Completions the server stored so far (0 before the store exists)."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as con:
            return con.execute("select count(*) from generations").fetchone()[0]
    except sqlite3.OperationalError:  # (the tables are being created)
        return 0
