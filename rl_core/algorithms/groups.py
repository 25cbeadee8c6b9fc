"""Prompt groups of a batch: which rows are responses to the same prompt.

Every row of a reasoning batch carries the index of its group (``group_index``: ``[B]``
integers, verl's ``uid``). Group-relative advantage estimators (``grpo``, ``dr_grpo``,
``rloo``, ``reinforce_plus_plus_baseline``) and DAPO's dynamic sampling compare a row with
the rows of the same index wherever they sit in the batch, so reordering, filtering or
splitting rows never mixes groups up. Only equality of indices matters: any integers will do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

GroupIndex = torch.Tensor | np.ndarray | Sequence[int]


class GroupIndexError(ValueError):
    """A batch's group index is missing or does not fit its rows."""


def consecutive_groups(num_groups: int, group_size: int) -> np.ndarray:
    """Group index of ``num_groups`` groups of ``group_size`` rows laid out one after another.

    Returns:
        ``[num_groups * group_size]`` int64: ``0, 0, ..., 1, 1, ...``.
    """
    return np.repeat(np.arange(num_groups, dtype=np.int64), group_size)


@dataclass(frozen=True)
class Groups:
    """The rows of each group of a batch (build it with :meth:`of`).

    Attributes:
        ids: ``[G]`` the distinct group indices, ascending.
        counts: ``[G]`` rows of each group.
        order: ``[B]`` row numbers sorted by group; a group's rows keep their batch order.
        inverse: ``[B]`` position in ``ids`` of each row's group.
        size: Rows of every group when they all have the same number, else None.
    """

    ids: torch.Tensor
    counts: torch.Tensor
    order: torch.Tensor
    inverse: torch.Tensor
    size: int | None

    @classmethod
    def of(
        cls,
        group_index: GroupIndex | None,
        num_rows: int,
        group_size: int | None = None,
        user: str = "this estimator",
    ) -> Groups:
        """Check ``group_index`` against the batch and find each group's rows.

        Args:
            group_index: ``[B]`` integer group index of the rows.
            num_rows: ``B``, the rows of the batch.
            group_size: Rows every group must have (None: any number).
            user: What needs the groups, for the error messages.

        Raises:
            GroupIndexError: ``group_index`` is missing, not one integer per row, or a group
                does not have ``group_size`` rows.
        """
        if group_index is None:
            raise GroupIndexError(
                f"{user} needs group_index, the prompt group of every row of the batch"
            )
        if not isinstance(group_index, torch.Tensor):
            group_index = torch.as_tensor(np.asarray(group_index))
        index = group_index.long() if group_index.numel() == 0 else group_index
        if index.dim() != 1 or index.shape[0] != num_rows:
            raise GroupIndexError(
                f"{user}: group_index must hold one entry per row ({num_rows}), got shape "
                f"{tuple(index.shape)}"
            )
        if index.is_floating_point() or index.is_complex() or index.dtype == torch.bool:
            raise GroupIndexError(f"{user}: group_index must hold integers, got {index.dtype}")
        index = index.long()
        ids, inverse, counts = torch.unique(
            index, sorted=True, return_inverse=True, return_counts=True
        )
        if group_size is not None:
            wrong = torch.nonzero(counts != group_size).squeeze(-1)
            if wrong.numel():
                first = int(wrong[0])
                raise GroupIndexError(
                    f"{user} needs groups of group_size={group_size} rows, but group "
                    f"{int(ids[first])} has {int(counts[first])} ({wrong.numel()} of "
                    f"{ids.numel()} groups in {num_rows} rows have the wrong size)"
                )
            size: int | None = group_size
        else:
            size = int(counts[0]) if counts.numel() and bool((counts == counts[0]).all()) else None
        return cls(ids, counts, torch.argsort(index, stable=True), inverse, size)

    def matrix(self, values: torch.Tensor) -> torch.Tensor:
        """``[G, size]``: row ``g`` holds group ``ids[g]``'s values, in batch order.

        Args:
            values: ``[B]`` one value per row.
        """
        if self.size is None:
            raise GroupIndexError("the groups have different numbers of rows")
        return values[self.order.to(values.device)].reshape(self.ids.numel(), self.size)

    def scatter(self, grouped: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`matrix`: ``[G, size]`` values back to their rows, ``[B]``."""
        flat = grouped.reshape(-1)
        out = torch.empty_like(flat)
        out[self.order.to(flat.device)] = flat
        return out

    def rows(self) -> list[list[int]]:
        """Row numbers of each group (in ``ids`` order), each in batch order."""
        return [part.tolist() for part in torch.split(self.order, self.counts.tolist())]


def scored_group_stats(
    groups: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Which entries of ``[G, n]`` group scores are scored (not NaN), how many, their mean.

    A NaN score marks a row nobody could score (a tool's infrastructure failure): the group
    estimators leave it out of its group's statistics and give it advantage 0.

    Returns:
        ``(scored [G, n] bool, count [G, 1], mean [G, 1])``; the mean of a group without
        scored rows is 0.
    """
    scored = ~torch.isnan(groups)
    count = scored.sum(dim=1, keepdim=True)
    total = torch.where(scored, groups, torch.zeros_like(groups)).sum(dim=1, keepdim=True)
    return scored, count, total / count.clamp(min=1)
