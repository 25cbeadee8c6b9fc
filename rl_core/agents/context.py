"""What a model turn sees: the episode so far (append-only), or a rewritten history.

A context builder is ``build(traj) -> list[int]``: the input ids of the trajectory's next
generation, registered in :data:`AGENT_CONTEXTS` (``agent.context``).

``append`` (the default) is the prompt and every token since, in order. Each generation's
input then extends the previous one, so the whole trajectory trains as one sample: its flat
response, tool tokens masked. A builder that rewrites the history (drops earlier turns, as
chat templates that strip past reasoning do) breaks that: the agent loop records the input
of each model turn it changed (:attr:`~rl_core.agents.trajectory.Trajectory.turn_contexts`)
and training makes one sample per model turn, the input it saw followed by its tokens, each
with its trajectory's advantage (:mod:`rl_core.agents.per_turn`).

Built-ins: ``append``, and ``last_exchange``: the prompt followed by the latest model turn
and the tool result after it (a window of one exchange; older turns are dropped).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rl_core.agents.trajectory import MODEL, Trajectory
from rl_core.registry import Registry

ContextBuilder = Callable[[Trajectory], list[int]]

#: Builder name → ``build(traj) -> input ids of the next generation``.
AGENT_CONTEXTS: Registry[ContextBuilder] = Registry("agent context")
#: The append-only builder's name.
APPEND = "append"


def register_agent_context(
    name: str, build: ContextBuilder | None = None, *, force: bool = False
) -> Any:
    """Register a context builder (call or decorator form).

    Args:
        name: The builder's name (case-insensitive), for ``agent.context``.
        build: ``build(traj) -> list[int]``; omit it to get a decorator.
        force: Replace an existing registration.

    Returns:
        ``build`` when given, otherwise a decorator registering its argument.
    """
    if build is None:
        return AGENT_CONTEXTS.decorator(name, force=force)
    return AGENT_CONTEXTS.register(name, build, force=force)


def get_agent_context(name: str) -> ContextBuilder:
    """The builder registered as ``name`` (the error of an unknown one lists the known ones)."""
    return AGENT_CONTEXTS.get(name)


@register_agent_context(APPEND)
def append_context(traj: Trajectory) -> list[int]:
    """The prompt and every token since (the trajectory trains as one sample)."""
    return traj.context_ids()


@register_agent_context("last_exchange")
def last_exchange_context(traj: Trajectory) -> list[int]:
    """The prompt, then the latest model turn and what followed it (older turns dropped)."""
    starts = [turn.start for turn in traj.turns if turn.role == MODEL]
    if not starts:
        return list(traj.prompt_ids)
    return [*traj.prompt_ids, *traj.response_ids[starts[-1] :]]


def next_context(name: str, traj: Trajectory) -> list[int]:
    """The input of ``traj``'s next generation under builder ``name``.

    When it is not the append-only context, it is recorded for the model turn about to be
    added (:attr:`Trajectory.turn_contexts`), so that training scores that turn's tokens
    after exactly the ids the engine saw.
    """
    appended = traj.context_ids()
    if name == APPEND:
        return appended
    context = list(get_agent_context(name)(traj))
    if context != appended:
        traj.turn_contexts[len(traj.turns)] = context
    return context
