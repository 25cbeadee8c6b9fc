"""The async mode's pipeline of launched batches: which iteration launches which batch with
which weight version, the staleness bound, idle times, and snapshots (no Ray needed)."""

from __future__ import annotations

import pytest

from infra.driver.rollout_pipeline import RolloutPipeline


def run(pipeline: RolloutPipeline, iterations: range) -> list[tuple[int, int, int]]:
    """``(iteration, batch index, batch version)`` taken per iteration; version = iteration."""
    launched = []
    taken = []
    for it in iterations:
        pipeline.fill(it, version=it, launch=lambda i, v: launched.append(v) or [("b", "s")])
        chunk = pipeline.take(it)
        taken.append((it, chunk.index, chunk.version))
    return taken


@pytest.mark.parametrize("staleness", [0, 1, 3])
def test_batch_k_is_sampled_with_version_k_minus_n(staleness):
    taken = run(RolloutPipeline(staleness), range(6))
    assert [i for i, _, _ in taken] == [index for _, index, _ in taken]
    assert [v for _, _, v in taken] == [max(k - staleness, 0) for k in range(6)]
    assert all(k - v <= staleness for k, _, v in taken)


def test_the_buffer_holds_n_batches_ahead():
    pipeline = RolloutPipeline(2)
    run(pipeline, range(3))
    assert [c.index for c in pipeline.chunks] == [3, 4]
    with pytest.raises(RuntimeError, match="for iteration 3, not 4"):
        pipeline.take(4)


def test_a_restore_keeps_collected_batches_and_forgets_from_the_first_failed_one(monkeypatch):
    import infra.driver.rollout_pipeline as module

    failed: set[int] = set()
    monkeypatch.setattr(module, "_failed", lambda chunk: chunk.index in failed)
    pipeline = RolloutPipeline(2)
    run(pipeline, range(2))  # batches 2 and 3 launched ahead
    kept = pipeline.snapshot()
    pipeline.fill(2, version=2, launch=lambda i, v: [("b", "s")])  # launches batch 4
    pipeline.take(2)
    # the step failed after its batches were collected: all are kept
    assert pipeline.restore(kept) is None
    assert [c.index for c in pipeline.chunks] == [2, 3, 4] and pipeline.next_index == 5
    # batch 3 failed: it and batch 4 are forgotten; 3 is launched again with its version
    pipeline.take(2)
    failed.add(3)
    assert pipeline.restore(kept) == 3
    assert [c.index for c in pipeline.chunks] == [2] and pipeline.next_index == 3
    failed.clear()
    assert run(pipeline, range(2, 5)) == [(2, 2, 0), (3, 3, 1), (4, 4, 2)]


def test_forgotten_batches_are_launched_again_with_their_versions(monkeypatch):
    """What a checkpoint does after a batch launched ahead failed: the batches it holds are
    those the run that goes on collects, with the same weight versions."""
    import infra.driver.rollout_pipeline as module

    failed: set[int] = set()
    monkeypatch.setattr(module, "_failed", lambda chunk: chunk.index in failed)
    pipeline = RolloutPipeline(2)
    run(pipeline, range(2))  # batches 2 (version 0) and 3 (version 1) launched ahead
    failed.add(2)
    assert pipeline.forget_failed() == 2 and not pipeline.chunks
    failed.clear()
    relaunched = []
    assert pipeline.relaunch_forgotten(lambda i, v: relaunched.append((i, v)) or []) == 2
    assert relaunched == [(2, 0), (3, 1)] and pipeline.next_index == 4
    assert pipeline.relaunch_forgotten(lambda i, v: []) == 0  # nothing left to launch
    assert run(pipeline, range(2, 5)) == [(2, 2, 0), (3, 3, 1), (4, 4, 2)]


def test_idle_seconds_are_the_longest_gap_between_batches_of_an_env_worker():
    pipeline = RolloutPipeline(1)
    assert pipeline.idle_seconds([{"started_at": 0.0, "finished_at": 1.0}]) == 0.0
    gaps = [{"started_at": 1.5, "finished_at": 2.0}, {"started_at": 5.0, "finished_at": 6.0}]
    pipeline.last_finished[1] = 4.0
    assert pipeline.idle_seconds(gaps) == 1.0  # worker 0: 0.5 s, worker 1: 1.0 s
    assert pipeline.last_finished == {0: 2.0, 1: 6.0}
