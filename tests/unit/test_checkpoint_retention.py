"""Checkpoint retention keeps the last N plus the best; registration picks the best
checkpoint when it exists, else says why it takes the latest."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from infra.checkpoint.store import LocalCheckpointStore, step_dir_name
from infra.driver.session import TrainSession
from tasks.register_model import registered_step


def store_with(tmp_path: Path, steps: list[int]) -> LocalCheckpointStore:
    store = LocalCheckpointStore(tmp_path)
    for step in steps:
        store.write_bytes(f"{step_dir_name(step)}/COMPLETE", b"ok\n")
        store.commit(step, {"run_name": "r"})
    return store


def session(store, keep: int | None, best: int | None, register: str = "best"):
    return SimpleNamespace(
        cfg=SimpleNamespace(
            run=SimpleNamespace(keep_checkpoints=keep),
            tracking=SimpleNamespace(register_checkpoint=register),
        ),
        store=store,
        state=SimpleNamespace(best_eval_step=best, best_eval_return=424.3),
    )


def test_keep_last_two_plus_the_best(tmp_path: Path) -> None:
    store = store_with(tmp_path, [2, 4, 5, 6, 8])
    TrainSession._apply_retention(session(store, keep=2, best=4), 8)
    assert store.checkpoint_steps() == [4, 6, 8]


def test_no_retention_keeps_everything(tmp_path: Path) -> None:
    store = store_with(tmp_path, [2, 4, 6])
    TrainSession._apply_retention(session(store, keep=None, best=2), 6)
    assert store.checkpoint_steps() == [2, 4, 6]


def test_the_best_checkpoint_is_registered_when_it_exists(tmp_path: Path) -> None:
    store = store_with(tmp_path, [3, 5, 10])
    assert registered_step(session(store, None, best=5)) == (
        5,
        "best checkpoint (step 5, eval 424.3)",
    )
    step, why = registered_step(session(store, None, best=4))  # between checkpoints
    assert step is None and "no checkpoint of the best evaluation, step 4" in why
    step, why = registered_step(session(store, None, best=None))
    assert step is None and "no evaluation" in why
    step, why = registered_step(session(store, None, best=5, register="latest"))
    assert step is None and "tracking.register_checkpoint=latest" in why
