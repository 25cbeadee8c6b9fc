"""``code_io``: a program judged on input/output test cases, as verl's code datasets are.

verl's code rows (``data_source`` ``codecontests``, ``apps``, ``codeforces``, ``taco``) keep
their test cases in ``reward_model.ground_truth``: a JSON object (or its text) with
``inputs`` and ``outputs`` lists, and optionally ``fn_name``:

* without ``fn_name``, each input is the program's standard input and the output what it
  must print (compared token by token, so spacing and line ends do not matter);
* with ``fn_name``, each input is the list of arguments of that function (a top-level
  function, or a method of a class ``Solution``) and the output its return value.

The program is the completion's last fenced code block (the whole completion when it has
none). It runs in ``code_tests``' sandbox (:class:`~rl_core.rewards.code_tests.CodeTestsReward`
and its ``reward.sandbox*`` / ``reward.code_*`` settings), all cases in one sandboxed
process: the score is ``scale`` times the fraction of cases passed, NaN (not scored) when the
sandbox itself kept failing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rl_core.rewards.code_tests import PASS_MARK, CodeTestsReward
from rl_core.rewards.data_source import register_data_source
from rl_core.rewards.registry import register_reward

#: verl's code data sources, scored by this reward under ``reward_type: data_source``.
CODE_SOURCES = ("codecontests", "apps", "codeforces", "taco")
_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)

_HARNESS = """\
import io, sys
_code = {code!r}
_cases = {cases!r}
_fn = {fn!r}
_stdout = sys.stdout
for _inp, _out in _cases:
    _ns = {{"__name__": "__main__"}}
    _buf = io.StringIO()
    try:
        if _fn is None:
            sys.stdin, sys.stdout = io.StringIO(_inp), _buf
            try:
                exec(compile(_code, "<solution>", "exec"), _ns)
            except SystemExit:
                pass
            finally:
                sys.stdin, sys.stdout = sys.__stdin__, _stdout
            _ok = _buf.getvalue().split() == str(_out).split()
        else:
            sys.stdout = _buf
            try:
                exec(compile(_code, "<solution>", "exec"), _ns)
                _f = _ns.get(_fn) or getattr(_ns["Solution"](), _fn)
                _got = _f(*_inp)
            finally:
                sys.stdout = _stdout
            _ok = _got == _out or (isinstance(_got, tuple) and list(_got) == _out)
    except BaseException:
        sys.stdout = _stdout
        continue
    if _ok:
        print({mark!r}, flush=True)
"""


def solution_code(completion: str) -> str:
    """The completion's last fenced code block, or the whole completion without one."""
    blocks = _FENCED.findall(completion)
    return (blocks[-1] if blocks else completion).strip()


def io_cases(fields: dict[str, Any]) -> tuple[list[tuple[Any, Any]], str | None]:
    """The ``(input, output)`` cases and ``fn_name`` of a row's ``reward_model.ground_truth``.

    Raises:
        ValueError: The row has no such ground truth, or it has no cases.
    """
    truth = (fields.get("reward_model") or {}).get("ground_truth")
    if isinstance(truth, str):
        try:
            truth = json.loads(truth)
        except json.JSONDecodeError as exc:
            raise ValueError(f"code_io: reward_model.ground_truth is not JSON: {exc}") from None
    if not isinstance(truth, dict) or not isinstance(truth.get("inputs"), list):
        raise ValueError(
            "code_io needs each prompt row's reward_model.ground_truth: a JSON object with "
            "'inputs' and 'outputs' lists (verl's code rows)"
        )
    inputs, outputs = truth["inputs"], truth.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != len(inputs) or not inputs:
        raise ValueError(
            f"code_io: ground_truth has {len(inputs)} inputs and "
            f"{len(outputs) if isinstance(outputs, list) else 'no'} outputs"
        )
    fn = truth.get("fn_name") or None
    return list(zip(inputs, outputs, strict=True)), fn


@register_reward("code_io")
class CodeIOReward(CodeTestsReward):
    """The ``code_io`` reward (module docstring)."""

    name = "code_io"

    def program(self, completion: str, fields: dict[str, Any]) -> tuple[str, int]:
        """The sandboxed program running every test case of the row."""
        cases, fn = io_cases(fields)
        code = solution_code(completion)
        return _HARNESS.format(code=code, cases=cases, fn=fn, mark=PASS_MARK), len(cases)


for _source in CODE_SOURCES:
    register_data_source(_source, "code_io")
