"""DAPO's data-side pieces: dynamic sampling and overlong reward shaping.

Source: Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale".

Clip-higher is the asymmetric clip of the ``ppo`` loss (``clip_ratio_high`` >
``clip_ratio_low``) and the token-level loss is the ``token-mean`` aggregation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from rl_core.algorithms.groups import GroupIndex, Groups

T = TypeVar("T")


def informative_groups(
    scores: torch.Tensor,
    group_index: GroupIndex | None,
    group_size: int | None = None,
    tol: float = 1e-6,
) -> torch.Tensor:
    """Which rows to keep under dynamic sampling (DAPO §3.2): those of informative groups.

    A group whose responses all got the same reward has zero advantage for every token and
    only dilutes the batch; DAPO drops it and samples more prompts instead.

    Args:
        scores: ``[B]`` outcome rewards.
        group_index: ``[B]`` the prompt group of each row (:mod:`rl_core.algorithms.groups`).
        group_size: Rows every group must have (None: any number).
        tol: Rewards closer than this count as equal.

    Returns:
        ``[B]`` bool: True on the rows of groups whose rewards are not all equal.

    Raises:
        GroupIndexError: ``group_index`` is missing or a group has the wrong size.
    """
    if scores.dim() != 1:
        raise ValueError(f"scores must be 1-D, got shape {tuple(scores.shape)}")
    layout = Groups.of(group_index, scores.shape[0], group_size, "dynamic sampling")
    values, inverse = scores.float(), layout.inverse.to(scores.device)
    empty = torch.zeros(layout.ids.numel(), dtype=values.dtype, device=values.device)
    high = empty.scatter_reduce(0, inverse, values, "amax", include_self=False)
    low = empty.scatter_reduce(0, inverse, values, "amin", include_self=False)
    return ((high - low) > tol)[inverse]


def overlong_penalty(
    lengths: torch.Tensor, max_length: int, buffer_length: int, penalty_factor: float = 1.0
) -> torch.Tensor:
    """Soft overlong punishment (DAPO §3.4, eq. 13), added to the outcome reward.

    With ``L_max = max_length`` and ``L_cache = buffer_length``::

        0                                     if |y| <= L_max - L_cache
        ((L_max - L_cache) - |y|) / L_cache   if L_max - L_cache < |y| <= L_max
        -1                                    if |y| > L_max

    times ``penalty_factor``.

    Args:
        lengths: ``[B]`` response lengths in tokens.
        max_length: ``L_max``, the longest response allowed.
        buffer_length: ``L_cache`` (> 0, <= ``max_length``), the soft zone before it.
        penalty_factor: Scale of the penalty.
    """
    if not 0 < buffer_length <= max_length:
        raise ValueError(
            f"buffer_length must be in (0, max_length={max_length}], got {buffer_length}"
        )
    lengths = lengths.float()
    expected = max_length - buffer_length
    penalty = torch.clamp((expected - lengths) / buffer_length, max=0.0)
    penalty = torch.where(lengths > max_length, torch.full_like(penalty, -1.0), penalty)
    return penalty * penalty_factor


def fill_with_informative_groups(
    sample_round: Callable[[int], T],
    score: Callable[[T], Sequence[float]],
    group_index: Callable[[T], GroupIndex],
    group_size: int,
    target: int,
    dynamic: bool,
    max_rounds: int,
) -> tuple[list[tuple[T, list[int]]], int]:
    """Sample rounds of groups until ``target`` rows are informative (DAPO dynamic sampling).

    Without dynamic sampling one round is taken whole. With it, groups whose rewards are
    all equal are set aside; after ``max_rounds`` rounds the batch is topped up with set-aside
    groups in order, so it always has ``target`` rows when enough were sampled. Groups are
    taken whole, in the order of their group index, each with its rows in batch order.

    Args:
        sample_round: ``round_index -> batch`` of ``group_size``-row groups.
        score: Outcome rewards of a round's rows.
        group_index: The group index of a round's rows.
        group_size: Rows per group.
        target: Rows wanted.
        dynamic: Keep only informative groups.
        max_rounds: Most rounds to sample (dynamic sampling).

    Returns:
        ``(picks, rounds)``: ``picks`` lists ``(round batch, row indices)`` in the order the
        rows make the batch (at most ``target`` rows in all); ``rounds`` sampled.
    """
    kept: list[tuple[T, list[int]]] = []
    spare: list[tuple[T, list[int]]] = []
    count, rounds = 0, 0
    while count < target:
        fresh = sample_round(rounds)
        rounds += 1
        if not dynamic:
            kept, count = [(fresh, list(range(target)))], target
            break
        scores, index = torch.tensor(list(score(fresh))), group_index(fresh)
        keep = informative_groups(scores, index, group_size).tolist()
        for rows in Groups.of(index, len(keep), group_size, "dynamic sampling").rows():
            informative = keep[rows[0]]
            (kept if informative else spare).append((fresh, rows))
            count += len(rows) if informative else 0
        if rounds >= max_rounds:
            break
    for fresh, rows in spare:  # top up with set-aside groups, in order
        if count >= target:
            break
        take = rows[: target - count]
        kept.append((fresh, take))
        count += len(take)
    picks, total = [], 0
    for fresh, rows in kept:  # trim to target rows
        take = rows[: max(0, target - total)]
        if take:
            picks.append((fresh, take))
            total += len(take)
    return picks, rounds
