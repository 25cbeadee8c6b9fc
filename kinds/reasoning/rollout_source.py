"""What generating training batches needs, handed to a generation strategy explicitly.

A reasoning run generates its training batches one of two ways
(:class:`~kinds.reasoning.sync_generation.SyncGeneration` or
:class:`~kinds.reasoning.pipelined_generation.PipelinedGeneration`); both draw prompts from
:class:`TrainPrompts` and send them to the rollout workers of a :class:`RolloutSource`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from infra.checkpoint.layout import StatePart
from infra.cluster.dispatch import PerRank
from infra.cluster.worker_group import WorkerGroup
from kinds.reasoning.responses import ResponseBatch
from rl_core.algorithms import consecutive_groups
from rl_core.data import PromptSample, PromptSampler
from rl_core.seeding import generation_rank_seed, generation_round_seed


@dataclass
class TrainPrompts:
    """The training prompts and the cursor that draws them.

    Attributes:
        samples: Each training prompt's row (question, answer, fields).
        token_ids: Each training prompt's token ids.
        sampler: The prompt cursor (checkpointed with the run).
        group_size: Responses per prompt (``algorithm.group_size``).
        seed: The run's seed (``run.seed``).
    """

    samples: list[PromptSample]
    token_ids: list[list[int]]
    sampler: PromptSampler
    group_size: int
    seed: int

    def draw_rows(self, round_index: int) -> tuple[list[int], list[int], int]:
        """The next prompts, each ``group_size`` times, their group index and generation seed."""
        consumed = self.sampler.consumed
        indices = self.sampler.next_indices()
        k = self.group_size
        rows = [i for i in indices for _ in range(k)]
        groups = consecutive_groups(len(indices), k).tolist()
        return rows, groups, generation_round_seed(self.seed, consumed, round_index)


@dataclass
class RolloutSource:
    """The rollout workers and the prompts they generate training batches from.

    Attributes:
        rollout: The workers that generate (the trainer ranks with the hybrid engine).
        prompts: The training prompts.
        sampling: A fresh dict of ``SamplingParams`` fields at each call.
        timeout: Seconds a rollout step may wait for its batch (``timeouts.rollout``).
        agent: The ``agent`` section as a dict when an agent loop makes multi-turn
            trajectories (None: one response per prompt).
    """

    rollout: WorkerGroup
    prompts: TrainPrompts
    sampling: Callable[[], dict[str, Any]]
    timeout: float
    agent: dict[str, Any] | None = None


#: Per-row lists of an agent loop's output besides those of a single generation.
AGENT_KEYS = ("versions", "loss_masks", "trajectories")


def generate_split(
    group: WorkerGroup,
    prompts: list[list[int]],
    sampling: dict[str, Any],
    seed: int,
    timeout: float,
    step: str,
    agent: dict[str, Any] | None = None,
) -> tuple[dict[str, list], float]:
    """Generate one response (or trajectory) per prompt, split across ``group``'s workers.

    Args:
        group: The rollout workers.
        prompts: Token ids of each prompt.
        sampling: ``SamplingParams`` fields.
        seed: Seed of this generation (each worker derives its own from it).
        timeout: Seconds to wait for the workers.
        step: The step generating (named in a timeout's error).
        agent: The ``agent`` section as a dict: each worker runs the agent loop on its
            shard (``run_agents``) instead of one generation per prompt (None).

    Returns:
        ``response_ids``, ``logprobs`` and ``finished`` of every row, in prompt order (with
        an agent loop also ``versions``, ``loss_masks`` and ``trajectories``), and the
        slowest worker's seconds.
    """
    seeds = PerRank([generation_rank_seed(seed, rank) for rank in range(len(group))])
    if agent is None:  # contiguous prompts per worker (the declared split)
        outs = group.generate(prompts, sampling, seeds, within=(step, timeout))
    else:
        outs = group.run_agents(prompts, sampling, seeds, agent, within=(step, timeout))
    keys = ("response_ids", "logprobs", "finished") + (AGENT_KEYS if agent is not None else ())
    merged = {k: [x for o in outs for x in o[k]] for k in keys}
    return merged, max(o["seconds"] for o in outs)


class Generation(Protocol):
    """How a reasoning run's rollout step gets its batch (chosen once, at start-up)."""

    def take(self, iteration: int, version: int) -> tuple[ResponseBatch, dict[str, float], int]:
        """The batch of ``iteration``, its extra metrics and the generation rounds it took."""
        ...

    def snapshot(self) -> None:
        """Keep what a rollout step changes (before it runs)."""
        ...

    def restore(self, timeout: float) -> None:
        """Undo a failed rollout step."""
        ...

    def checkpoint_part(self, timeout: float) -> StatePart | None:
        """What a checkpoint holds besides the prompt cursor (None: nothing).

        It is gathered before the cursor (it may put the cursor back) and put back after
        it (it may read the cursor).
        """
        ...
