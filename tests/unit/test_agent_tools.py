"""Agent tools: the registry, run_tool's failure mapping, the calculator and the python tool."""

from __future__ import annotations

import pytest

from rl_core import api
from rl_core.agents.calculator import MAX_DIGITS, evaluate, format_number
from rl_core.agents.outcomes import Outcome, ToolResult
from rl_core.agents.python_tool import NO_OUTPUT, PythonTool
from rl_core.agents.sandbox import SANDBOXES, SandboxLimits, SandboxRun
from rl_core.agents.tools import TOOLS, Tool, describe_tools, get_tool, run_tool, tool_schemas
from rl_core.registries import KINDS, registry_for
from rl_core.registry import RegistryError


@pytest.fixture(autouse=True)
def isolated(clean_registries):
    """Registrations of a test do not leak into the next one."""
    yield


# -- calculator ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("123*456", "56088"),
        ("  123 * 456\n", "56088"),
        ("1 +\n 2", "3"),
        ("(1+2)*(3+4)", "21"),
        ("(" * 150 + "1" + ")" * 150, "1"),
        ("2**10", "1024"),
        ("2**3**2", "512"),
        ("-7 // 2", "-4"),
        ("-7 % 3", "2"),
        ("+5 - -5", "10"),
        ("6/3", "2"),
        ("7/2", "3.5"),
        ("0.1+0.2", "0.3"),
        ("1/3", "0.333333333333"),
        ("2**-2", "0.25"),
        ("1_000 * 2", "2000"),
        ("10**99", "1" + "0" * 99),
        ("1" + "+1" * 400, "401"),  # long sums are not deep nesting
    ],
)
def test_calculator_results(expression: str, expected: str) -> None:
    result = run_tool("calculator", expression)
    assert (result.outcome, result.output) == (Outcome.OK, expected)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("x + 1", "the name 'x' is not allowed"),
        ("__import__('os').system('true')", "not allowed"),
        ("abs(-1)", "a function call is not allowed"),
        ("(1).__class__", "an attribute is not allowed"),
        ("[1, 2][0]", "not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("[i for i in (1, 2)]", "not allowed"),
        ("'a' * 3", "only numbers are allowed"),
        ("True + 1", "only numbers are allowed"),
        ("1j * 2", "only numbers are allowed"),
        ("1 < 2", "not allowed"),
        ("2 ^ 3", "use ** for powers"),
        ("2 << 3", "LShift is not allowed"),
        ("9**9**9", "result too large"),
        ("10**100", "result too large"),
        ("2**100000000", "result too large"),
        ("1e200", "result too large"),
        ("1/0", "division by zero"),
        ("5 // 0", "division by zero"),
        ("5 % 0.0", "division by zero"),
        ("(-8) ** 0.5", "not a real number"),
        ("", "empty expression"),
        ("1 +", "invalid expression"),
        ("1" * 2000, "expression too long"),
        ("-" * 150 + "1", "nested too deeply"),
        ("(" * 300 + "1" + ")" * 300, "invalid expression"),
    ],
)
def test_calculator_refuses_with_a_message_for_the_model(expression: str, message: str) -> None:
    result = run_tool("calculator", expression)
    assert result.outcome is Outcome.MODEL_FAILURE
    assert message in result.output and result.output.startswith("error: ")


