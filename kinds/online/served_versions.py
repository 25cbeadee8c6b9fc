"""Which versions an endpoint serves: publishing a new one, promoting the candidate.

The endpoint's weights file (:class:`~kinds.online.deployment.Weights`) names the main
version and, with gated promotion, a candidate served to a share of the requests. The
trainer (a new version) and the promote flow (the candidate becomes main) both change it
read-modify-write; an exclusive lock on ``<weights file>.lock`` keeps one from undoing the
other.
"""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kinds.online.deployment import Weights, read_weights, update_weights
from kinds.online.store import FeedbackStore
from rl_core.online.ab_test import ABComparison, VersionFeedback

logger = logging.getLogger(__name__)


class NoCandidateError(RuntimeError):
    """The endpoint serves no candidate version to promote."""


@contextmanager
def weights_lock(weights_file: str | Path) -> Iterator[None]:
    """Hold the exclusive lock of ``weights_file`` for the block."""
    lock = Path(f"{weights_file}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def current_weights(weights_file: str | Path) -> Weights | None:
    """What the endpoint serves now (None: nothing published yet)."""
    path = Path(weights_file)
    return read_weights(path) if path.is_file() else None


def publish_version(
    weights_file: str | Path, version: int, model_dir: str, candidate_share: float | None
) -> Weights:
    """Serve ``version``: as the main version, or as the candidate beside the current main.

    Args:
        weights_file: The endpoint's weights file.
        version: The new weight version.
        model_dir: Its exported model directory.
        candidate_share: None: the new version replaces main (no split); a share in (0, 1):
            it becomes the candidate (replacing an older one) and main stays until the
            promote flow promotes it. With nothing served yet it becomes main either way.

    Returns:
        What is served now.
    """
    with weights_lock(weights_file):
        current = current_weights(weights_file)
        if candidate_share is None or current is None:
            new = Weights(version, model_dir)
        else:
            new = Weights(current.version, current.model_dir, version, model_dir, candidate_share)
        update_weights(new, weights_file)
    return new


def promote_candidate(weights_file: str | Path, expected: int | None = None) -> Weights:
    """Make the candidate the main version (no split until the next candidate).

    Args:
        weights_file: The endpoint's weights file.
        expected: The candidate version the decision was about: when the trainer has
            published a newer one since, that one is not promoted unseen.

    Raises:
        NoCandidateError: No candidate is served, or another one than ``expected``.
    """
    with weights_lock(weights_file):
        current = current_weights(weights_file)
        if current is None or current.candidate_version is None:
            raise NoCandidateError(f"{weights_file}: no candidate version is served")
        if expected is not None and current.candidate_version != expected:
            raise NoCandidateError(
                f"{weights_file}: the candidate is now version {current.candidate_version}, "
                f"not {expected} (a newer one was published meanwhile): compare again"
            )
        new = Weights(current.candidate_version, str(current.candidate_dir))
        update_weights(new, weights_file)
    logger.info("promoted weight version %d to main", new.version)
    return new


def served_dirs(weights: Weights | None) -> set[Path]:
    """The model directories ``weights`` names."""
    if weights is None:
        return set()
    return {Path(d) for d in (weights.model_dir, weights.candidate_dir) if d}


def version_feedback(store: FeedbackStore, version: int) -> VersionFeedback:
    """Accept/reject feedback on ``version``'s answers, as main and as candidate together."""
    counts = [n for (v, _), n in store.acceptance().items() if v == version]
    return VersionFeedback(version, sum(a for a, _ in counts), sum(j for _, j in counts))


def ab_comparison(
    store: FeedbackStore,
    weights_file: str | Path,
    min_improvement: float = 0.0,
    min_judged: int = 1,
) -> ABComparison | None:
    """The served main version against the candidate (None: nothing served yet)."""
    current = current_weights(weights_file)
    if current is None:
        return None
    candidate = (
        None
        if current.candidate_version is None
        else version_feedback(store, current.candidate_version)
    )
    return ABComparison(
        version_feedback(store, current.version), candidate, min_improvement, min_judged
    )


def ab_metrics(comparison: ABComparison | None) -> dict[str, float]:
    """``online/ab_*`` metrics: each served version and its acceptance so far."""
    if comparison is None:
        return {}
    main, candidate = comparison.main, comparison.candidate
    metrics = {
        "online/ab_main_version": float(main.version),
        "online/ab_main_judged": float(main.judged),
    }
    if main.rate is not None:
        metrics["online/ab_main_acceptance"] = main.rate
    if candidate is not None:
        metrics["online/ab_candidate_version"] = float(candidate.version)
        metrics["online/ab_candidate_judged"] = float(candidate.judged)
        if candidate.rate is not None:
            metrics["online/ab_candidate_acceptance"] = candidate.rate
    return metrics
