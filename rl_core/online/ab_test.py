"""A/B comparison of two served versions by their users' acceptance rates.

With gated promotion an online run serves each newly trained version as a *candidate* to a
share of the requests while the promoted *main* version answers the rest. The users'
accept/reject feedback on each version's answers is the evidence: the candidate wins when
both versions were judged often enough and the candidate's acceptance rate beats main's by
more than a margin. The one-sided two-proportion z statistic is reported beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class VersionFeedback:
    """How often users accepted one served version's answers.

    Attributes:
        version: The weight version.
        accepted: Answers accepted.
        judged: Answers with accept/reject feedback.
    """

    version: int
    accepted: int
    judged: int

    @property
    def rate(self) -> float | None:
        """Acceptance rate (None: never judged)."""
        return self.accepted / self.judged if self.judged else None


@dataclass(frozen=True)
class ABComparison:
    """The served main version against the candidate.

    Attributes:
        main: Feedback on the main version's answers.
        candidate: Feedback on the candidate's answers (None: no candidate served).
        min_improvement: The margin the candidate's rate must beat main's by.
        min_judged: Judged answers each version needs before a decision.
    """

    main: VersionFeedback
    candidate: VersionFeedback | None
    min_improvement: float = 0.0
    min_judged: int = 1

    @property
    def enough_feedback(self) -> bool:
        """Both versions were judged at least ``min_judged`` times."""
        return self.candidate is not None and min(self.main.judged, self.candidate.judged) >= (
            self.min_judged
        )

    @property
    def wins(self) -> bool:
        """The candidate's acceptance rate beats main's by more than the margin."""
        if not self.enough_feedback:
            return False
        return self.candidate.rate - self.main.rate > self.min_improvement

    @property
    def z(self) -> float | None:
        """One-sided two-proportion z statistic of candidate over main (None: undefined)."""
        if not self.enough_feedback:
            return None
        a, b = self.candidate, self.main
        pooled = (a.accepted + b.accepted) / (a.judged + b.judged)
        spread = math.sqrt(pooled * (1 - pooled) * (1 / a.judged + 1 / b.judged))
        return (a.rate - b.rate) / spread if spread > 0 else None

    def summary(self) -> str:
        """One line: both rates, their counts and the verdict."""
        main = _describe("main", self.main)
        if self.candidate is None:
            return f"{main}; no candidate is served"
        line = f"{_describe('candidate', self.candidate)} against {main}"
        if not self.enough_feedback:
            return f"{line}: too little feedback to decide (at least {self.min_judged} each)"
        z = f", z = {self.z:.2f}" if self.z is not None else ""
        verdict = "wins" if self.wins else "does not win"
        return f"{line}{z}: the candidate {verdict} (margin {self.min_improvement:g})"

    def markdown(self) -> str:
        """A table of both versions and the summary (a Prefect artifact, the approval form)."""
        rows = [("main", self.main)] + ([("candidate", self.candidate)] if self.candidate else [])
        lines = ["| served as | version | accepted | judged | acceptance rate |"]
        lines.append("| --- | --- | --- | --- | --- |")
        for name, v in rows:
            rate = "-" if v.rate is None else f"{v.rate:.3f}"
            lines.append(f"| {name} | {v.version} | {v.accepted} | {v.judged} | {rate} |")
        return "\n".join([*lines, "", self.summary()])


def _describe(name: str, feedback: VersionFeedback) -> str:
    rate = "no feedback" if feedback.rate is None else f"{feedback.rate:.3f}"
    return f"{name} v{feedback.version} {rate} ({feedback.accepted}/{feedback.judged})"


class ShareSplit:
    """Which requests the candidate answers: exactly ``share`` of them, spread evenly.

    A running credit grows by ``share`` per request and the candidate answers whenever it
    reaches one, so after ``n`` requests the candidate has answered ``floor(n * share)``
    of them (0.5: every second one). Unlike a random or hashed split, a small batch of
    requests can never all land on one version, and the shares of both versions' feedback
    are known in advance.

    Args:
        share: The candidate's share of the requests, in (0, 1).

    Raises:
        ValueError: If ``share`` is outside (0, 1).
    """

    def __init__(self, share: float) -> None:
        if not 0.0 < share < 1.0:
            raise ValueError(f"an A/B share must be in (0, 1), got {share}")
        self.share = share
        self._credit = 0.0

    def next_is_candidate(self) -> bool:
        """Whether the next request goes to the candidate (advances the split)."""
        self._credit += self.share
        if self._credit >= 1.0 - 1e-9:
            self._credit -= 1.0
            return True
        return False
