"""Promote an online run's A/B candidate to main: ``rlpipe promote-served --config PRESET``.

Under gated promotion (``tracking.promotion: gated``) an online run serves each newly
trained version as a candidate to ``online.candidate_share`` of the requests while the
promoted main version answers the rest. The ``promote-served`` flow compares the two by
their users' acceptance rates (the feedback store), writes both as a Prefect artifact, and,
when the candidate wins by more than ``tracking.promotion_min_improvement`` with at least
``online.promotion_min_judged`` judged answers each, makes it main at once
(``--auto-approve``) or after approval in the Prefect UI. The decision is recorded as tags
of the run's MLflow run. See docs/online.md.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from flows.promote import add_approval_arguments, decide, run_decision
from infra.tracking.version_scoring import PromotionError
from kinds.online.config import OnlineConfig
from kinds.online.runtime import SERVED_DIR, WEIGHTS_FILE, store_path
from kinds.online.served_versions import ab_comparison, promote_candidate
from kinds.online.store import FeedbackStore
from rl_core.config import ConfigError, RLPipeConfig, load_config
from rl_core.online.ab_test import ABComparison

logger = logging.getLogger("rlpipe.promote_served")
#: The MLflow run tag prefix of each decision (``<prefix>.v<candidate version>``).
DECISION_TAG = "rlpipe.served_promotion"


def _flow_run_name() -> str:
    return f"promote-served-{flow_run.parameters.get('run_name') or 'run'}"


@flow(name="promote-served", flow_run_name=_flow_run_name, persist_result=False, log_prints=False)
def promote_served(
    preset: str = "online_arith",
    overrides: list[str] | None = None,
    run_name: str | None = None,
    auto_approve: bool | None = None,
) -> dict[str, Any]:
    """Compare the served candidate with main by acceptance; promote it when it wins.

    Args:
        preset: The online run's preset (or YAML path).
        overrides: ``section.field=value`` strings applied to the preset.
        run_name: Shortcut for ``run.name=...``.
        auto_approve: Promote without asking (None: ``tracking.promotion_auto_approve``).

    Returns:
        Both versions with their feedback, ``outcome`` and ``promoted``.

    Raises:
        ConfigError: Bad preset or overrides, or not an online run.
        PromotionError: The run serves nothing yet.
    """
    cfg = load_config(preset, [*(overrides or []), *([f"run.name={run_name}"] if run_name else [])])
    if not isinstance(cfg, OnlineConfig):
        raise ConfigError(f"{preset}: promote-served compares an online run's served versions")
    weights_file = Path(cfg.run.output_dir) / cfg.run.name / SERVED_DIR / WEIGHTS_FILE
    store = FeedbackStore(store_path(cfg))
    try:
        comparison = ab_comparison(
            store,
            weights_file,
            cfg.tracking.promotion_min_improvement,
            cfg.online.promotion_min_judged,
        )
    finally:
        store.close()
    if comparison is None:
        raise PromotionError(f"run {cfg.run.name} serves nothing yet ({weights_file} is missing)")
    create_markdown_artifact(
        comparison.markdown(), key=artifact_key(cfg.run.name), description=comparison.summary()
    )
    logger.info("%s", comparison.summary())
    outcome, note = _outcome(comparison, cfg, auto_approve)
    promoted = outcome in ("approved", "auto_approved")
    if promoted:
        promote_candidate(weights_file, expected=comparison.candidate.version)
    if comparison.candidate is not None:
        record_decision(cfg, comparison.candidate.version, outcome, note)
    return {
        "run_name": cfg.run.name,
        "main_version": comparison.main.version,
        "main_acceptance": comparison.main.rate,
        "main_judged": comparison.main.judged,
        "candidate_version": comparison.candidate.version if comparison.candidate else None,
        "candidate_acceptance": comparison.candidate.rate if comparison.candidate else None,
        "candidate_judged": comparison.candidate.judged if comparison.candidate else None,
        "outcome": outcome,
        "promoted": promoted,
        "note": note,
    }


def _outcome(
    comparison: ABComparison, cfg: RLPipeConfig, auto_approve: bool | None
) -> tuple[str, str]:
    if comparison.candidate is None:
        return "no_candidate", comparison.summary()
    if not comparison.enough_feedback:
        return "too_little_feedback", comparison.summary()
    return decide(comparison, cfg, auto_approve)


def artifact_key(run_name: str) -> str:
    """``served-promotion-<run>`` in the characters Prefect artifact keys allow."""
    return "served-promotion-" + re.sub(r"[^a-z0-9-]+", "-", run_name.lower()).strip("-")


def record_decision(cfg: RLPipeConfig, version: int, outcome: str, note: str) -> None:
    """Tag the run's MLflow run with the decision about candidate ``version``."""
    from mlflow.tracking import MlflowClient

    from infra.driver.session import resolve_tracking_uri

    uri = resolve_tracking_uri(cfg.tracking.tracking_uri, Path(cfg.run.output_dir).resolve())
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(
        experiments, f"tags.`rlpipe.run_name` = '{cfg.run.name}'", max_results=1
    )
    if not runs:
        logger.warning("no MLflow run of %s to record the decision in", cfg.run.name)
        return
    run_id = runs[0].info.run_id
    client.set_tag(run_id, f"{DECISION_TAG}.v{version}", outcome)
    client.set_tag(run_id, f"{DECISION_TAG}.v{version}.note", note[:5000])


def main(argv: list[str] | None = None, prog: str = "python flows/promote_served.py") -> int:
    """CLI entry point: 0 decided (promoted or not), 1 failed, 2 bad input."""
    from flows.cli_args import run_name_arg

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="online_arith", help="preset name or YAML path")
    parser.add_argument("--run-name", type=run_name_arg, help="run name; same as run.name=...")
    add_approval_arguments(parser, "promote when the candidate wins")
    args = parser.parse_args(argv)
    return run_decision(
        args.config,
        args.overrides,
        lambda: promote_served(args.config, args.overrides, args.run_name, args.auto_approve),
    )


if __name__ == "__main__":
    sys.exit(main())
