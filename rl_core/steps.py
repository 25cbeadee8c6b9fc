"""The steps of a training iteration, and what the pipeline knows about each of them.

:class:`Step` is a string enum: a step equals its name (``Step.ROLLOUT == "rollout"``),
which is what Prefect task names, ``time/<step>`` metrics, ``RLPIPE_FAULTS`` entries and
journal keys use. Each step carries its :class:`StepTraits` (part of the RL iteration,
stateful, safe to repeat, a fault target); the step lists the rest of rlpipe iterates over
are derived from them here, in declaration order.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class StepTraits:
    """What the pipeline knows about a step.

    Attributes:
        summary: What the step does, in one line (its Prefect task's description).
        in_rl_iteration: A step of the RL iteration flow (``sft_update`` runs in the
            supervised warm start's iteration instead).
        stateful: Changes worker state: snapshotted before its first attempt and restored
            before a retry, so a half-done attempt is undone.
        retry_safe: Safe to repeat as it is: its Prefect task retries on its own.
        takes_faults: ``RLPIPE_FAULTS`` entries may name it.
    """

    summary: str
    in_rl_iteration: bool = True
    stateful: bool = False
    retry_safe: bool = False
    takes_faults: bool = True


class Step(StrEnum):
    """A step of a training iteration, declared in the order the steps run."""

    traits: StepTraits

    def __new__(cls, value: str, traits: StepTraits) -> Step:
        """A member named ``value`` (its string value) with its traits."""
        member = str.__new__(cls, value)
        member._value_ = value
        member.traits = traits
        return member

    WEIGHT_SYNC = (
        "weight_sync",
        StepTraits("Push the trainer's current weights to every rollout worker.", retry_safe=True),
    )
    ROLLOUT = (
        "rollout",
        StepTraits(
            "Collect one iteration of experience; the batch goes to the trainer through Ray.",
            stateful=True,
        ),
    )
    REWARD = (
        "reward",
        StepTraits("Score the collected batch (fan-out tasks, or the trainer's reward)."),
    )
    ADVANTAGE = ("advantage", StepTraits("Compute advantages with the configured estimator."))
    UPDATE = (
        "update",
        StepTraits(
            "Update the policy; not retried (it changes the trainer's state).", stateful=True
        ),
    )
    SFT_UPDATE = (
        "sft_update",
        StepTraits(
            "Train on the next batch of prompt→answer pairs (not retried: it changes weights).",
            in_rl_iteration=False,
            stateful=True,
            takes_faults=False,
        ),
    )
    EVALUATE = ("evaluate", StepTraits("Evaluation metrics of the current weights."))
    CHECKPOINT = (
        "checkpoint",
        StepTraits(
            "Write and commit a checkpoint of the completed iterations (idempotent).",
            retry_safe=True,
        ),
    )

    @property
    def summary(self) -> str:
        """What the step does, in one line."""
        return self.traits.summary

    @property
    def in_rl_iteration(self) -> bool:
        """Whether the RL iteration flow runs this step."""
        return self.traits.in_rl_iteration

    @property
    def stateful(self) -> bool:
        """Whether the step changes worker state (snapshotted, restored on a retry)."""
        return self.traits.stateful

    @property
    def retry_safe(self) -> bool:
        """Whether the step's Prefect task may retry on its own."""
        return self.traits.retry_safe

    @property
    def takes_faults(self) -> bool:
        """Whether ``RLPIPE_FAULTS`` entries may name the step."""
        return self.traits.takes_faults


#: Steps of a training iteration, in order (``evaluate``/``checkpoint`` run when due).
ITERATION_STEPS: tuple[Step, ...] = tuple(step for step in Step if step.in_rl_iteration)
#: Steps that change worker state: snapshotted before they start, restored on a retry.
STATEFUL_STEPS: tuple[Step, ...] = tuple(step for step in Step if step.stateful)
#: Steps of an iteration a fault can target.
FAULT_STEPS: tuple[Step, ...] = tuple(step for step in Step if step.takes_faults)
#: The phase of an iteration that is not a step: everything between the steps.
ORCHESTRATION = "orchestration"
#: Phases of an iteration, as its ``time/<phase>`` metrics name them (cost accounting):
#: the RL iteration's steps, the other steps, then the orchestration.
COST_PHASES: tuple[str, ...] = (
    *ITERATION_STEPS,
    *(step for step in Step if not step.in_rl_iteration),
    ORCHESTRATION,
)
