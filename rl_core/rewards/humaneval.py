"""``humaneval``: a completion of a HumanEval prompt, run against the problem's unit tests.

The program is the official harness's: the prompt (the function header), the completion's
function, the problem's ``test`` code (which defines ``check(candidate)``), then
``check(<entry_point>)``. Two forms of completion are accepted:

* **the function body**, HumanEval's own convention (the completion continues the prompt):
  its text up to the first non-blank line that is not indented, where the function ends
  (where the Codex paper's stop sequences, a new line starting ``class``, ``def``, ``#``,
  ``if`` or ``print``, cut it);
* **the whole function**, for models that restate it (e.g. a chat model's answer): a
  completion with a line starting ``def <entry_point>(``. Its code is the first fenced
  Markdown block that holds that line (an unclosed fence runs to the end), else the whole
  completion. It runs after the prompt, so the prompt's imports and helper functions are
  defined and the restated function replaces the header's.

Scoring is ``code_tests``' (:class:`~rl_core.rewards.code_tests.CodeTestsReward`, its
``reward.sandbox*`` and ``reward.code_*`` settings): one sandboxed program per completion
with one test, ``check(<entry_point>)``. The score is ``scale`` when it passes, 0 when it
does not (a failed assert, an exception, a syntax error, a limit such as an endless loop),
and NaN (not scored) when the sandbox itself kept failing.

A prompt row needs the fields ``prompt``, ``entry_point`` and ``test``
(:mod:`rl_core.data.humaneval` writes them, with ``data_source: openai/openai_humaneval``,
which the ``data_source`` reward, the reasoning default, scores with this one).
"""

from __future__ import annotations

import re
from typing import Any

from rl_core.data.humaneval import DATA_SOURCE
from rl_core.rewards.code_tests import CodeTestsReward, harness_program
from rl_core.rewards.data_source import register_data_source
from rl_core.rewards.registry import register_reward

#: The fields a prompt row needs.
REQUIRED_FIELDS = ("prompt", "entry_point", "test")
_FENCED = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def function_body(completion: str) -> str:
    """The completion up to its first non-blank line that is not indented (the body's end)."""
    lines = completion.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() and not line[0].isspace():
            return "".join(lines[:i])
    return completion


def restated_function(completion: str, entry_point: str) -> str | None:
    """The code of a completion that defines ``entry_point`` itself, or None when it does not.

    The code is the first fenced block holding a line ``def <entry_point>(``, else the
    whole completion.
    """
    defines = re.compile(rf"^def\s+{re.escape(entry_point)}\s*\(", re.MULTILINE)
    if not defines.search(completion):
        return None
    blocks = [b for b in _FENCED.findall(completion) if defines.search(b)]
    return blocks[0] if blocks else completion


def humaneval_solution(completion: str, fields: dict[str, Any]) -> str:
    """The prompt completed by ``completion`` (either form, see the module docstring).

    Raises:
        ValueError: The row lacks a field of :data:`REQUIRED_FIELDS`.
    """
    missing = [k for k in REQUIRED_FIELDS if not isinstance(fields.get(k), str)]
    if missing:
        raise ValueError(
            f"humaneval needs each prompt row's fields {', '.join(REQUIRED_FIELDS)} (strings; "
            f"data.source: humaneval writes them); missing: {', '.join(missing)}"
        )
    restated = restated_function(completion, fields["entry_point"])
    if restated is not None:
        return f"{fields['prompt']}\n{restated}"
    return fields["prompt"] + function_body(completion)


def humaneval_program(completion: str, fields: dict[str, Any]) -> tuple[str, int]:
    """The sandboxed program: solution, the problem's tests, ``check(<entry_point>)``.

    Returns:
        ``(program, 1)``: one test, the problem's ``check``.
    """
    code = f"{humaneval_solution(completion, fields)}\n\n{fields['test']}\n"
    return harness_program(code, {"tests": [f"check({fields['entry_point']})"]})


@register_reward("humaneval")
class HumanEvalReward(CodeTestsReward):
    """The ``humaneval`` reward (see the module docstring); settings as ``code_tests``'."""

    name = "humaneval"

    def program(self, completion: str, fields: dict[str, Any]) -> tuple[str, int]:
        """The program running the problem's ``check`` on the completed function."""
        return humaneval_program(completion, fields)


register_data_source(DATA_SOURCE, "humaneval")
