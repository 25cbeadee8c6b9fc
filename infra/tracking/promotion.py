"""Gated promotion: compare the newest registered version with ``best``, then move ``best``.

The promote flow (``flows/promote.py``) calls :func:`compare_newest_with_best` (both
versions scored on the held-out protocol of the newest version's run, see
:mod:`infra.tracking.version_scoring`), decides with :func:`newest_wins`, asks for approval
when needed, then :func:`record_decision` tags the newest version and moves ``best`` when
the decision promotes it. Version tags written:

* ``promotion``: ``approved``, ``auto_approved``, ``rejected`` or ``not_better``
* ``promotion_score`` / ``promotion_best_score``: the two scores of the comparison
* ``promoted_from_version``: the version that held ``best`` before (``-``: none)
* ``promotion_note``: the approver's note (or why it was decided without one)
* ``promotion_flow_run``: the Prefect flow run that decided
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mlflow.exceptions import MlflowException

from infra.tracking.model_registry import (
    BEST_ALIAS,
    NEWEST_ALIAS,
    best_version,
    resolve_model_uri,
)
from infra.tracking.version_scoring import (
    PromotionError,
    Protocol,
    VersionScore,
    protocol_of,
    score_version,
)

logger = logging.getLogger(__name__)
OUTCOME_TAG = "promotion"
SCORE_TAG = "promotion_score"
BEST_SCORE_TAG = "promotion_best_score"
FROM_TAG = "promoted_from_version"
NOTE_TAG = "promotion_note"
FLOW_RUN_TAG = "promotion_flow_run"
#: Outcomes that move ``best`` to the newest version.
PROMOTING_OUTCOMES = frozenset({"approved", "auto_approved"})
OUTCOMES = PROMOTING_OUTCOMES | {"rejected", "not_better"}
#: Episodes (sample rows) shown in the comparison table.
TABLE_ROWS = 10

__all__ = ["PromotionError", "Comparison", "compare_newest_with_best", "record_decision"]


def newest_wins(newest: float, best: float | None, min_improvement: float = 0.0) -> bool:
    """Whether ``newest`` beats ``best`` by more than ``min_improvement`` (no best: it wins)."""
    return best is None or newest > best + min_improvement


@dataclass(frozen=True)
class Comparison:
    """The newest version against the one holding ``best``, on one protocol.

    Attributes:
        model_name: Registered model name.
        protocol: The held-out protocol both were scored under.
        newest: The newest version's score.
        best: The best version's score (None: no version holds ``best``).
        min_improvement: The margin newest must beat best by.
    """

    model_name: str
    protocol: Protocol
    newest: VersionScore
    best: VersionScore | None
    min_improvement: float

    @property
    def newest_is_best(self) -> bool:
        """The newest version already holds ``best`` (nothing to decide)."""
        return self.best is not None and self.best.version == self.newest.version

    @property
    def wins(self) -> bool:
        """The newest version beats best by more than the margin."""
        best = self.best.score if self.best is not None else None
        return not self.newest_is_best and newest_wins(
            self.newest.score, best, self.min_improvement
        )

    def summary(self) -> str:
        """One line: both scores and the verdict."""
        best = (
            f"best (version {self.best.version}) {self.best.score:.4g}"
            if self.best is not None
            else "no version holds 'best'"
        )
        verdict = "newest wins" if self.wins else "newest does not win"
        return (
            f"{self.model_name}: newest (version {self.newest.version}) "
            f"{self.newest.score:.4g} vs {best} on {self.protocol.metric} "
            f"(margin {self.min_improvement:g}): {verdict}"
        )

    def markdown(self) -> str:
        """Both scores and a table of sample rows, for the artifact and the approval form."""
        best = self.best
        lines = [
            f"## Promote {self.model_name} version {self.newest.version}?",
            "",
            f"Held-out protocol `{self.protocol.digest}` ({self.protocol.category}), "
            f"metric `{self.protocol.metric}`, required margin {self.min_improvement:g}.",
            "",
            "| version | alias | score | scored |",
            "|---|---|---|---|",
            f"| {self.newest.version} | {NEWEST_ALIAS} | {self.newest.score:.4f} | "
            f"{self.newest.source} |",
        ]
        if best is not None:
            lines.append(f"| {best.version} | {BEST_ALIAS} | {best.score:.4f} | {best.source} |")
        lines += ["", f"**{self.summary()}**", ""]
        lines += _sample_table(self.newest, best)
        return "\n".join(lines)


def _sample_table(newest: VersionScore, best: VersionScore | None) -> list[str]:
    if not newest.rows:
        return []
    keys = [k for k in newest.rows[0] if k != "seed"]
    head = ["seed"] + [f"newest {k}" for k in keys]
    if best is not None and best.rows:
        head += [f"best {k}" for k in keys]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    best_rows = best.rows if best is not None else []
    for i, row in enumerate(newest.rows[:TABLE_ROWS]):
        cells = [str(row.get("seed", i))] + [_cell(row[k]) for k in keys]
        if i < len(best_rows):
            cells += [_cell(best_rows[i].get(k)) for k in keys]
        lines.append("| " + " | ".join(cells) + " |")
    return ["Sample episodes (first rows):", "", *lines]


def _cell(value: Any) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def newest_version(client: Any, name: str) -> Any:
    """The version holding ``newest`` (else the highest version number).

    Raises:
        PromotionError: The model has no versions.
    """
    try:
        return client.get_model_version_by_alias(name, NEWEST_ALIAS)
    except MlflowException:
        pass
    try:
        return resolve_model_uri(client, f"models:/{name}/latest")
    except MlflowException:
        raise PromotionError(f"registered model {name!r} has no versions to promote") from None


def compare_newest_with_best(
    client: Any, tracking_uri: str, name: str, min_improvement: float = 0.0
) -> Comparison:
    """Score the newest version and the ``best`` one on the newest's held-out protocol.

    Raises:
        PromotionError: No versions, or scores that cannot be compared.
    """
    newest = newest_version(client, name)
    protocol = protocol_of(client, newest)
    best = best_version(client, name)
    newest_score = score_version(client, tracking_uri, protocol, newest)
    best_score = None
    if best is not None:
        best_score = (
            newest_score
            if str(best.version) == str(newest.version)
            else score_version(client, tracking_uri, protocol, best)
        )
    comparison = Comparison(name, protocol, newest_score, best_score, min_improvement)
    logger.info("%s", comparison.summary())
    return comparison


def record_decision(
    client: Any, comparison: Comparison, outcome: str, note: str = "", flow_run_id: str = ""
) -> bool:
    """Tag the newest version with the decision; move ``best`` when it promotes.

    Args:
        client: ``MlflowClient`` of the registry.
        comparison: What :func:`compare_newest_with_best` found.
        outcome: One of :data:`OUTCOMES`.
        note: The approver's note.
        flow_run_id: The Prefect flow run that decided.

    Returns:
        Whether ``best`` moved.
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome {outcome!r}; allowed: {', '.join(sorted(OUTCOMES))}")
    name, version = comparison.model_name, comparison.newest.version
    best = comparison.best
    tags = {
        OUTCOME_TAG: outcome,
        SCORE_TAG: repr(comparison.newest.score),
        BEST_SCORE_TAG: repr(best.score) if best is not None else "-",
        FROM_TAG: best.version if best is not None else "-",
        NOTE_TAG: note or "-",
        FLOW_RUN_TAG: flow_run_id or "-",
    }
    for key, value in tags.items():
        client.set_model_version_tag(name, version, key, value)
    moved = outcome in PROMOTING_OUTCOMES
    if moved:
        client.set_registered_model_alias(name, BEST_ALIAS, version)
    logger.info("%s version %s: %s%s", name, version, outcome, " (now best)" if moved else "")
    return moved
