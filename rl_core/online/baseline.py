"""Advantages of single responses (``group_size: 1``): raw rewards or a running baseline.

Online feedback gives one response per prompt, so no group mean is there to subtract. As
RLinf's online runner does, the advantage is the reward itself (``none``) or the reward
minus a running mean of earlier rewards (``running_mean``, an exponential moving average
updated after each batch, checkpointed with the run so a resumed run continues exactly).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rl_core.registry import Registry


@dataclass
class RunningMeanBaseline:
    """An exponential moving average of rewards.

    Attributes:
        momentum: Weight of the old mean at each update, in ``[0, 1)``.
        mean: The current mean (None before the first batch: the batch's own mean is used).
    """

    momentum: float = 0.9
    mean: float | None = None

    def advantages(self, rewards: np.ndarray) -> np.ndarray:
        """``rewards`` minus the mean before this batch, then the mean is updated."""
        rewards = np.asarray(rewards, dtype=np.float64)
        batch_mean = float(rewards.mean()) if rewards.size else 0.0
        base = batch_mean if self.mean is None else self.mean
        out = rewards - base
        if rewards.size:
            self.mean = (
                batch_mean
                if self.mean is None
                else self.momentum * self.mean + (1.0 - self.momentum) * batch_mean
            )
        return out.astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps."""
        return {"momentum": self.momentum, "mean": self.mean}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint's state."""
        self.momentum = float(state["momentum"])
        self.mean = None if state["mean"] is None else float(state["mean"])


#: ``feedback.baseline`` → ``fn(rewards, running_mean_state) -> advantages``.
BASELINES: Registry[Callable[[np.ndarray, RunningMeanBaseline], np.ndarray]] = Registry(
    "single-response baseline"
)
BASELINES.register("none", lambda rewards, state: np.asarray(rewards, dtype=np.float32))
BASELINES.register("running_mean", lambda rewards, state: state.advantages(rewards))


def single_response_advantages(
    rewards: np.ndarray, baseline: str, state: RunningMeanBaseline
) -> np.ndarray:
    """Advantages of one batch of single responses.

    Args:
        rewards: One reward per response.
        baseline: A :data:`BASELINES` name: ``none`` (the rewards) or ``running_mean``
            (:class:`RunningMeanBaseline`).
        state: The running mean (updated by ``running_mean``).

    Raises:
        RegistryError: An unknown baseline (the message lists the known ones).
    """
    return BASELINES.get(baseline)(rewards, state)
