"""Pure pieces of rlpipe's reliability machinery: fault plans and step identities."""

from rl_core.reliability.faults import (
    FAULT_KINDS,
    FAULT_STEPS,
    Fault,
    FaultPlan,
    FaultSpecError,
    parse_faults,
)

__all__ = ["FAULT_KINDS", "FAULT_STEPS", "Fault", "FaultPlan", "FaultSpecError", "parse_faults"]
