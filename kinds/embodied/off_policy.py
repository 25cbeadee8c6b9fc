"""OffPolicyRuntime: the embodied runtime for SAC, CrossQ and RLPD (a replay buffer worker).

An iteration collects ``env.num_workers * env.num_envs * rollout.num_steps`` env steps with
the current actor (weight sync, rollout), applies the reward, adds the transitions to the
replay buffer worker (the advantage step: TD targets are formed per minibatch inside the
update), then runs ``round(algorithm.off_policy.utd_ratio * env steps)`` gradient steps on
minibatches the replay worker draws (none until ``replay.learning_starts`` transitions
were collected). Evaluation and checkpoints are those of every embodied run; checkpoints
also hold the replay buffer when ``replay.checkpoint`` is on.
"""

from __future__ import annotations

import time

from infra.checkpoint.parts import CheckpointPart, SaveOrder, WorkerPart
from infra.cluster.gpu_placement import Attached
from infra.cluster.group_calls import GroupMethod
from infra.cluster.worker_group import WorkerGroup
from infra.driver.step_runtime import StepResult
from kinds.embodied.runtime import EmbodiedRuntime
from kinds.embodied.workers.hybrid_worker import HybridOffPolicyActorWorker
from kinds.embodied.workers.off_policy_trainer import OffPolicyActorWorker
from kinds.embodied.workers.replay_worker import ReplayWorker

#: Ray ``num_cpus`` of the replay worker (placement plans leave 1 % of the cluster free).
REPLAY_CPU_RESERVATION = 0.001


class OffPolicyRuntime(EmbodiedRuntime):
    """Env, rollout, trainer and replay buffer workers of an off-policy run."""

    trainer_worker = OffPolicyActorWorker
    hybrid_trainer_worker = HybridOffPolicyActorWorker

    attached_groups = {"replay": Attached("actor", REPLAY_CPU_RESERVATION)}

    def start_more_groups(self) -> list[WorkerGroup]:
        """The replay buffer worker, with the trainer (its CPUs; on GPUs, its node).

        It reserves almost no CPU (:data:`REPLAY_CPU_RESERVATION`) and no GPU: it works only
        while the trainer waits for it, so the planned shares of the other groups stay as
        they are.
        """
        self.replay = self._group("replay", ReplayWorker, 1, with_spaces=False)
        return [self.replay]

    @property
    def gradient_steps(self) -> int:
        """Gradient steps per iteration: utd_ratio times the env steps of an iteration."""
        env = self.cfg.env
        steps = env.num_workers * env.num_envs * self.cfg.rollout.num_steps
        return max(1, round(self.cfg.algorithm.off_policy.utd_ratio * steps))

    def advantage(self, iteration: int) -> StepResult:
        """Add the iteration's transitions to the replay buffer (once, whatever retries)."""
        start = time.perf_counter()
        (transitions,) = self.actor.transitions.remote().refs
        (out,) = self.replay.add(
            transitions, iteration, within=("advantage", self.timeouts.advantage)
        )
        return StepResult.of(time.perf_counter() - start, out)

    def update(self, iteration: int) -> StepResult:
        """Gradient steps on minibatches the replay worker draws."""
        start = time.perf_counter()
        (sample,) = self.replay.sample.remote(self.gradient_steps, self.cfg.replay.batch_size).refs
        (out,) = self.actor.update(iteration, sample, within=("update", self.timeouts.update))
        return StepResult.of(time.perf_counter() - start, out)

    def _trainer_state(self, step: str) -> list[tuple[GroupMethod, GroupMethod]]:
        """An update also changes the replay worker's sampling state."""
        state = super()._trainer_state(step)
        if step == "update":
            state.append((self.replay.snapshot, self.replay.restore_snapshot))
        return state

    def checkpoint_parts(self) -> list[CheckpointPart]:
        """Every embodied part, then the replay buffer.

        The buffer is saved when ``replay.checkpoint`` is on; a folder without it loads an
        empty buffer.
        """
        replay = WorkerPart(self.replay, SaveOrder.AFTER, saves=self.cfg.replay.checkpoint)
        return [*super().checkpoint_parts(), replay]
