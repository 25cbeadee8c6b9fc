"""Score registered model versions on one held-out evaluation protocol.

The protocol is the resolved config of the run that registered the newest version (its
``env``, ``eval`` and ``run.seed`` sections; ``config/resolved_config.yaml`` in the run's
artifacts). Each version's own model directory supplies the policy. How a version is scored
depends on its kind of training (:attr:`rl_core.kind.Kind.version_scorer`): control policies play the
protocol's evaluation episodes again (deterministic actions, fixed seeds), so both versions
see exactly the same episodes; a category without a scorer falls back to the score each
version was registered with, which is only compared under the same protocol.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infra.tracking.model_registry import EVAL_PROTOCOL_TAG, SCORE_TAG, download_registered_model

logger = logging.getLogger(__name__)
#: Where a training run keeps its resolved config in its MLflow artifacts.
RUN_CONFIG_ARTIFACT = "config/resolved_config.yaml"


class PromotionError(RuntimeError):
    """The versions cannot be compared (no versions, no scores, different protocols)."""


@dataclass(frozen=True)
class VersionScore:
    """One version's score under the protocol.

    Attributes:
        version: Version number (string, as MLflow returns it).
        score: Its score (higher is better).
        rows: Sample rows of the evaluation (episodes: seed, return, length).
        source: ``evaluated`` (played again now) or ``recorded`` (its registration score).
    """

    version: str
    score: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    source: str = "evaluated"


@dataclass(frozen=True)
class Protocol:
    """The held-out protocol both versions are scored under.

    Attributes:
        config: The resolved run config (dict) whose ``env``/``eval``/``run.seed`` apply.
        category: Model category of that run (``embodied``, ``reasoning``, ...).
        digest: Its evaluation protocol hash (``eval_protocol`` version tag).
        metric: The score metric (e.g. ``eval/return_mean``).
    """

    config: dict[str, Any]
    category: str
    digest: str
    metric: str


def run_config(client: Any, run_id: str) -> dict[str, Any]:
    """The resolved config a training run logged (secret-named fields masked)."""
    with tempfile.TemporaryDirectory(prefix="rlpipe-promote-") as tmp:
        try:
            path = client.download_artifacts(run_id, RUN_CONFIG_ARTIFACT, tmp)
        except Exception as exc:  # noqa: BLE001 - MLflow raises several types here
            raise PromotionError(
                f"run {run_id} has no {RUN_CONFIG_ARTIFACT} artifact to take the evaluation "
                f"protocol from: {exc}"
            ) from None
        return yaml.safe_load(Path(path).read_text())


def protocol_of(client: Any, version: Any) -> Protocol:
    """The evaluation protocol of the run that registered ``version``."""
    from rl_core.config import validate_config
    from rl_core.config.naming import eval_protocol

    config = run_config(client, version.run_id)
    cfg = validate_config(config, source=f"run {version.run_id} {RUN_CONFIG_ARTIFACT}")
    metric = version.tags.get("eval_metric", "eval/return_mean")
    return Protocol(config, cfg.category, eval_protocol(cfg), metric)


def recorded_score(protocol: Protocol, version: Any) -> VersionScore:
    """The score ``version`` was registered with (it must be under the same protocol)."""
    theirs = version.tags.get(EVAL_PROTOCOL_TAG)
    if theirs != protocol.digest:
        raise PromotionError(
            f"version {version.version} was scored under evaluation protocol {theirs!r}, the "
            f"newest under {protocol.digest!r}, and {protocol.category} versions are not "
            "evaluated again: their scores do not compare"
        )
    try:
        score = float(version.tags[SCORE_TAG])
    except (KeyError, ValueError):
        raise PromotionError(f"version {version.version} has no {SCORE_TAG} tag") from None
    return VersionScore(str(version.version), score, [], "recorded")


def score_version(client: Any, tracking_uri: str, protocol: Protocol, version: Any) -> VersionScore:
    """Score ``version`` under ``protocol`` (evaluated again where its category allows)."""
    from rl_core.kind import kind_named

    scorer = kind_named(protocol.category).scorer()
    if scorer is None:
        return recorded_score(protocol, version)
    with tempfile.TemporaryDirectory(prefix="rlpipe-promote-") as tmp:
        uri = f"models:/{version.name}/{version.version}"
        model_dir = download_registered_model(uri, tracking_uri, tmp)
        return scorer(protocol, model_dir, version)
