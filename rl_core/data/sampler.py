"""Deterministic, resumable batches of prompt indices over a fixed list of samples."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)


class PromptSampler:
    """Walks epoch permutations of ``range(num_samples)`` in batches of ``batch_size``.

    Epoch ``e`` visits the indices in the order ``numpy.random.default_rng(seed + e)
    .permutation(num_samples)`` (or in order with ``shuffle=False``); a batch that reaches
    the end of an epoch continues with the next one, so every epoch visits every index once
    and a batch may span two epochs. The position is saved by :meth:`state_dict` and
    restored by :meth:`load_state_dict`, after which the batches are the same as those of a
    sampler that was never interrupted.

    Args:
        num_samples: Size of the sample list (>= 1).
        batch_size: Indices per batch (>= 1); it may exceed ``num_samples``.
        seed: Base seed (>= 0).
        shuffle: Whether to permute each epoch.

    Raises:
        ValueError: An argument is out of range.
    """

    def __init__(self, num_samples: int, batch_size: int, seed: int, shuffle: bool = True):
        for name, value, low in (
            ("num_samples", num_samples, 1),
            ("batch_size", batch_size, 1),
            ("seed", seed, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        self.num_samples = int(num_samples)
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.shuffle = shuffle
        self._epoch = 0
        self._position = 0
        self._consumed = 0
        self._order: np.ndarray | None = None

    @property
    def epoch(self) -> int:
        """The epoch the next index comes from (0-based)."""
        return self._epoch

    @property
    def consumed(self) -> int:
        """Indices drawn so far, over all epochs."""
        return self._consumed

    def _epoch_order(self) -> np.ndarray:
        if self._order is None:
            if self.shuffle:
                rng = np.random.default_rng(self.seed + self._epoch)
                self._order = rng.permutation(self.num_samples)
            else:
                self._order = np.arange(self.num_samples)
        return self._order

    def next_indices(self) -> list[int]:
        """Return the next batch: ``batch_size`` indices into the sample list."""
        batch: list[int] = []
        while len(batch) < self.batch_size:
            order = self._epoch_order()
            take = min(self.batch_size - len(batch), self.num_samples - self._position)
            batch.extend(order[self._position : self._position + take].tolist())
            self._position += take
            if self._position == self.num_samples:
                self._epoch += 1
                self._position = 0
                self._order = None
        self._consumed += len(batch)
        return batch

    def state_dict(self) -> dict[str, int]:
        """The position of the sampler, as JSON-able ints."""
        return {
            "epoch": self._epoch,
            "position": self._position,
            "seed": self.seed,
            "consumed": self._consumed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a state saved by :meth:`state_dict`.

        The saved seed replaces this sampler's (with a warning if they differ), so the
        batches continue exactly where the saved sampler stopped. ``batch_size`` may differ.

        Args:
            state: ``{"epoch", "position", "seed", "consumed"}``.

        Raises:
            ValueError: A key is missing or not an int, or the state does not fit
                ``num_samples`` (it was saved for a sample list of another size).
        """
        values: dict[str, int] = {}
        for key in ("epoch", "position", "seed", "consumed"):
            value = state.get(key) if isinstance(state, dict) else None
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"sampler state: {key!r} must be an int, got {value!r}")
            if value < 0:
                raise ValueError(f"sampler state: {key!r} must be >= 0, got {value}")
            values[key] = int(value)
        epoch, position, consumed = values["epoch"], values["position"], values["consumed"]
        if position >= self.num_samples or consumed != epoch * self.num_samples + position:
            raise ValueError(
                f"sampler state {values} does not fit num_samples={self.num_samples} "
                "(was it saved for a different number of samples?)"
            )
        if values["seed"] != self.seed:
            logger.warning(
                "sampler state has seed %d, this sampler %d: continuing with the saved seed",
                values["seed"],
                self.seed,
            )
        self.seed = values["seed"]
        self._epoch, self._position, self._consumed = epoch, position, consumed
        self._order = None
