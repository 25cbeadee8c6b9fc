"""The hybrid engine's rollout engine sleeps while the trainer computes and wakes for weight
syncs and generation, also across retried steps; engines get the worker's device.

A recording engine (registered as ``hf``) stands in for the rollout engine; the trainer
rank is a real :class:`LLMHybridWorker` (FSDP2 over a one-rank gloo group) in this process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.distributed as dist

from infra.llm.engines import ENGINES, RolloutEngine
from infra.llm.workers import llm_workers
from kinds.reasoning.workers.llm_hybrid_worker import LLMHybridWorker
from kinds.reasoning.workers.llm_rollout_worker import LLMRolloutWorker
from rl_core.llm.generation import GenerationResult
from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.training.llm_update import minibatch_totals
from tests.llm_trainers import batch, config

SAMPLING = {"max_new_tokens": 2, "stop_token_ids": (1,)}


class RecordingEngine(RolloutEngine):
    """Records every call (and refuses to work asleep, as vLLM does)."""

    def __init__(
        self, model_cfg: Any, rollout_cfg: Any, device: torch.device, collocated: bool = False
    ) -> None:
        self.device, self.collocated = device, collocated
        self.log: list[Any] = []
        self.awake = True
        self.fail: set[str] = set()  # calls that raise once (after being recorded)

    def _call(self, name: str, *detail: Any) -> None:
        self.log.append((name, *detail))
        if name in self.fail:
            self.fail.discard(name)
            raise RuntimeError(f"{name} failed")

    def sleep(self) -> None:
        assert self.awake, "sleep() on a sleeping engine"
        self._call("sleep")
        self.awake = False

    def wake(self) -> None:
        assert not self.awake, "wake() on an awake engine"
        self._call("wake")
        self.awake = True

    def update_weights(self, named_tensors, version: int) -> None:
        assert self.awake, "weights synced into a sleeping engine"
        assert len(dict(named_tensors)) > 0
        self._call("sync", version)
        self.version = version

    def generate(self, prompt_ids, sampling, seed) -> GenerationResult:
        assert self.awake, "generate() on a sleeping engine"
        self._call("generate")
        return GenerationResult([[1] for _ in prompt_ids], [[-0.5] for _ in prompt_ids], [True])


@pytest.fixture()
def recording_engine() -> Iterator[None]:
    builtin = ENGINES.get("hf")
    ENGINES.register("hf", RecordingEngine, force=True)
    yield
    ENGINES.register("hf", builtin, force=True)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


@pytest.fixture()
def worker(recording_engine, tiny_dir, tmp_path, monkeypatch) -> Iterator[LLMHybridWorker]:
    """A set-up hybrid trainer rank whose ``llm_update`` calls are recorded in the engine log."""
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    try:
        rank = LLMHybridWorker(config(tiny_dir), 0, (), 1)
        rank.setup("unused:0")  # (the process group exists already)
        real_update = llm_workers.llm_update
        failures: list[str] = []

        def recorded_update(*args: Any, **kwargs: Any) -> dict[str, float]:
            rank.engine.log.append(("update", "asleep" if not rank.engine.awake else "AWAKE"))
            if failures:
                raise RuntimeError(failures.pop())
            return real_update(*args, **kwargs)

        monkeypatch.setattr(llm_workers, "llm_update", recorded_update)
        rank.fail_next_update = failures.append  # type: ignore[attr-defined]
        yield rank
    finally:
        dist.destroy_process_group()


def _totals(data: dict) -> list[tuple[float, int]]:
    tensors = {k: torch.from_numpy(v) for k, v in data.items()}
    return [(t.tokens, t.seqs) for t in minibatch_totals([tensors], 2)]


def iteration(rank: LLMHybridWorker, it: int, data: dict) -> None:
    """One iteration's calls in the runtime's order (sync, rollout, advantage, update)."""
    rank.sync_rollout_weights()
    rank.generate([[5, 6, 7], [8, 9]], SAMPLING, seed=it)
    rank.compute_logprobs(data)
    rank.update(data, _totals(data), it)


def test_engine_gets_the_trainer_ranks_device_and_is_collocated(worker) -> None:
    assert worker.engine.device == worker.device == torch.device("cpu")
    assert worker.engine.collocated is True


def test_sleep_update_wake_sync_generate_over_two_iterations(worker) -> None:
    data = batch()
    iteration(worker, 0, data)
    iteration(worker, 1, data)
    assert worker.engine.log == [
        ("sync", 0),
        ("generate",),
        ("sleep",),
        ("update", "asleep"),
        ("wake",),
        ("sync", 1),
        ("generate",),
        ("sleep",),
        ("update", "asleep"),
    ]
    assert worker.engine_version == 1 and worker.version == 2
    worker.sync_rollout_weights()  # (as an evaluation would)
    worker.sft_update(data, _totals(data)[0], 2)  # a supervised step sleeps the engine too
    assert worker.engine.log[-3:] == [("wake",), ("sync", 2), ("sleep",)]
    assert not worker.engine.awake


def test_a_retried_update_finds_the_engine_asleep_and_the_next_sync_wakes_it(worker) -> None:
    data = batch()
    iteration(worker, 0, data)
    worker.sync_rollout_weights()
    worker.generate([[5, 6]], SAMPLING, seed=1)
    worker.engine.log.clear()
    worker.snapshot()  # as the runtime does before an update it may retry
    worker.fail_next_update("update failed midway")
    with pytest.raises(RuntimeError, match="update failed midway"):
        worker.update(data, _totals(data), 1)
    worker.restore_snapshot()
    worker.update(data, _totals(data), 1)  # the retry
    worker.sync_rollout_weights()
    assert worker.engine.log == [
        ("sleep",),
        ("update", "asleep"),
        ("update", "asleep"),
        ("wake",),
        ("sync", 2),  # the update counted once
    ]
    assert worker.engine.awake


def test_retried_syncs_and_generations_find_the_engine_awake(worker) -> None:
    data = batch()
    iteration(worker, 0, data)
    worker.engine.log.clear()
    worker.engine.fail = {"sync"}
    with pytest.raises(RuntimeError, match="sync failed"):
        worker.sync_rollout_weights()  # woke the engine, then failed
    worker.reset_sync()  # (before a retried weight sync)
    worker.sync_rollout_weights()
    worker.engine.fail = {"generate"}
    with pytest.raises(RuntimeError, match="generate failed"):
        worker.generate([[5, 6]], SAMPLING, seed=1)
    worker.generate([[5, 6]], SAMPLING, seed=1)
    assert worker.engine.log == [
        ("wake",),
        ("sync", 1),
        ("sync", 1),
        ("generate",),
        ("generate",),
    ]
    # a failed sleep is tried again by the next trainer step
    worker.engine.fail = {"sleep"}
    with pytest.raises(RuntimeError, match="sleep failed"):
        worker.compute_logprobs(data)
    worker.compute_logprobs(data)
    assert worker.engine.log[-2:] == [("sleep",), ("sleep",)] and not worker.engine.awake


def test_rollout_workers_pass_their_assigned_device(recording_engine, tiny_dir, monkeypatch):
    """A separate rollout worker hands its engine the device Ray assigned it, not cuda:0."""
    from infra.cluster import worker_base as base

    monkeypatch.setattr(base, "assigned_device", lambda what: torch.device("cuda", 1))
    worker = LLMRolloutWorker(config(tiny_dir), 0, ())
    assert worker.engine.device == worker.device == torch.device("cuda", 1)
    assert worker.engine.collocated is False
