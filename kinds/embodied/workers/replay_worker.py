"""ReplayWorker: the replay buffer of an off-policy run (and its offline data) in one actor.

The trainer's transitions of each iteration are added once (a retried step adds nothing
twice: additions are keyed by iteration), and each update draws all its minibatches in one
call. RLPD runs sample ``replay.offline_fraction`` of every minibatch from the offline
transitions (``replay.offline_data``), the rest from the online buffer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from infra.checkpoint.layout import (
    REPLAY_ARRAYS,
    REPLAY_STATE,
    SAFETENSORS,
    TORCH,
    has_file,
    read_file,
    write_file,
)
from infra.checkpoint.store import open_store
from infra.cluster.worker_base import Stopwatch, WorkerBase, step_method
from kinds.embodied.config import EmbodiedConfig
from rl_core.data.replay_buffer import ReplayBuffer, load_transitions
from rl_core.seeding import worker_seed


class ReplayWorker(WorkerBase[EmbodiedConfig]):
    """Holds the replay buffer; adds transitions and serves sampled minibatches."""

    group = "replay"
    opens_checkpoint_store = True

    def __init__(self, config: dict[str, Any], rank: int, cpus: tuple[int, ...] = ()) -> None:
        super().__init__(config, rank, cpus)
        replay = self.cfg.replay
        self.seed = worker_seed(self.cfg.run.seed, "replay", rank)
        self.buffer = ReplayBuffer(replay.capacity, self.seed)
        self.offline = load_transitions(replay.offline_data) if replay.offline_data else None
        self.added_through = -1  # last iteration whose transitions are in the buffer

    @step_method
    def add(self, transitions: dict[str, np.ndarray], iteration: int) -> dict[str, float]:
        """Add an iteration's transitions (again for the same iteration: nothing happens).

        Raises:
            ValueError: The transitions do not fit the offline data's shapes.
        """
        watch = Stopwatch()
        if iteration > self.added_through:
            self._check_fits_offline(transitions)
            self.buffer.add(transitions)
            self.added_through = iteration
        return {"seconds": watch.elapsed(), "replay/size": float(len(self.buffer))}

    def _check_fits_offline(self, transitions: dict[str, np.ndarray]) -> None:
        if self.offline is None:
            return
        for key in ("states", "actions"):
            mine, theirs = transitions[key].shape[1:], self.offline[key].shape[1:]
            if mine != theirs:
                raise ValueError(
                    f"replay.offline_data {self.cfg.replay.offline_data!r} has {key} of shape "
                    f"{theirs}, this env gives {mine}: the data is from another env"
                )

    @step_method
    def sample(self, count: int, batch_size: int) -> dict[str, Any] | None:
        """``count`` minibatches of ``batch_size`` rows, stacked (``[count * B, ...]``).

        Returns:
            The arrays, or None while fewer than ``replay.learning_starts`` transitions
            were collected (no update yet).
        """
        if count < 1 or len(self.buffer) < max(self.cfg.replay.learning_starts, 1):
            return None
        online_rows = batch_size
        if self.offline is not None:
            online_rows = batch_size - int(round(batch_size * self.cfg.replay.offline_fraction))
        online = self.buffer.take(self.buffer.sample_indices(count * online_rows))
        if self.offline is None:
            return online
        offline_rows = batch_size - online_rows
        rows = self.offline["rewards"].shape[0]
        pick = torch.randint(0, rows, (count * offline_rows,), generator=self.buffer.generator)
        offline = {k: v[pick.numpy()] for k, v in self.offline.items()}
        # minibatch i = its online rows followed by its offline rows
        return {
            k: np.concatenate(
                [
                    online[k].reshape(count, online_rows, *online[k].shape[1:]),
                    offline[k].reshape(count, offline_rows, *offline[k].shape[1:]),
                ],
                axis=1,
            ).reshape(count * batch_size, *online[k].shape[1:])
            for k in online
        }

    # -- retries -------------------------------------------------------------------------
    def snapshot(self) -> None:
        """Keep the sampling state (before an update draws its minibatches)."""
        self._snapshot = self.buffer.generator.get_state()

    def restore_snapshot(self) -> None:
        """Put back the sampling state kept by :meth:`snapshot`."""
        self.buffer.generator.set_state(self._snapshot)

    # -- checkpoints ---------------------------------------------------------------------
    @step_method
    def save_checkpoint(self, store_uri: str, folder: str) -> dict[str, Any]:
        """Write the buffer's rows and state under ``folder`` (``replay.checkpoint``)."""
        watch = Stopwatch()
        state = self.buffer.state_dict()
        arrays = state.pop("arrays")
        store = open_store(store_uri)
        tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
        write_file(store, folder, REPLAY_ARRAYS, SAFETENSORS, tensors)
        state["added_through"] = self.added_through
        write_file(store, folder, REPLAY_STATE, TORCH, state)
        nbytes = sum(v.nbytes for v in arrays.values())
        return {"seconds": watch.elapsed(), "bytes": nbytes}

    def load_checkpoint(self, store_uri: str, folder: str) -> dict[str, Any]:
        """Restore the buffer saved in ``folder``; an empty buffer when it holds none."""
        store = open_store(store_uri)
        self.buffer = ReplayBuffer(self.cfg.replay.capacity, self.seed)
        self.added_through = -1
        if not has_file(store, folder, REPLAY_STATE):
            return {"size": 0}
        state = read_file(store, folder, REPLAY_STATE, TORCH)
        arrays = read_file(store, folder, REPLAY_ARRAYS, SAFETENSORS)
        state["arrays"] = {k: v.numpy() for k, v in arrays.items()}
        self.buffer.load_state_dict(state)
        self.added_through = int(state["added_through"])
        return {"size": len(self.buffer)}
