"""``code_tests``: run a completion's code against a prompt's unit tests in a sandbox.

The code is the completion's text after its last ``####`` (the whole completion when there
is none). The prompt row's fields say how to test it:

* ``setup``: a Python template with ``{code}``, e.g. ``"f = lambda x: ({code})"`` (default:
  the code itself);
* ``tests``: statements (usually asserts) run one by one after the setup.

The sandbox runs one program per completion: the setup, then each test in its own ``try``,
printing a line per passed test. The score is ``scale`` times the fraction of tests passed,
with three outcomes:

* **ok**: the program ran: the passed fraction (0 when the setup itself fails);
* **model failure**: the code hit a limit (an endless loop, too much memory) or crashed the
  interpreter: the tests passed before that count, the rest fail;
* **infrastructure failure**: the sandbox failed (it could not start, or timed out before
  the code ran): retried ``reward.sandbox_retries`` times, then the row is **not scored**
  (NaN, never a silent 0): training leaves it out of its group's statistics.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from rl_core.agents.outcomes import Outcome
from rl_core.agents.sandbox import LazySandbox, SandboxLimits
from rl_core.rewards.registry import register_reward

logger = logging.getLogger(__name__)

#: Line the harness prints for each passed test.
PASS_MARK = "rlpipe-test-passed"

_HARNESS = """\
import sys
_setup = {setup!r}
_tests = {tests!r}
_ns = {{"__name__": "__main__"}}
try:
    exec(compile(_setup, "<solution>", "exec"), _ns)
except BaseException:
    sys.exit(0)
for _test in _tests:
    try:
        exec(compile(_test, "<test>", "exec"), _ns)
    except BaseException:
        continue
    print({mark!r}, flush=True)
"""


def final_code(completion: str) -> str:
    """The code of a completion: the text after its last ``####``, stripped."""
    return completion.rsplit("####", 1)[-1].strip()


def harness_program(code: str, fields: dict[str, Any]) -> tuple[str, int]:
    """The sandboxed program testing ``code`` with a row's ``setup`` and ``tests``.

    Returns:
        ``(program, number of tests)``.

    Raises:
        ValueError: The row has no ``tests`` list of strings.
    """
    tests = fields.get("tests")
    if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests) or not tests:
        raise ValueError(
            f"code_tests needs each prompt row's 'tests' field: a non-empty list of Python "
            f"statements; got {tests!r}"
        )
    setup = str(fields.get("setup", "{code}")).replace("{code}", code)
    return _HARNESS.format(setup=setup, tests=tests, mark=PASS_MARK), len(tests)


@register_reward("code_tests")
class CodeTestsReward:
    """The ``code_tests`` reward (see the module docstring).

    Args:
        reward_cfg: The ``reward`` section: ``sandbox`` (a registered sandbox),
            ``sandbox_retries``, ``code_wall_seconds`` and ``code_workers`` (programs run at
            once).
    """

    #: The name its log lines go by.
    name = "code_tests"

    def __init__(self, reward_cfg: Any) -> None:
        self.sandbox_name = str(getattr(reward_cfg, "sandbox", "subprocess"))
        self.retries = int(getattr(reward_cfg, "sandbox_retries", 2))
        self.workers = int(getattr(reward_cfg, "code_workers", 4))
        wall = float(getattr(reward_cfg, "code_wall_seconds", 5.0))
        self.limits = SandboxLimits(wall_seconds=wall, cpu_seconds=max(1, int(wall)))
        self._sandbox = LazySandbox(self.sandbox_name)

    def program(self, completion: str, fields: dict[str, Any]) -> tuple[str, int]:
        """The sandboxed program testing ``completion`` and its number of tests.

        Subclasses change how a completion and a prompt row become the program (the
        ``humaneval`` reward); the running and scoring stay here.
        """
        return harness_program(final_code(completion), fields)

    def score_one(self, completion: str, fields: dict[str, Any]) -> float:
        """The passed fraction of one completion (NaN: the sandbox kept failing)."""
        program, total = self.program(completion, fields)
        for attempt in range(self.retries + 1):
            try:
                run = self._sandbox.get().run(program, limits=self.limits)
            except Exception as exc:  # the sandbox's own machinery, not the code
                logger.warning("%s: sandbox %r failed: %s", self.name, self.sandbox_name, exc)
                continue
            if run.outcome is Outcome.INFRA_FAILURE:
                logger.info(
                    "%s: sandbox infrastructure failure (attempt %d): %s",
                    self.name,
                    attempt + 1,
                    run.detail,
                )
                continue
            passed = sum(line.strip() == PASS_MARK for line in run.stdout.splitlines())
            return min(passed, total) / total
        return float("nan")

    def __call__(
        self,
        *,
        completions: Sequence[str],
        fields: Sequence[dict[str, Any]],
        scale: float = 1.0,
        **_: Any,
    ) -> np.ndarray:
        """``scale`` times each completion's passed fraction (NaN: not scored)."""
        if len(fields) != len(completions):
            raise ValueError(f"{len(completions)} completions for {len(fields)} prompt rows")
        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            scores = list(pool.map(self.score_one, completions, fields))
        return np.asarray(scores, dtype=np.float32) * np.float32(scale)
