"""Micro-batches of a trainer rank: by rows or by a token budget, packed or trimmed.

A minibatch is computed in micro-batches (gradient accumulation). Two ways to cut it:

* by rows (``actor.micro_batch_size``): consecutive rows, ``micro_batch_size`` at a time;
* by tokens (``actor.max_tokens_per_micro_batch``, verl's ``use_dynamic_bsz`` with
  ``ppo_max_token_len_per_gpu``): rows sorted longest first and each put into the first
  micro-batch it fits (first-fit decreasing), so every micro-batch holds at most that many
  real tokens (prompt + response) whatever the rows' lengths: long responses go few to a
  micro-batch, short ones many. A row longer than the budget gets a micro-batch alone.

Each micro-batch is then packed into one sequence (``actor.packing``; the policy computes
on real tokens only, :mod:`rl_core.llm.packing`) or trimmed to its own longest row
(:func:`~rl_core.llm.packing.trim_padding`). How a minibatch is cut never changes its loss:
the update weights every token by the *global* minibatch's totals
(:mod:`rl_core.training.llm_update`), so the micro-batches' gradients add up to the same sum.

Sharded trainers (FSDP2) gather parameters in every forward pass, so all ranks must run
the same number of micro-batches: :func:`micro_batches` agrees on the largest count over
the ranks, splits its own micro-batches further to reach it and, where a rank has fewer
rows than that, adds filler passes whose loss counts zero.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from rl_core.llm.packing import real_lengths, trim_padding

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MicroBatching:
    """How a trainer rank cuts its minibatches.

    Attributes:
        rows: Rows per micro-batch when cutting by rows.
        max_tokens: Real tokens per micro-batch (None: cut by rows).
        packed: Pack each micro-batch into one sequence (policies that support it).
        trim: Unpacked micro-batches are cut to their own longest row (False: they keep
            the batch's width, fixed shapes).
    """

    rows: int
    max_tokens: int | None = None
    packed: bool = False
    trim: bool = True

    @classmethod
    def of(cls, actor: Any, rows: int | None = None) -> MicroBatching:
        """The ``actor`` section's settings (``rows``: a backend's own micro-batch size)."""
        return cls(
            rows=int(rows or actor.micro_batch_size),
            max_tokens=actor.max_tokens_per_micro_batch,
            packed=actor.packing,
        )


@dataclass(frozen=True)
class MicroBatch:
    """One forward/backward pass of a rank.

    Attributes:
        inputs: The rows (packed by the policy, or already trimmed).
        rows: Their indices in the batch that was cut.
        packed: Whether the policy packs them.
        filler: A pass run only to keep the ranks in step: its loss must count zero.
    """

    inputs: dict[str, torch.Tensor]
    rows: tuple[int, ...]
    packed: bool
    filler: bool = False


def first_fit_decreasing(lengths: list[int], budget: int) -> list[list[int]]:
    """Row indices of each bin: rows longest first, each into the first bin it fits.

    Ties keep row order, so the bins depend on the lengths alone. A row longer than
    ``budget`` gets a bin of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    loads: list[int] = []
    for row in order:
        for b, load in enumerate(loads):
            if load + lengths[row] <= budget:
                bins[b].append(row)
                loads[b] += lengths[row]
                break
        else:
            bins.append([row])
            loads.append(lengths[row])
    return [sorted(b) for b in bins]


def _split_to(bins: list[list[int]], count: int, lengths: list[int]) -> list[list[int]]:
    """Split the heaviest splittable bins in two until there are ``count`` (or no more rows)."""
    bins = [list(b) for b in bins]
    while len(bins) < count:
        splittable = [b for b in range(len(bins)) if len(bins[b]) > 1]
        if not splittable:
            break
        heaviest = max(splittable, key=lambda b: (sum(lengths[i] for i in bins[b]), -b))
        rows = bins.pop(heaviest)
        half = len(rows) // 2
        bins[heaviest:heaviest] = [rows[:half], rows[half:]]
    return bins


def micro_batch_rows(
    lengths: list[int], batching: MicroBatching, count: int | None = None
) -> list[list[int]]:
    """Row indices of each micro-batch of rows with ``lengths`` real tokens.

    Args:
        lengths: Real tokens of each row.
        batching: Rows per micro-batch, or a token budget.
        count: At least this many micro-batches (the ranks' agreed count), if the rows allow.
    """
    n = len(lengths)
    if not n:
        return []
    if batching.max_tokens is None:
        parts = max(-(-n // batching.rows), min(count or 0, n))
        bounds = [round(i * n / parts) for i in range(parts + 1)]  # as split_rows cuts
        return [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    bins = first_fit_decreasing(lengths, batching.max_tokens)
    over = [lengths[b[0]] for b in bins if len(b) == 1 and lengths[b[0]] > batching.max_tokens]
    if over:
        logger.warning(
            "%d row(s) of up to %d tokens exceed actor.max_tokens_per_micro_batch = %d: each "
            "is a micro-batch of its own",
            len(over),
            max(over),
            batching.max_tokens,
        )
    return _split_to(bins, count or 0, lengths)


def largest_over_ranks(count: int, device: torch.device | str, world_size: int) -> int:
    """The largest ``count`` of every rank (an all-reduce when ranks exist; a collective)."""
    if world_size <= 1 or not (dist.is_available() and dist.is_initialized()):
        return count
    value = torch.tensor([float(count)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return int(value.item())


def micro_batches(
    batch: dict[str, torch.Tensor],
    batching: MicroBatching | int,
    packs: bool,
    world_size: int = 1,
) -> list[MicroBatch]:
    """Cut this rank's ``batch`` into the passes every rank runs the same number of.

    Args:
        batch: This rank's rows of one minibatch (``[N, …]`` tensors).
        batching: How to cut it (an int: that many rows per micro-batch, unpacked).
        packs: The policy computes packed rows (else micro-batches are trimmed).
        world_size: Ranks that must agree on the count (collective when more than one).

    Returns:
        The micro-batches, then any filler passes (copies of the first row).
    """
    if isinstance(batching, int):
        batching = MicroBatching(rows=batching)
    lengths = [int(x) for x in real_lengths(batch).tolist()]
    rows = micro_batch_rows(lengths, batching)
    device = batch["response_ids"].device
    count = largest_over_ranks(len(rows), device, world_size)
    if count > len(rows):
        rows = micro_batch_rows(lengths, batching, count)
    packed = batching.packed and packs
    out = []
    for index in rows:
        part = {k: v[index] for k, v in batch.items()}
        if not packed and batching.trim:
            part = trim_padding(part)
        out.append(MicroBatch(part, tuple(index), packed))
    if out:
        for _ in range(count - len(out)):
            filler = _first_row(out[0].inputs)
            out.append(MicroBatch(filler, out[0].rows[:1], packed, filler=True))
    return out


def _first_row(part: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v[:1] for k, v in part.items()}
