"""Tool-call parsers: the xml and json syntaxes, malformed calls, stop strings, the registry."""

from __future__ import annotations

import pytest

from rl_core import api
from rl_core.agents.outcomes import Outcome, ToolResult
from rl_core.agents.parsers import (
    TOOL_PARSERS,
    JsonToolParser,
    ParseError,
    ToolCall,
    XmlToolParser,
    get_tool_parser,
)
from rl_core.registry import RegistryError

OK_56088 = ToolResult(Outcome.OK, "56088")


@pytest.fixture(autouse=True)
def isolated(clean_registries):
    """Registrations of a test do not leak into the next one."""
    yield


def test_builtin_parsers() -> None:
    assert {"xml", "json", "hermes"} <= set(TOOL_PARSERS.names())
    with pytest.raises(RegistryError, match="unknown tool parser 'yaml'; known: hermes, json, xml"):
        get_tool_parser("yaml")


# -- xml ------------------------------------------------------------------------------------
def test_xml_round_trip() -> None:
    parser = get_tool_parser("xml")
    assert parser.stop == ("</call>",)
    text = "Let me compute. <call>calculator: 123*456</call>"
    call = parser.parse(text)
    assert call == ToolCall("calculator", "123*456", 16, len(text))
    assert text[call.start : call.end] == "<call>calculator: 123*456</call>"
    assert parser.format_result(OK_56088) == "<result>56088</result>"
    # the model's next turn sees the result; a call in the same text after it is found too
    later = text + parser.format_result(OK_56088) + " so <call>python:print(1)</call>"
    assert parser.parse(later[call.end :]).name == "python"


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ("<call>calculator:1+1</call>", "calculator", "1+1"),
        ("<call> calculator :  1+1  </call>", "calculator", "1+1"),
        ("<call>python: print(1)\nprint(2)\n</call>", "python", "print(1)\nprint(2)"),
        ("<call>my_tool.v2: a: b</call>", "my_tool.v2", "a: b"),  # only the first colon splits
        ("<call>python:</call>", "python", ""),
        ("a <call>x:1</call> b <call>y:2</call>", "x", "1"),  # the first complete call
    ],
)
def test_xml_parses(text: str, name: str, arguments: str) -> None:
    call = XmlToolParser().parse(text)
    assert isinstance(call, ToolCall) and (call.name, call.arguments) == (name, arguments)


@pytest.mark.parametrize("text", ["no call here", "<call>calculator: 1+1", "</call><call>x:1"])
def test_xml_incomplete_is_no_call(text: str) -> None:
    assert XmlToolParser().parse(text) is None


@pytest.mark.parametrize("inner", ["123*456", ": 1+1", "1calc: 2", "two words: 3", ""])
def test_xml_malformed_is_a_parse_error(inner: str) -> None:
    text = f"ok <call>{inner}</call>"
    error = XmlToolParser().parse(text)
    assert isinstance(error, ParseError)
    assert error.text == inner and (error.start, error.end) == (3, len(text))
    assert "<call>TOOL: ARGUMENTS</call>" in error.message


def test_xml_custom_tags() -> None:
    parser = XmlToolParser(call_tag="t", result_tag="r", result_suffix="\n")
    assert parser.stop == ("</t>",)
    assert parser.parse("<t>calc:2</t>").arguments == "2"
    assert parser.format_result(OK_56088) == "<r>56088</r>\n"


# -- json -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "arguments"),
    [
        ('{"name": "calculator", "arguments": {"expression": "123*456"}}', "123*456"),
        ('{"name": "calculator", "arguments": "123*456"}', "123*456"),
        ('{"name": "calculator", "arguments": "{\\"expression\\": \\"1+2\\"}"}', "1+2"),
        ('{"name": "search", "arguments": {"q": "a", "k": 3}}', '{"q": "a", "k": 3}'),
        ('{"name": "search", "arguments": {"k": 3}}', '{"k": 3}'),
        ('{"name": "now"}', ""),
        ('\n{"name": "calculator", "arguments": {"expression": "1"}}\n', "1"),
    ],
)
def test_json_parses(body: str, arguments: str) -> None:
    text = f"Thinking.\n<tool_call>{body}</tool_call>"
    call = JsonToolParser().parse(text)
    assert isinstance(call, ToolCall)
    assert call.arguments == arguments and (call.start, call.end) == (10, len(text))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"name": "calculator", "arguments": ', "invalid JSON in tool call"),
        ("calculator(1+1)", "invalid JSON in tool call"),
        ('["calculator", "1+1"]', 'a tool call must be {"name"'),
        ('{"arguments": "1+1"}', 'a tool call must be {"name"'),
        ('{"name": 3}', 'a tool call must be {"name"'),
    ],
)
def test_json_malformed_is_a_parse_error(body: str, message: str) -> None:
    error = JsonToolParser().parse(f"<tool_call>{body}</tool_call>")
    assert isinstance(error, ParseError) and message in error.message and error.text == body


def test_json_stop_and_results() -> None:
    plain, hermes = get_tool_parser("json"), get_tool_parser("hermes")
    assert plain.stop == hermes.stop == ("</tool_call>",)
    assert plain.parse('<tool_call>{"name": "x"') is None
    assert plain.format_result(OK_56088) == "<tool_response>\n56088\n</tool_response>\n"
    framed = hermes.format_result(OK_56088)
    assert framed.startswith("<|im_end|>\n<|im_start|>user\n<tool_response>\n56088\n")
    assert framed.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")


def test_failure_results_are_formatted_like_any_other() -> None:
    failed = ToolResult(Outcome.MODEL_FAILURE, "error: division by zero")
    assert XmlToolParser().format_result(failed) == "<result>error: division by zero</result>"


# -- extension ------------------------------------------------------------------------------
def test_extension_registers_a_parser_class() -> None:
    @api.register_tool_parser("test_bracket")
    class Bracket:
        stop = ("]]",)

        def parse(self, text: str) -> ToolCall | ParseError | None:
            start, end = text.find("[["), text.find("]]")
            if start < 0 or end < 0:
                return None
            name, _, args = text[start + 2 : end].partition(" ")
            return ToolCall(name, args, start, end + 2)

        def format_result(self, result: ToolResult) -> str:
            return f"=> {result.output}\n"

    parser = get_tool_parser("TEST_BRACKET")
    assert isinstance(parser, Bracket)
    assert parser.parse("[[calculator 1+1]]") == ToolCall("calculator", "1+1", 0, 18)
    with pytest.raises(RegistryError, match="already registered"):
        api.register_tool_parser("test_bracket", XmlToolParser())
