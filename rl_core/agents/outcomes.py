"""How a tool call or a scored response ended: ok, the model's failure, or the machinery's.

An infrastructure failure (a sandbox that crashed or could not start, a wall-clock timeout
the model's code did not cause) is not the model's doing: it is retried, and a response
still failing so is kept out of its group's statistics instead of being scored as 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Outcome(str, Enum):
    """How a tool call (or a reward computed by running code) ended."""

    #: The call ran and returned its result.
    OK = "ok"
    #: The model's input was at fault: a malformed call, an unknown tool, code that raised
    #: or exceeded its CPU, memory, file-size or process limits.
    MODEL_FAILURE = "model_failure"
    #: The machinery was at fault: the sandbox crashed or could not start, or the call ran
    #: out of wall-clock time without using its CPU budget.
    INFRA_FAILURE = "infra_failure"


@dataclass(frozen=True)
class ToolResult:
    """The result of one tool call.

    Attributes:
        outcome: How the call ended.
        output: The text appended to the conversation (for a model failure, the error
            message the model gets to read).
        latency_s: Wall-clock seconds the call took.
        detail: Why it ended so, for logs and traces (e.g. ``"cpu limit"``).
    """

    outcome: Outcome
    output: str
    latency_s: float = 0.0
    detail: str = ""