def test_calculator_never_compiles_code(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    def refuse(*args, **kwargs):
        raise AssertionError("the calculator must not eval/exec/compile")

    for name in ("eval", "exec"):
        monkeypatch.setattr(builtins, name, refuse)
    assert evaluate("2*(3+4)") == 14


def test_format_number() -> None:
    assert format_number(10**MAX_DIGITS - 1) == "9" * MAX_DIGITS
    assert format_number(-0.0) == "0"
    assert format_number(2.5e20) == "2.5e+20"
    assert format_number(1e-7) == "1e-07"


# -- registry and run_tool ----------------------------------------------------------------
def test_builtin_tools_and_registry_kinds() -> None:
    assert {"calculator", "python"} <= set(TOOLS.names())
    for kind in ("tool", "tool_parser", "agent_loop", "sandbox"):
        assert kind in KINDS
        assert registry_for(kind).names()
    assert "calculator: Evaluates" in describe_tools(["calculator"])
    (schema,) = tool_schemas(["calculator"])
    assert schema["function"]["parameters"]["required"] == ["expression"]


def test_unknown_tool_is_the_models_failure_and_lists_the_tools() -> None:
    result = run_tool("calc", "1+1")
    assert result.outcome is Outcome.MODEL_FAILURE
    assert "unknown tool 'calc'; registered: calculator, python" in result.output
    limited = run_tool("python", "print(1)", allowed=["calculator"])
    assert limited.outcome is Outcome.MODEL_FAILURE
    assert limited.output == "unknown tool 'python'; registered: calculator"


def test_unknown_tool_lookup_names_the_known_ones() -> None:
    with pytest.raises(RegistryError, match="unknown tool 'nope'; known: calculator, python"):
        get_tool("nope")


def test_a_tool_that_raises_is_an_infrastructure_failure() -> None:
    @api.register_tool("test_broken")
    def broken(arguments: str) -> str:
        """Always breaks."""
        raise RuntimeError("disk on fire")

    result = run_tool("test_broken", "x")
    assert result.outcome is Outcome.INFRA_FAILURE
    assert result.detail == "RuntimeError: disk on fire"
    assert "internal error" in result.output and result.latency_s >= 0


def test_a_tool_returning_something_else_is_an_infrastructure_failure() -> None:
    api.register_tool("test_wrong_type", lambda arguments: None)
    result = run_tool("test_wrong_type", "x")
    assert result.outcome is Outcome.INFRA_FAILURE and "returned NoneType, not str" in result.detail

    class Wrong(Tool):
        name, description = "wrong", "returns a number"

        def __call__(self, arguments: str):
            return 42

    api.register_tool("test_wrong_class", Wrong)
    result = run_tool("test_wrong_class", "x")
    assert result.outcome is Outcome.INFRA_FAILURE and "not a ToolResult" in result.detail


def test_extension_tool_forms_and_force() -> None:
    @api.register_tool("test_echo")
    class Echo(Tool):
        name, description = "echo", "Echoes its input."

        def __call__(self, arguments: str) -> ToolResult:
            return self.ok(arguments.upper())

    assert run_tool("TEST_ECHO", "hi").output == "HI"
    assert get_tool("test_echo") is get_tool("test_echo")  # a class is built once
    with pytest.raises(RegistryError, match="already registered"):
        api.register_tool("test_echo", lambda arguments: arguments)
    api.register_tool("test_echo", lambda arguments: arguments[::-1], force=True)
    assert run_tool("test_echo", "abc").output == "cba"  # the new entry, not the cached one


# -- python tool (fake sandbox, no subprocess) -----------------------------------------------
class FakeSandbox:
    """Answers from a script; counts how often it was built."""

    built = 0

    def __init__(self) -> None:
        FakeSandbox.built += 1
        self.calls: list[tuple[str, SandboxLimits | None]] = []

    def run(self, code: str, stdin: str = "", limits: SandboxLimits | None = None) -> SandboxRun:
        self.calls.append((code, limits))
        if "raise" in code:
            stderr = "Traceback (most recent call last):\n" + "  line\n" * 10 + "ValueError: boom\n"
            return SandboxRun(Outcome.MODEL_FAILURE, 1, "partial\n", stderr, 0.1, 0.1)
        if "crash" in code:
            return SandboxRun(Outcome.INFRA_FAILURE, None, "", "could not start", 0.0, 0.0)
        if "loop" in code:
            return SandboxRun(Outcome.MODEL_FAILURE, -9, "", "", 5.0, 5.0, limit="cpu")
        if "silent" in code:
            return SandboxRun(Outcome.OK, 0, "", "", 0.1, 0.1)
        if "big" in code:
            return SandboxRun(Outcome.OK, 0, "x" * 5000, "", 0.1, 0.1)
        return SandboxRun(Outcome.OK, 0, "42\n", "", 0.1, 0.1)


@pytest.fixture()
def fake_sandbox():
    FakeSandbox.built = 0
    SANDBOXES.register("test_fake", FakeSandbox)
    return FakeSandbox


def test_python_tool_runs_in_the_named_sandbox_built_lazily(fake_sandbox) -> None:
    tool = PythonTool(sandbox="test_fake", limits=SandboxLimits(cpu_seconds=1))
    assert fake_sandbox.built == 0  # nothing is built before the first call
    result = tool("    x = 6 * 7\n    print(x)\n")
    assert (result.outcome, result.output) == (Outcome.OK, "42\n")
    tool("print(1)")
    assert fake_sandbox.built == 1
    code, limits = tool.sandbox().calls[0]
    assert code == "x = 6 * 7\nprint(x)\n"  # dedented
    assert limits == SandboxLimits(cpu_seconds=1)


def test_python_tool_failures(fake_sandbox) -> None:
    tool = PythonTool(sandbox="test_fake", stderr_lines=2, max_output_chars=100)
    failed = tool("raise ValueError('boom')")
    assert failed.outcome is Outcome.MODEL_FAILURE
    assert failed.output == "partial\n  line\nValueError: boom"
    assert failed.detail == "exit code 1"
    limit = tool("loop()")
    assert limit.outcome is Outcome.MODEL_FAILURE and limit.output == "[stopped: cpu limit]"
    assert tool("crash()").outcome is Outcome.INFRA_FAILURE
    assert tool("silent()").output == NO_OUTPUT
    big = tool("big()")
    assert big.output.startswith("x" * 100) and "4900 more characters cut" in big.output
    assert tool("  ").outcome is Outcome.MODEL_FAILURE


def test_python_tool_registered_under_a_test_name(fake_sandbox) -> None:
    api.register_tool("test_python", PythonTool(sandbox="test_fake"))
    result = run_tool("test_python", "print(42)")
    assert result.outcome is Outcome.OK and result.latency_s >= 0


def test_python_tool_unknown_or_broken_sandbox() -> None:
    with pytest.raises(RegistryError, match="unknown sandbox 'nowhere'; known: .*subprocess"):
        PythonTool(sandbox="nowhere")
    SANDBOXES.register("test_missing", "no_such_module_xyz:Sandbox")
    result = PythonTool(sandbox="test_missing")("print(1)")
    assert result.outcome is Outcome.INFRA_FAILURE
    assert "ModuleNotFoundError" in result.detail
