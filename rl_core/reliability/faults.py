"""Fault plans: ``KIND:STEP@ITERATION`` entries (the ``RLPIPE_FAULTS`` variable), parsed.

A plan names faults to inject into a run, e.g. ``raise:evaluate@3,kill:update@5``:

- ``raise``: the worker doing the step raises an exception;
- ``kill``: the worker process doing the step is killed (SIGKILL);
- ``hang``: the worker doing the step stops answering (until its deadline kills it);
- ``kill_driver``: the driver process (the train flow) is killed at that step;
- ``exit``: the train flow fails at that step without retrying (a failed run, to be
  resumed by a rerun or the Prefect UI's Retry).

Each fault fires at most once, on the first attempt of the step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rl_core.steps import FAULT_STEPS

#: Kinds of fault.
FAULT_KINDS = ("raise", "kill", "hang", "disk_full", "kill_driver", "exit")
_ENTRY = re.compile(r"^(?P<kind>[a-z_]+):(?P<step>[a-z_]+)@(?P<iteration>\d+)$")


class FaultSpecError(ValueError):
    """A fault plan entry that does not parse (names the entry and what is allowed)."""


@dataclass(frozen=True)
class Fault:
    """One planned fault.

    Attributes:
        kind: One of :data:`FAULT_KINDS`.
        step: One of :data:`~rl_core.steps.FAULT_STEPS`.
        iteration: Zero-based iteration index.
    """

    kind: str
    step: str
    iteration: int

    def __str__(self) -> str:
        return f"{self.kind}:{self.step}@{self.iteration}"


@dataclass
class FaultPlan:
    """The faults of a run and which of them already fired.

    Args:
        faults: Planned faults (at most one per step and iteration).
    """

    faults: tuple[Fault, ...] = ()
    fired: set[Fault] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.faults)

    def pending(self) -> tuple[Fault, ...]:
        """The planned faults not fired yet (after a run: the ones it never reached)."""
        return tuple(f for f in self.faults if f not in self.fired)

    def take(self, step: str, iteration: int, kinds: tuple[str, ...] = FAULT_KINDS) -> Fault | None:
        """The unfired fault planned at ``step`` of ``iteration`` (marked fired), if any.

        Args:
            step: Step name.
            iteration: Iteration index.
            kinds: Only faults of these kinds are taken.
        """
        for fault in self.faults:
            if (
                fault.step == step
                and fault.iteration == iteration
                and fault.kind in kinds
                and fault not in self.fired
            ):
                self.fired.add(fault)
                return fault
        return None


def parse_faults(text: str | None) -> FaultPlan:
    """Parse a comma-separated ``KIND:STEP@ITERATION`` list (empty or None: no faults).

    Raises:
        FaultSpecError: An entry with an unknown kind or step, a bad format, or two faults
            at the same step of the same iteration.
    """
    faults: list[Fault] = []
    for raw in (text or "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        match = _ENTRY.match(entry)
        if not match:
            raise FaultSpecError(
                f"RLPIPE_FAULTS entry {entry!r} is not KIND:STEP@ITERATION (e.g. raise:evaluate@3)"
            )
        kind, step = match["kind"], match["step"]
        if kind not in FAULT_KINDS:
            raise FaultSpecError(
                f"RLPIPE_FAULTS entry {entry!r}: unknown kind {kind!r}; allowed: "
                f"{', '.join(FAULT_KINDS)}"
            )
        if step not in FAULT_STEPS:
            raise FaultSpecError(
                f"RLPIPE_FAULTS entry {entry!r}: unknown step {step!r}; allowed: "
                f"{', '.join(FAULT_STEPS)}"
            )
        if kind == "disk_full" and step != "checkpoint":
            raise FaultSpecError(
                f"RLPIPE_FAULTS entry {entry!r}: disk_full strikes the checkpoint step only "
                "(e.g. disk_full:checkpoint@3)"
            )
        fault = Fault(kind, step, int(match["iteration"]))
        if any(f.step == fault.step and f.iteration == fault.iteration for f in faults):
            raise FaultSpecError(
                f"RLPIPE_FAULTS: two faults at {step}@{fault.iteration}; one per step and iteration"
            )
        faults.append(fault)
    return FaultPlan(tuple(faults))
