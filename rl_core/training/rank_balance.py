"""Rows of a batch split across data-parallel ranks with about equal tokens on each.

Responses of one batch differ in length by 10x and more at reasoning lengths; split by
row count alone, one rank may get most of the long ones and every other rank waits for it.
:func:`balanced_split` gives every rank the same number of rows (as an even split would,
so minibatches and micro-batches stay the same size) and about the same number of tokens
(verl's ``balance_batch``): rows are taken longest first, each to the rank with the fewest
tokens so far that still has room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def balanced_split(lengths: Sequence[int], parts: int) -> list[list[int]]:
    """Indices of ``lengths`` in ``parts`` groups of even size and about equal token sums.

    Args:
        lengths: Tokens of each row.
        parts: Groups (data-parallel ranks).

    Returns:
        ``parts`` lists of row indices (each ascending); their sizes are those of
        ``numpy.array_split`` (differing by at most one, larger first).
    """
    sizes = [len(p) for p in np.array_split(np.arange(len(lengths)), parts)]
    groups: list[list[int]] = [[] for _ in range(parts)]
    loads = [0] * parts
    for row in sorted(range(len(lengths)), key=lambda i: (-int(lengths[i]), i)):
        open_parts = [p for p in range(parts) if len(groups[p]) < sizes[p]]
        target = min(open_parts, key=lambda p: (loads[p], p))
        groups[target].append(row)
        loads[target] += int(lengths[row])
    return [sorted(g) for g in groups]


def imbalance(lengths: Sequence[int], groups: list[list[int]]) -> float:
    """The largest group's tokens over the mean group's (1.0: perfectly even)."""
    sums = [sum(int(lengths[i]) for i in g) for g in groups]
    mean = sum(sums) / max(len(sums), 1)
    return max(sums) / mean if mean else 1.0


def row_lengths(arrays: Mapping[str, np.ndarray]) -> list[int]:
    """Real tokens (prompt + response) of each row of a padded batch (numpy arrays)."""
    return (arrays["prompt_mask"].sum(axis=1) + arrays["response_mask"].sum(axis=1)).tolist()
