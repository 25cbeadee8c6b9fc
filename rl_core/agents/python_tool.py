"""The ``python`` tool: runs the model's code as a Python program in a sandbox.

The sandbox is looked up by name in :data:`~rl_core.agents.sandbox.SANDBOXES` and built on
the first call (its entry may be a ``"module:attribute"`` reference into the cluster code,
imported only then). The result's outcome is the sandbox run's; its output is the program's
standard output, followed on failure by the last lines of its standard error, cut to
:attr:`PythonTool.max_output_chars`.
"""

from __future__ import annotations

import textwrap
from typing import Any

from rl_core.agents.outcomes import Outcome, ToolResult
from rl_core.agents.sandbox import LazySandbox, SandboxLimits
from rl_core.agents.tools import Tool, register_tool

#: Output an OK run that printed nothing gets, so that the model learns to print.
NO_OUTPUT = "(no output; print() the values you need)"


class PythonTool(Tool):
    """Runs its argument as a Python program in a sandbox.

    Args:
        sandbox: Name of the sandbox in ``SANDBOXES`` (checked here, built on first call).
        limits: Limits of each run (default: ``SandboxLimits()``).
        max_output_chars: Most characters of output the model gets back (the head of the
            output is kept, the rest replaced by a note).
        stderr_lines: Lines of the end of standard error shown when the run failed.

    Raises:
        rl_core.registry.RegistryError: ``sandbox`` is not a registered sandbox.
    """

    name = "python"
    description = "Runs a Python program and returns what it prints; use print() to show results."
    parameter = "code"

    def __init__(
        self,
        sandbox: str = "subprocess",
        limits: SandboxLimits | None = None,
        max_output_chars: int = 2000,
        stderr_lines: int = 5,
    ) -> None:
        self._sandbox = LazySandbox(sandbox)  # checks the name now
        self.sandbox_name = sandbox
        self.limits = limits or SandboxLimits()
        self.max_output_chars = max_output_chars
        self.stderr_lines = stderr_lines

    def sandbox(self) -> Any:
        """The sandbox, built on first use: a class is constructed without arguments."""
        return self._sandbox.get()

    def __call__(self, arguments: str) -> ToolResult:
        """Run ``arguments`` (dedented) as a program; the outcome is the sandbox run's."""
        if not isinstance(arguments, str) or not arguments.strip():
            return self.model_failure("error: empty program")
        try:
            sandbox = self.sandbox()
        except Exception as exc:  # missing module, failing constructor: not the model's fault
            detail = f"sandbox {self.sandbox_name!r} unavailable: {type(exc).__name__}: {exc}"
            return ToolResult(Outcome.INFRA_FAILURE, "python sandbox unavailable", detail=detail)
        run = sandbox.run(textwrap.dedent(arguments), limits=self.limits)
        output = run.stdout
        if run.outcome is not Outcome.OK:
            tail = "\n".join(run.stderr.rstrip().splitlines()[-self.stderr_lines :])
            note = f"[stopped: {run.limit} limit]" if run.limit else ""
            output = "\n".join(part for part in (output.rstrip(), tail, note) if part)
        elif not output.strip():
            output = NO_OUTPUT
        detail = run.limit or (f"exit code {run.exit_code}" if run.exit_code else "")
        return ToolResult(run.outcome, self._cut(output), detail=detail)

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_output_chars:
            return text
        cut = len(text) - self.max_output_chars
        return f"{text[: self.max_output_chars]}\n[... {cut} more characters cut]"


register_tool("python", PythonTool)
