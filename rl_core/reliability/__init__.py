"""Pure pieces of rlpipe's reliability machinery: fault plans (steps: :mod:`rl_core.steps`)."""

from rl_core.reliability.faults import (
    FAULT_KINDS,
    Fault,
    FaultPlan,
    FaultSpecError,
    parse_faults,
)

__all__ = ["FAULT_KINDS", "Fault", "FaultPlan", "FaultSpecError", "parse_faults"]
