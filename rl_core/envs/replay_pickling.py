"""Envs that pickle as a recipe, not as their simulator: settings, seed, actions.

Simulators whose state cannot be saved exactly (ManiSkill3's, LIBERO's) pickle as the
env's constructor settings, the reset seed of the running episode, the actions played since
and the generator that draws the seeds of later resets. Unpickling builds the env again,
resets it with that seed and plays the actions: the same state, bit for bit, where the
simulator is deterministic.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import numpy as np

#: Reset seeds drawn for autoresets lie in ``[0, SEED_RANGE)``.
SEED_RANGE = 2**31 - 1


class ReplayPickling:
    """Mixin: pickling by replay, and the episode seeds it needs.

    The env sets ``_settings`` (its constructor's keyword arguments), calls
    :meth:`_init_replay` when built and :meth:`_start_episode` in ``reset``, appends each
    action it plays to ``_actions``, and has ``reset(seed=...)``,
    ``step_without_observation(action)`` and ``_observation()``: the mixin's ``step`` is
    that step followed by the observation.
    """

    _settings: dict[str, Any]
    _rng: np.random.Generator
    _episode_seed: int | None
    _actions: list[np.ndarray]

    def _init_replay(self) -> None:
        """No episode yet; the seed generator of an env never reset with a seed."""
        self._rng = np.random.default_rng(0)
        self._episode_seed = None
        self._actions = []

    def _episode_seed_for(self, seed: int | None) -> int:
        """The seed of the episode a reset starts.

        ``seed`` itself (which also reseeds the generator of later resets), or, for None,
        one drawn from the generator of the last seeded reset.
        """
        if seed is not None:
            self._rng = np.random.default_rng(int(seed))
            return int(seed)
        return int(self._rng.integers(SEED_RANGE))

    def _start_episode(self, episode_seed: int) -> None:
        self._episode_seed = episode_seed
        self._actions = []

    @property
    def episode_seed(self) -> int | None:
        """The seed of the current episode (None before the first reset)."""
        return self._episode_seed

    @property
    def steps(self) -> int:
        """Steps played in the current episode."""
        return len(self._actions)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "settings": dict(self._settings),
            "rng": self._rng.bit_generator.state,
            "episode_seed": self._episode_seed,
            "actions": [a.copy() for a in self._actions],
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["settings"])  # type: ignore[misc]
        if state["episode_seed"] is not None:
            self.replay(state["episode_seed"], state["actions"])
        self._rng.bit_generator.state = state["rng"]

    def replay(self, episode_seed: int, actions: list[np.ndarray]) -> None:
        """Reset with ``episode_seed`` and play ``actions``: the episode's state again.

        Keeps the autoreset generator as it is (unlike a seeded ``reset``).
        """
        rng_state = self._rng.bit_generator.state
        self.reset(seed=episode_seed)  # type: ignore[attr-defined]
        for action in actions:
            self.step_without_observation(action)  # type: ignore[attr-defined]
        self._rng.bit_generator.state = rng_state

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Play one action: :meth:`step_without_observation`, then the observation."""
        reward, terminated, truncated, info = self.step_without_observation(action)  # type: ignore[attr-defined]
        return self.current_observation(), reward, terminated, truncated, info

    def current_observation(self) -> Any:
        """The observation of the current simulator state."""
        return self._observation()  # type: ignore[attr-defined]

    def _require_episode(self, call: str) -> None:
        if self._episode_seed is None:
            raise RuntimeError(f"call reset() before {call}()")
