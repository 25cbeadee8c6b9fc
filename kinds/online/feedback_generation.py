"""Training batches of an online run: the feedback users gave on served completions.

:class:`FeedbackGeneration` is the online run's generation strategy (the rollout step's
``take``). It claims the next ``online.batch_size`` feedback records for the iteration
(:meth:`~kinds.online.store.FeedbackStore.claim`: a retried or resumed iteration gets the
same records, no record is in two batches) and turns them into a batch without generating
or tokenizing anything: the stored prompt and completion token ids, the serve-time
log-probs as the behaviour policy's, the feedback's reward minus the running baseline as
the score. With the simulated user on, the user first asks the endpoint what the batch
still lacks (lockstep: each batch is answered by the version just served).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import numpy as np

from infra.checkpoint.layout import JSON, ONLINE_STATE_FILE, StatePart
from kinds.online.store import FeedbackRecord, FeedbackStore
from kinds.reasoning.responses import ResponseBatch
from rl_core.data import PromptSample
from rl_core.online import RunningMeanBaseline, feedback_reward, single_response_advantages

logger = logging.getLogger(__name__)
_POLL_SECONDS = 0.5
_PROGRESS_SECONDS = 10.0


class FeedbackWaitTimeout(TimeoutError):
    """Fewer feedback records than a batch needs arrived within ``online.wait_timeout_s``."""


class FeedbackGeneration:
    """Each rollout step takes the next batch of feedback records.

    Args:
        store: The run's feedback store.
        run_name: The run (claims are keyed by run and iteration).
        online: The ``online`` config section.
        user: The simulated user (with ``run(count)`` and a ``plan``), or None.
    """

    def __init__(self, store: FeedbackStore, run_name: str, online: Any, user: Any = None) -> None:
        self.store = store
        self.run_name = run_name
        self.online = online
        self.user = user
        self.baseline = RunningMeanBaseline(online.baseline_momentum)
        #: The last batch's rewards before the baseline (the batch's scores are after it).
        self.rewards = np.zeros(0)
        self._kept: dict[str, Any] = {}

    # -- the batch ------------------------------------------------------------------------
    def take(self, iteration: int, version: int) -> tuple[ResponseBatch, dict[str, float], int]:
        """The iteration's batch of feedback (waiting for it), and its metrics."""
        size = self.online.batch_size
        records = self.store.claim(self.run_name, iteration, size)
        if records is None and self.user is not None:
            self.user.run(max(size - self.store.pending(), 0))
        records = records or self._wait_for(iteration, size)
        rewards = np.array(
            [feedback_reward(r.feedback, r.generation.completion) for r in records],
            dtype=np.float64,
        )
        before = self.baseline.mean
        scores = single_response_advantages(rewards, self.online.baseline, self.baseline)
        self.rewards = rewards
        batch = batch_of(records)
        batch.scores = scores.astype(np.float32)
        return batch, self._metrics(records, rewards, version, before), 1

    def _wait_for(self, iteration: int, size: int) -> list[FeedbackRecord]:
        start = last_note = time.monotonic()
        limit = self.online.wait_timeout_s
        while True:
            records = self.store.claim(self.run_name, iteration, size)
            if records is not None:
                return records
            now = time.monotonic()
            if limit is not None and now - start > limit:
                raise FeedbackWaitTimeout(
                    f"iteration {iteration}: {self.store.pending()} of {size} feedback records "
                    f"after {limit:.0f} s (online.wait_timeout_s); the records stay stored"
                )
            if now - last_note > _PROGRESS_SECONDS:
                logger.info(
                    "iteration %d: waiting for feedback, %d of %d records",
                    iteration,
                    self.store.pending(),
                    size,
                )
                last_note = now
            time.sleep(_POLL_SECONDS)

    def _metrics(
        self, records: list[FeedbackRecord], rewards: np.ndarray, version: int, before: float | None
    ) -> dict[str, float]:
        judged = [r.feedback.accepted for r in records if r.feedback.accepted is not None]
        staleness = [max(version - r.generation.weight_version, 0) for r in records]
        metrics = {
            "online/reward_mean": float(rewards.mean()),
            "online/records": float(len(records)),
            "online/staleness_mean": float(np.mean(staleness)),
            "online/pending": float(self.store.pending()),
            "online/baseline": float(before if before is not None else rewards.mean()),
        }
        if judged:
            metrics["online/acceptance_rate"] = float(np.mean(judged))
        return metrics

    # -- retries and checkpoints ---------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The running baseline and the simulated user's generator."""
        state: dict[str, Any] = {"baseline": self.baseline.state_dict()}
        if self.user is not None:
            state["user_rng"] = self.user.plan.rng.bit_generator.state
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state`."""
        self.baseline.load_state_dict(state["baseline"])
        if self.user is not None and "user_rng" in state:
            self.user.plan.rng.bit_generator.state = state["user_rng"]

    def snapshot(self) -> None:
        """Keep the baseline (a retried rollout claims the same records again)."""
        self._kept = json.loads(json.dumps(self.state()))

    def restore(self, timeout: float) -> None:
        """Put back what :meth:`snapshot` kept."""
        if self._kept:
            self.load_state(self._kept)

    def checkpoint_part(self, timeout: float) -> StatePart:
        """The baseline (and user) state (:data:`~infra.checkpoint.layout.ONLINE_STATE_FILE`)."""
        return StatePart(
            ONLINE_STATE_FILE, JSON, self.state, lambda state, step: self.load_state(state)
        )


def batch_of(records: list[FeedbackRecord]) -> ResponseBatch:
    """The records as a training batch: one group per response, serve-time tokens."""
    return ResponseBatch(
        samples=[
            PromptSample(r.generation.prompt, "", {"request_id": r.generation.request_id})
            for r in records
        ],
        prompt_ids=[list(r.generation.prompt_ids) for r in records],
        response_ids=[list(r.generation.completion_ids) for r in records],
        rollout_logprobs=[list(r.generation.logprobs) for r in records],
        finished=[r.generation.finished for r in records],
        group_index=list(range(len(records))),
    )
