"""A scheduled evaluation that starts before the run's first checkpoint completes with a
message instead of failing."""

from __future__ import annotations

from pathlib import Path

from flows.evaluate import evaluate


def test_no_checkpoint_yet_is_a_skip_with_its_reason(tmp_path: Path) -> None:
    summary = evaluate.fn(run_name="ppo-cartpole", output_dir=str(tmp_path))
    assert summary["run_name"] == "ppo-cartpole"
    assert summary["skipped"].startswith("nothing to evaluate yet: run 'ppo-cartpole' has no")
    assert str(tmp_path / "ppo-cartpole" / "checkpoints") in summary["skipped"]
    assert not (tmp_path / "mlflow.db").exists()  # nothing written
