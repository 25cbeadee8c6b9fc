"""Many agent loops at once, their generations batched round by round, deterministically.

:func:`run_lockstep` runs one agent loop per prompt, each in its own thread, so that their
tool calls run concurrently (a sandboxed program waits on its subprocess, not on the other
trajectories). Each loop's ``io.generate`` blocks until **every** loop still running has
either asked for its next generation or ended; then one batched call generates all those
requests together. So round ``r`` holds exactly the trajectories that have an ``r``-th
generation, in prompt order, whatever the threads' timing, and round ``r`` is sampled with
the seed ``round_seed(r)``: the same prompts, weights and seed give the same trajectories,
on a rerun as after a resume.

The price of that determinism is that a round waits for the slowest tool call of the round
before it (a tool's wall-clock limit bounds the wait). Engines with continuous batching
could start each request as it comes; they would give up reproducible batches.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rl_core.agents.loops import AgentLoop, Generation, LoopSettings, ModelIO
from rl_core.agents.trajectory import Trajectory

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerationRequest:
    """One trajectory's ask for its next generation.

    Attributes:
        context_ids: The whole context so far (prompt, earlier turns, tool results).
        stop: Texts that end the generation (the parser's end marker).
        max_new_tokens: Most tokens to generate.
    """

    context_ids: list[int]
    stop: tuple[str, ...]
    max_new_tokens: int


#: ``generate_batch(requests, round_index) -> one Generation per request, in order``.
BatchGenerate = Callable[[list[GenerationRequest], int], Sequence[Generation]]


class LoopAborted(RuntimeError):
    """Raised inside an agent loop whose batched generation failed (the loop stops)."""


class _Rounds:
    """The barrier between the loops' threads and the thread that generates."""

    def __init__(self, count: int) -> None:
        self.cond = threading.Condition()
        self.live = set(range(count))
        self.pending: dict[int, GenerationRequest] = {}
        self.results: dict[int, Generation] = {}
        self.failed = False

    def ask(self, index: int, request: GenerationRequest) -> Generation:
        with self.cond:
            if self.failed:
                raise LoopAborted("the batched generation failed")
            self.pending[index] = request
            self.cond.notify_all()
            while index not in self.results:
                if self.failed:
                    raise LoopAborted("the batched generation failed")
                self.cond.wait()
            return self.results.pop(index)

    def leave(self, index: int) -> None:
        with self.cond:
            self.live.discard(index)
            self.pending.pop(index, None)
            self.cond.notify_all()

    def next_round(self) -> list[tuple[int, GenerationRequest]]:
        """Wait until every live loop asked (or ended); the round's requests, in order."""
        with self.cond:
            while self.live and len(self.pending) < len(self.live):
                self.cond.wait()
            batch = sorted(self.pending.items())
            self.pending.clear()
            return batch

    def answer(self, indices: list[int], generations: Sequence[Generation]) -> None:
        with self.cond:
            self.results.update(zip(indices, generations, strict=True))
            self.cond.notify_all()

    def fail(self) -> None:
        with self.cond:
            self.failed = True
            self.cond.notify_all()


def run_lockstep(
    loop: AgentLoop,
    prompts: Sequence[Sequence[int]],
    settings: LoopSettings,
    generate_batch: BatchGenerate,
    tokenize: Callable[[str], list[int]],
    detokenize: Callable[[Sequence[int]], str],
) -> list[Trajectory]:
    """Run ``loop`` once per prompt, all at once (see the module docstring).

    Args:
        loop: The agent loop (``AGENT_LOOPS`` entry).
        prompts: Token ids of each prompt.
        settings: The loops' settings.
        generate_batch: Generates one round's requests (called in this thread only).
        tokenize: Text to ids, without special tokens (called under a lock: tokenizers
            need not be thread-safe).
        detokenize: Ids to text (under the same lock).

    Returns:
        One trajectory per prompt, in prompt order.

    Raises:
        RuntimeError: A loop raised (the first error, naming its prompt, chained), after
            every other loop ended.
        Exception: ``generate_batch`` raised: the loops are stopped and the error re-raised.
    """
    rounds = _Rounds(len(prompts))
    text_lock = threading.Lock()
    trajectories: list[Trajectory | None] = [None] * len(prompts)
    errors: dict[int, BaseException] = {}
    times: list[list[tuple[float, float]]] = [[] for _ in prompts]

    def tokenize_locked(text: str) -> list[int]:
        with text_lock:
            return tokenize(text)

    def detokenize_locked(ids: Sequence[int]) -> str:
        with text_lock:
            return detokenize(ids)

    def run_one(index: int) -> None:
        def generate(context: list[int], stop: tuple[str, ...], limit: int) -> Generation:
            asked = time.time()
            out = rounds.ask(index, GenerationRequest(list(context), tuple(stop), int(limit)))
            times[index].append((asked, time.time()))
            return out

        io = ModelIO(generate, tokenize_locked, detokenize_locked)
        try:
            trajectory = loop(list(prompts[index]), io, settings)
            trajectory.generation_times = times[index]
            trajectories[index] = trajectory
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            errors[index] = exc
        finally:
            rounds.leave(index)

    threads = [
        threading.Thread(target=run_one, args=(i,), name=f"agent-loop-{i}", daemon=True)
        for i in range(len(prompts))
    ]
    for thread in threads:
        thread.start()
    round_index = 0
    try:
        while True:
            batch = rounds.next_round()
            if not batch:
                break
            indices = [i for i, _ in batch]
            logger.debug("agent round %d: %d generations", round_index, len(batch))
            generations = list(generate_batch([r for _, r in batch], round_index))
            if len(generations) != len(batch):
                raise RuntimeError(
                    f"generate_batch returned {len(generations)} generations for "
                    f"{len(batch)} requests"
                )
            rounds.answer(indices, generations)
            round_index += 1
    except BaseException:
        rounds.fail()
        for thread in threads:
            thread.join()
        raise
    for thread in threads:
        thread.join()
    real = {i: e for i, e in errors.items() if not isinstance(e, LoopAborted)}
    if real:
        index = min(real)
        raise RuntimeError(f"agent loop failed on prompt {index}: {real[index]!r}") from real[index]
    return [t for t in trajectories if t is not None]
