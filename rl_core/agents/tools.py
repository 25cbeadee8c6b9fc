"""Tools a language model calls between generations, and the registry that names them.

A tool takes the text of its arguments and returns a :class:`ToolResult`. It never raises
for the model's bad input: a malformed expression or failing code is a ``MODEL_FAILURE``
whose ``output`` is a short message the model reads in its next turn. :func:`run_tool` is
what an agent loop calls: it looks the tool up, times it, turns an unknown name into a
``MODEL_FAILURE`` and an exception escaping the tool (a bug, not the model's fault) into an
``INFRA_FAILURE``.

A registry entry is one of

* a **tool instance** (anything with ``name``, ``description`` and ``__call__(arguments)``),
* a **tool class**, constructed without arguments on first use (once per process), or
* a **function** ``fn(arguments: str) -> str | ToolResult``; its docstring's first line is
  its description, a returned string an ``OK`` result.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from rl_core.agents.outcomes import Outcome, ToolResult
from rl_core.registry import Registry

logger = logging.getLogger(__name__)

#: Tool name → tool instance, class or function (see the module docstring). The built-in
#: ``calculator`` and ``python`` register when their modules are imported.
TOOLS: Registry[Any] = Registry("tool", ("rl_core.agents.calculator", "rl_core.agents.python_tool"))


class Tool(ABC):
    """A tool: one string of arguments in, one :class:`ToolResult` out.

    Attributes:
        name: The name the model calls it by (the registry key may differ; the registry's
            is the one that counts).
        description: One or two sentences for the prompt that tells the model how to call it.
        parameter: Name of its single string parameter, for JSON-schema tool descriptions
            (``{"name": ..., "arguments": {parameter: "..."}}``).
    """

    name: str = ""
    description: str = ""
    parameter: str = "input"

    @abstractmethod
    def __call__(self, arguments: str) -> ToolResult:
        """Run the tool on ``arguments``; return a ``MODEL_FAILURE`` for bad input, never raise."""

    @staticmethod
    def ok(output: str, detail: str = "") -> ToolResult:
        """An ``OK`` result (latency is filled in by :func:`run_tool`)."""
        return ToolResult(Outcome.OK, output, detail=detail)

    @staticmethod
    def model_failure(message: str, detail: str = "") -> ToolResult:
        """A ``MODEL_FAILURE`` whose ``message`` the model reads."""
        return ToolResult(Outcome.MODEL_FAILURE, message, detail=detail or message)


class FunctionTool(Tool):
    """Wraps ``fn(arguments) -> str | ToolResult`` as a :class:`Tool`.

    Args:
        name: The tool's name.
        fn: The function; a returned string is an ``OK`` result.
        description: For the prompt; defaults to the first line of ``fn``'s docstring.
    """

    def __init__(self, name: str, fn: Callable[[str], Any], description: str | None = None):
        self.name = name
        self.fn = fn
        doc = (fn.__doc__ or "").strip().splitlines()
        self.description = description if description is not None else (doc[0] if doc else "")

    def __call__(self, arguments: str) -> ToolResult:
        """Call the function; wrap a returned string as an ``OK`` result.

        Raises:
            TypeError: The function returned neither a string nor a result.
        """
        out = self.fn(arguments)
        if isinstance(out, ToolResult):
            return out
        if not isinstance(out, str):
            raise TypeError(f"tool function {self.name!r} returned {type(out).__name__}, not str")
        return self.ok(out)


def register_tool(name: str, tool_or_class: Any = None, *, force: bool = False) -> Any:
    """Register a tool instance, class or function (call or decorator form).

    Args:
        name: The name the model calls it by (case-insensitive).
        tool_or_class: See the module docstring; omit it to get a decorator.
        force: Replace an existing registration (e.g. the built-in ``python``).

    Returns:
        ``tool_or_class`` when given, otherwise a decorator registering its argument.

    Raises:
        rl_core.registry.RegistryError: ``name`` is taken and ``force`` is False.
    """
    if tool_or_class is None:
        return TOOLS.decorator(name, force=force)
    return TOOLS.register(name, tool_or_class, force=force)


_instances: dict[str, tuple[Any, Any]] = {}  # name → (registry entry, its tool instance)
_instances_lock = threading.Lock()


def get_tool(name: str) -> Any:
    """The tool registered as ``name``, as a callable tool instance.

    A class is constructed (and a function wrapped) once per process and entry; registering
    a new entry under the name gives a new instance.

    Raises:
        rl_core.registry.RegistryError: Unknown name (the message lists the known ones).
    """
    entry = TOOLS.get(name)
    key = TOOLS.normalize(name)
    with _instances_lock:
        cached = _instances.get(key)
        if cached is not None and cached[0] is entry:
            return cached[1]
        if isinstance(entry, type):
            tool = entry()
        elif hasattr(entry, "description"):
            tool = entry
        elif callable(entry):
            tool = FunctionTool(key, entry)
        else:
            raise TypeError(
                f"tool {key!r} is registered as {entry!r}, which is neither a tool, a tool "
                "class nor a function of its arguments"
            )
        _instances[key] = (entry, tool)
        return tool


def describe_tools(names: Iterable[str]) -> str:
    """One ``name: description`` line per tool, for a prompt."""
    return "\n".join(f"{TOOLS.normalize(n)}: {get_tool(n).description}" for n in names)


def tool_schemas(names: Iterable[str]) -> list[dict[str, Any]]:
    """OpenAI/Hermes function schemas of ``names`` (``tools=`` of a chat template)."""
    schemas = []
    for name in names:
        tool = get_tool(name)
        parameter = getattr(tool, "parameter", "input")
        schemas.append(
            {
                "type": "function",
                "function": {
                    "name": TOOLS.normalize(name),
                    "description": tool.description,
                    "parameters": {
                        "type": "object",
                        "properties": {parameter: {"type": "string"}},
                        "required": [parameter],
                    },
                },
            }
        )
    return schemas


def run_tool(name: str, arguments: str, *, allowed: Iterable[str] | None = None) -> ToolResult:
    """Run the tool ``name`` on ``arguments``, timed; never raises.

    Args:
        name: The tool the model called.
        arguments: Its arguments, as the model wrote them.
        allowed: The tools this episode may call (None: every registered tool).

    Returns:
        The tool's result with ``latency_s`` measured here; a ``MODEL_FAILURE`` for a name
        that is not registered (or not allowed), an ``INFRA_FAILURE`` (with the exception in
        ``detail``) when the tool raised or returned something other than a result.
    """
    start = time.perf_counter()
    known = sorted(TOOLS.normalize(n) for n in allowed) if allowed is not None else TOOLS.names()
    key = name.strip().lower() if isinstance(name, str) else ""
    if key not in known or key not in TOOLS:
        message = f"unknown tool {name!r}; registered: {', '.join(known) or '(none)'}"
        return ToolResult(Outcome.MODEL_FAILURE, message, time.perf_counter() - start, message)
    try:
        result = get_tool(key)(arguments)
        if not isinstance(result, ToolResult):
            raise TypeError(f"returned {type(result).__name__}, not a ToolResult")
    except Exception as exc:  # a bug in the tool or its machinery, not the model's input
        logger.warning("tool %r failed: %s: %s", key, type(exc).__name__, exc, exc_info=True)
        detail = f"{type(exc).__name__}: {exc}"
        return ToolResult(
            Outcome.INFRA_FAILURE,
            f"tool {key!r} failed (internal error)",
            time.perf_counter() - start,
            detail,
        )
    return replace(result, latency_s=time.perf_counter() - start)
