"""Sandboxes that run model-written Python code under resource limits.

:class:`~infra.sandbox.subprocess_sandbox.SubprocessSandbox` (the ``"subprocess"`` entry of
:data:`rl_core.agents.sandbox.SANDBOXES`) runs each snippet in a fresh interpreter through
:mod:`infra.sandbox.launcher` (namespaces, a dedicated uid, rlimits); :mod:`infra.sandbox.pump`
moves its bytes and kills what it leaves; :mod:`infra.sandbox.classify` turns how it ended
into an :class:`~rl_core.agents.outcomes.Outcome`.
"""

from rl_core.agents.sandbox import SANDBOXES

SANDBOXES.register("subprocess", "infra.sandbox.subprocess_sandbox:SubprocessSandbox")
