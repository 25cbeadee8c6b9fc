"""Exactly-once steps: every step of iteration k runs to completion once, whatever retries.

Each step of an iteration has an identity (run, iteration, step) and a recorded completion
in the driver (:class:`IterationJournal`). When the iteration flow is retried (a failed
task, a hung worker killed at its deadline, a dead worker), work resumes at the first step
that did not complete:

- completed steps are not run again (their recorded results are reused), so an update is
  never applied twice and env steps are never counted twice;
- a step that changes worker state (rollout, update) was snapshotted in memory before its
  first attempt; a retry restores that snapshot first, so a half-done step is undone;
- if a worker holding state died, its state is gone: the dead workers are rebuilt and the
  run rewinds to its last committed checkpoint (or to its start) and replays from there.
  Replays are deterministic, so the run ends bit-identical. Rewinds count against the
  retry budget: a worker that dies at the same iteration every time ends the run with a
  clear error instead of looping.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infra.driver.step_runtime import StepResult
from rl_core.steps import STATEFUL_STEPS, Step

if TYPE_CHECKING:
    from infra.driver.session import TrainSession

logger = logging.getLogger(__name__)
#: Retries of an iteration flow, and rewinds allowed per iteration.
ITERATION_RETRIES = 2


class RewindLimitError(RuntimeError):
    """Workers died at the same iteration more often than the retry budget allows."""


class StoppedBeforeRetryError(RuntimeError):
    """A stop was requested: a retried iteration does not rebuild workers, the run stops.

    Prefect cancels a deployment run by signalling its process group, which holds a local
    Ray cluster's processes too: the workers stop with the same signal, and rebuilding them
    (with Ray's own processes gone) would outlive the cancellation's grace period. The run
    stops at its last committed checkpoint instead, releasing its lease.
    """


@dataclass
class IterationJournal:
    """Which steps of one iteration started and completed (with their results)."""

    iteration: int
    started: set[str] = field(default_factory=set)
    completed: dict[str, Any] = field(default_factory=dict)
    attempts: int = 0


class IterationGuard:
    """Runs the steps of a session's iterations exactly once.

    Args:
        session: The :class:`~infra.driver.session.TrainSession` (runtime, store, state).
        max_rewinds: Rewinds allowed per iteration (the iteration flow's retries).
    """

    def __init__(self, session: TrainSession, max_rewinds: int) -> None:
        self.session = session
        self.max_rewinds = max_rewinds
        self.journal = IterationJournal(-1)
        self.rewinds: dict[int, int] = {}

    def begin(self, iteration: int, attempt: int) -> int | None:
        """Start (or resume) ``iteration``; returns the step rewound to, if workers died.

        Args:
            iteration: Iteration index.
            attempt: The iteration flow run's attempt (1 first, 2+ on retries).
        """
        if self.journal.iteration != iteration:
            self.journal = IterationJournal(iteration)
        self.journal.attempts += 1
        if attempt <= 1:
            return None
        from infra.driver.session import STOP_REQUESTED  # (session imports this module)

        if STOP_REQUESTED.is_set():
            raise StoppedBeforeRetryError(
                f"iteration {iteration}: a stop was requested; its retry does not rebuild "
                "workers (the run stops at its last committed checkpoint)"
            )
        rebuilt = self.session.runtime.repair()
        if not rebuilt:
            done = ", ".join(self.journal.completed) or "none"
            logger.warning("iteration %d: retrying (steps already done: %s)", iteration, done)
            return None
        logger.warning("iteration %d: rebuilt dead workers %s", iteration, rebuilt)
        return self.rewind(iteration)

    def recover(self, iteration: int) -> int | None:
        """After ``iteration`` failed for good: rebuild dead workers and rewind, if any died.

        The iteration flow's retries normally do this (:meth:`begin`). An iteration can also
        end failed without its retry having run: when the Prefect API answers the failed
        state too late, the client sends it again, and the API accepts the resent state as
        final (the retry it had scheduled is dropped). A dead worker must not end the run
        then either. The rewind counts against the same budget.

        Returns:
            The step rewound to, or None when no worker had died.

        Raises:
            RewindLimitError: More than ``max_rewinds`` rewinds at this iteration.
        """
        rebuilt = self.session.runtime.repair()
        if not rebuilt:
            return None
        logger.warning("iteration %d failed with dead workers; rebuilt %s", iteration, rebuilt)
        return self.rewind(iteration)

    def attempts_left(self, iteration: int) -> int:
        """Attempts of ``iteration`` its retry budget still allows (after :meth:`begin` calls)."""
        used = self.journal.attempts if self.journal.iteration == iteration else 0
        return max(0, 1 + self.max_rewinds - used)

    def rewind(self, iteration: int) -> int:
        """Restore the last committed checkpoint (or the run's start); returns its step.

        Raises:
            RewindLimitError: More than ``max_rewinds`` rewinds at this iteration.
        """
        count = self.rewinds.get(iteration, 0) + 1
        self.rewinds[iteration] = count
        if count > self.max_rewinds:
            raise RewindLimitError(
                f"iteration {iteration}: workers died {count} times (retry budget "
                f"{self.max_rewinds}); the failure repeats, so the run stops here. The last "
                "committed checkpoint is kept; rerun to resume after fixing the cause"
            )
        self.journal = IterationJournal(-1)
        step = self.session.rewind()
        logger.warning(
            "iteration %d: rewound to step %d (rewind %d of %d)",
            iteration,
            step,
            count,
            self.max_rewinds,
        )
        return step

    def run(self, step: Step | str, call: Callable[[], Any]) -> Any:
        """Run ``step`` of the current iteration unless it already completed.

        Args:
            step: A :class:`~rl_core.steps.Step`, or the name of a driver bookkeeping step.
            call: Does the step's work; its result is recorded.
        """
        journal = self.journal
        if step in journal.completed:
            return journal.completed[step]
        runtime = self.session.runtime
        prepared = time.perf_counter()
        if step in STATEFUL_STEPS:
            if step in journal.started:
                runtime.restore(step)
            else:
                runtime.snapshot(step)
        elif step in journal.started:
            runtime.before_retry(step)
        prepared = time.perf_counter() - prepared
        journal.started.add(step)
        self.session.faults.driver(step, journal.iteration)
        result = call()
        if step in STATEFUL_STEPS and isinstance(result, StepResult):
            # worker time spent keeping the step undoable counts as the step's compute
            result.seconds += prepared
            result.metrics[f"time/snapshot_{step}"] = prepared
        journal.completed[step] = result
        return result
