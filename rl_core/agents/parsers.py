r"""Tool-call syntaxes: where a call is in the model's text, and how its result is written.

A parser has

* ``stop``: the strings at which generation stops so the tool can run (the end marker of
  a call),
* ``parse(text)``: the first complete call in the text of the current turn, as a
  :class:`ToolCall`; a :class:`ParseError` when the markers are there but what they hold
  is malformed (the loop answers it as a model failure); None when there is no complete
  call,
* ``format_result(result)``: the text appended after the call for the model to read.

Built-ins:

``xml`` (for tiny byte- or character-level models: short, one fixed shape)::

    <call>calculator: 123*456</call><result>56088</result>

``json`` (Hermes/Qwen style, for instruction-tuned models)::

    <tool_call>{"name": "calculator", "arguments": {"expression": "123*456"}}</tool_call>
    <tool_response>
    56088
    </tool_response>

``hermes`` is ``json`` with the ChatML framing of a tool message around the result
(``<|im_end|>\n<|im_start|>user\n<tool_response>...``), so that a Qwen/Hermes chat
template stays append-only. A JSON ``arguments`` object with a single string value is
passed as that string (``{"expression": "1+2"}`` → ``"1+2"``: rlpipe's tools take one string);
any other object is passed as its JSON text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from rl_core.agents.outcomes import ToolResult
from rl_core.registry import Registry


@dataclass(frozen=True)
class ToolCall:
    """A complete tool call found in a turn's text.

    Attributes:
        name: The tool's name as written.
        arguments: Its arguments, as one string.
        start: Offset of the call's first character in the text.
        end: Offset just past its last character (past the end marker).
    """

    name: str
    arguments: str
    start: int
    end: int


@dataclass(frozen=True)
class ParseError:
    """A call whose markers are complete but whose content is malformed.

    Attributes:
        message: What is wrong, for the model to read.
        text: The content between the markers.
        start: Offset of the call's first character.
        end: Offset just past its end marker.
    """

    message: str
    text: str
    start: int
    end: int


class ToolParser(Protocol):
    """The interface of a tool-call syntax (see the module docstring)."""

    stop: tuple[str, ...]

    def parse(self, text: str) -> ToolCall | ParseError | None:
        """The first complete call in ``text``, a parse error, or None."""
        ...

    def format_result(self, result: ToolResult) -> str:
        """The text appended after a call for its result."""
        ...


#: Parser name → parser instance or class (constructed without arguments on lookup).
TOOL_PARSERS: Registry[Any] = Registry("tool parser")


def register_tool_parser(name: str, parser_or_class: Any = None, *, force: bool = False) -> Any:
    """Register a tool parser instance or class (call or decorator form).

    Args:
        name: The parser's name (case-insensitive).
        parser_or_class: An object with ``stop``, ``parse`` and ``format_result``, or a
            class constructed without arguments; omit it to get a decorator.
        force: Replace an existing registration.

    Returns:
        ``parser_or_class`` when given, otherwise a decorator registering its argument.

    Raises:
        rl_core.registry.RegistryError: ``name`` is taken and ``force`` is False.
    """
    if parser_or_class is None:
        return TOOL_PARSERS.decorator(name, force=force)
    return TOOL_PARSERS.register(name, parser_or_class, force=force)


def get_tool_parser(name: str) -> ToolParser:
    """The parser registered as ``name`` (a class is constructed without arguments).

    Raises:
        rl_core.registry.RegistryError: Unknown name (the message lists the known ones).
    """
    entry = TOOL_PARSERS.get(name)
    return entry() if isinstance(entry, type) else entry


_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*:(.*)", re.DOTALL)


def first_between(text: str, open_: str, close: str) -> tuple[int, str, int] | None:
    """The first ``open_ ... close`` of ``text``: ``(its start, what is between, its end)``.

    None when ``open_`` is missing or not closed yet.
    """
    start = text.find(open_)
    if start < 0:
        return None
    end_of_inner = text.find(close, start + len(open_))
    if end_of_inner < 0:
        return None
    return start, text[start + len(open_) : end_of_inner], end_of_inner + len(close)


class XmlToolParser:
    r"""``<call>NAME: ARGUMENTS</call>``, answered by ``<result>OUTPUT</result>``.

    Args:
        call_tag: Tag around a call.
        result_tag: Tag around a result.
        result_suffix: Text after the closing result tag (e.g. ``"\n"``).
    """

    def __init__(self, call_tag: str = "call", result_tag: str = "result", result_suffix: str = ""):
        self.open, self.close = f"<{call_tag}>", f"</{call_tag}>"
        self.result_open, self.result_close = f"<{result_tag}>", f"</{result_tag}>"
        self.result_suffix = result_suffix
        self.stop: tuple[str, ...] = (self.close,)

    def parse(self, text: str) -> ToolCall | ParseError | None:
        """The first ``<call>NAME: ARGUMENTS</call>`` of ``text`` (arguments stripped)."""
        found = first_between(text, self.open, self.close)
        if found is None:
            return None
        start, inner, end = found
        match = _NAME.fullmatch(inner)
        if match is None:
            message = f"malformed call; write {self.open}TOOL: ARGUMENTS{self.close}"
            return ParseError(message, inner, start, end)
        return ToolCall(match.group(1), match.group(2).strip(), start, end)

    def format_result(self, result: ToolResult) -> str:
        """``<result>OUTPUT</result>`` plus the suffix."""
        return f"{self.result_open}{result.output}{self.result_close}{self.result_suffix}"


class JsonToolParser:
    """``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` (Hermes/Qwen style).

    Args:
        result_prefix: Text before a result's output.
        result_suffix: Text after it.
    """

    open, close = "<tool_call>", "</tool_call>"
    stop: tuple[str, ...] = ("</tool_call>",)

    def __init__(
        self,
        result_prefix: str = "<tool_response>\n",
        result_suffix: str = "\n</tool_response>\n",
    ) -> None:
        self.result_prefix = result_prefix
        self.result_suffix = result_suffix

    def parse(self, text: str) -> ToolCall | ParseError | None:
        """The first complete ``<tool_call>`` of ``text``."""
        found = first_between(text, self.open, self.close)
        if found is None:
            return None
        start, inner, end = found
        try:
            call = json.loads(inner)
        except json.JSONDecodeError as err:
            return ParseError(f"invalid JSON in tool call: {err.msg}", inner, start, end)
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            message = 'a tool call must be {"name": "TOOL", "arguments": {...}}'
            return ParseError(message, inner, start, end)
        return ToolCall(call["name"], _arguments(call.get("arguments", "")), start, end)

    def format_result(self, result: ToolResult) -> str:
        """The output between the prefix and the suffix."""
        return f"{self.result_prefix}{result.output}{self.result_suffix}"


def _arguments(value: Any) -> str:
    """One argument string: a string as is, a single-string object its value, else JSON.

    A string holding a JSON object (OpenAI style ``"arguments": "{...}"``) counts as that object.
    """
    if isinstance(value, str):
        if not value.lstrip().startswith("{"):
            return value
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        if not isinstance(decoded, dict):
            return value
        value = decoded
    if isinstance(value, dict) and len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str):
            return only
    return json.dumps(value, ensure_ascii=False)


TOOL_PARSERS.register("xml", XmlToolParser())
TOOL_PARSERS.register("json", JsonToolParser())
TOOL_PARSERS.register(
    "hermes",
    JsonToolParser(
        result_prefix="<|im_end|>\n<|im_start|>user\n<tool_response>\n",
        result_suffix="\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    ),
)
