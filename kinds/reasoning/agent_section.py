"""The ``agent`` section of a reasoning run: multi-turn generation with tool calls."""

from __future__ import annotations

from pydantic import Field, field_validator

from rl_core.config.limits import MAX_TOKENS
from rl_core.config.sections import Section, check_registered_name

#: Most model turns of one trajectory.
MAX_TURNS = 1_024
#: Most retries of a tool call that failed through the machinery.
MAX_TOOL_RETRIES = 100


class AgentConfig(Section):
    """How each prompt becomes a trajectory: one generation, or turns with tool calls."""

    loop: str = Field(
        "single_turn",
        description="Reasoning: agent loop (single_turn: one response per prompt; tool_loop: "
        "generate, run the tool the model calls, append its result, repeat).",
    )
    parser: str = Field(
        "xml",
        description="Reasoning, agent loops with tools: tool-call syntax (xml: "
        "<call>NAME: ARGS</call>; json; hermes).",
    )
    tools: list[str] | None = Field(
        None, description="Reasoning, agent loops: tools the model may call (None: all registered)."
    )
    max_turns: int = Field(
        4,
        ge=1,
        le=MAX_TURNS,
        description="Reasoning, agent loops: most model turns per trajectory.",
    )
    max_total_tokens: int = Field(
        512,
        ge=1,
        le=MAX_TOKENS,
        description="Reasoning, agent loops: most tokens of prompt, model turns and tool results "
        "together (each turn also stops at rollout.max_new_tokens).",
    )
    tool_retries: int = Field(
        2,
        ge=0,
        le=MAX_TOOL_RETRIES,
        description="Reasoning, agent loops: retries of a tool call that failed through the "
        "machinery (a crashed sandbox); one still failing ends the trajectory, which is then "
        "left out of training and of its group's statistics.",
    )
    context: str = Field(
        "append",
        description="Reasoning, agent loops: what each generation is given (append: the "
        "whole episode so far, trained as one sample; last_exchange: the prompt, the latest "
        "model turn and its tool result). A context that rewrites the history trains one "
        "sample per model turn with its trajectory's advantage (outcome estimators only).",
    )
    call_cost: float = Field(
        0.0,
        ge=0.0,
        description="Reasoning, agent loops: subtracted from a trajectory's reward per tool call.",
    )

    @field_validator("loop")
    @classmethod
    def _known_loop(cls, value: str) -> str:
        return check_registered_name("agent_loop", value)

    @field_validator("parser")
    @classmethod
    def _known_parser(cls, value: str) -> str:
        return check_registered_name("tool_parser", value)

    @field_validator("context")
    @classmethod
    def _known_context(cls, value: str) -> str:
        return check_registered_name("agent_context", value)

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        return [check_registered_name("tool", name) for name in value]

    @property
    def multi_turn(self) -> bool:
        """Whether trajectories are made by an agent loop other than ``single_turn``."""
        return self.loop != "single_turn"
