"""Promote the newest registered version to ``best``: ``rlpipe promote [--model NAME]``.

The ``promote`` flow scores the newest version of a registered model and the version holding
``best`` on the same held-out protocol (the newest version's run's evaluation episodes),
writes both scores and a sample table as a Prefect artifact, and, when the newest wins by
more than ``tracking.promotion_min_improvement``, either moves ``best`` at once
(``tracking.promotion_auto_approve`` / ``--auto-approve``) or pauses until someone approves
or rejects it in the Prefect UI (the paused flow run's "Resume" form). See docs/promotion.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import flow, pause_flow_run, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.input import RunInput
from prefect.runtime import flow_run
from pydantic import Field

from infra.cluster.runtime_env import apply_base_env
from infra.driver.session import resolve_tracking_uri
from infra.tracking.promotion import Comparison, compare_newest_with_best, record_decision
from infra.tracking.version_scoring import PromotionError
from rl_core.config import ConfigError, RLPipeConfig, load_config
from rl_core.config.loader import DEFAULT_PRESET
from rl_core.config.naming import registered_model_name

logger = logging.getLogger("rlpipe.promote")
#: Seconds between the paused flow run's checks for the approval form's answer.
APPROVAL_POLL_SECONDS = 2


class PromotionDecision(RunInput):
    """The approval form of a paused promote flow run (the Prefect UI renders it)."""

    approve: bool = Field(False, description="Move 'best' to the newest version")
    note: str = Field("", description="Why (kept on the version as promotion_note)")


def _flow_run_name() -> str:
    return f"promote-{flow_run.parameters.get('model_name') or 'newest'}"


def artifact_key(model_name: str) -> str:
    """``promotion-<model>`` in the characters Prefect artifact keys allow."""
    return "promotion-" + re.sub(r"[^a-z0-9-]+", "-", model_name.lower()).strip("-")


@task(name="compare_versions", cache_policy=NO_CACHE, persist_result=False)
def compare_versions(tracking_uri: str, model_name: str, min_improvement: float) -> Comparison:
    """Score newest and best on the held-out protocol (see :mod:`infra.tracking.promotion`)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri, registry_uri=tracking_uri)
    return compare_newest_with_best(client, tracking_uri, model_name, min_improvement)


def ask_for_approval(comparison: Any, timeout: float) -> PromotionDecision:
    """Pause the flow run until the approval form is submitted in the Prefect UI."""
    logger.info(
        "%s; waiting up to %.0fs for approval: open this flow run in the Prefect UI and "
        "press Resume",
        comparison.summary(),
        timeout,
    )
    form = PromotionDecision.with_initial_data(description=comparison.markdown(), approve=False)
    return pause_flow_run(
        wait_for_input=form, timeout=int(timeout), poll_interval=APPROVAL_POLL_SECONDS
    )


@flow(name="promote", flow_run_name=_flow_run_name, persist_result=False, log_prints=False)
def promote(
    model_name: str | None = None,
    preset: str = DEFAULT_PRESET,
    overrides: list[str] | None = None,
    auto_approve: bool | None = None,
) -> dict[str, Any]:
    """Compare the newest version with ``best`` and move ``best`` when newest wins and is approved.

    Args:
        model_name: Registered model name (None: the preset's
            ``tracking.registered_model_name``).
        preset: Preset whose ``tracking`` section applies (tracking URI, promotion settings).
        overrides: ``section.field=value`` strings applied to the preset.
        auto_approve: Move ``best`` without asking (None: ``tracking.promotion_auto_approve``).

    Returns:
        ``model_name``, ``newest``/``best`` versions and scores, ``outcome`` and ``promoted``.

    Raises:
        ConfigError: Bad preset or overrides, or no model name.
        PromotionError: No versions, or scores that cannot be compared.
    """
    cfg = load_config(preset, list(overrides or []))
    name = model_name or registered_model_name(cfg)
    if not name:
        raise ConfigError(
            "tracking.registered_model_name is empty and no model name was given: pass "
            "--model NAME (model_name)"
        )
    apply_base_env()
    tracking = cfg.tracking
    uri = resolve_tracking_uri(tracking.tracking_uri, Path(cfg.run.output_dir).resolve())
    comparison = compare_versions(uri, name, tracking.promotion_min_improvement)
    create_markdown_artifact(
        comparison.markdown(), key=artifact_key(name), description=comparison.summary()
    )
    result: dict[str, Any] = {
        "model_name": name,
        "newest_version": comparison.newest.version,
        "newest_score": comparison.newest.score,
        "best_version": comparison.best.version if comparison.best else None,
        "best_score": comparison.best.score if comparison.best else None,
        "promoted": False,
    }
    if comparison.newest_is_best:
        return {**result, "outcome": "already_best"}
    outcome, note = decide(comparison, cfg, auto_approve)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri, registry_uri=uri)
    promoted = record_decision(client, comparison, outcome, note, str(flow_run.id or ""))
    return {**result, "outcome": outcome, "promoted": promoted, "note": note}


def decide(comparison: Any, cfg: RLPipeConfig, auto_approve: bool | None) -> tuple[str, str]:
    """The outcome (see :data:`infra.tracking.promotion.OUTCOMES`) and its note.

    ``comparison`` has ``wins``, ``summary()`` and ``markdown()``: a :class:`Comparison` of
    registered versions, or an A/B comparison of served ones.
    """
    if not comparison.wins:
        return "not_better", comparison.summary()
    if cfg.tracking.promotion_auto_approve if auto_approve is None else auto_approve:
        return "auto_approved", comparison.summary()
    decision = ask_for_approval(comparison, cfg.tracking.promotion_approval_timeout)
    return ("approved" if decision.approve else "rejected"), decision.note


def main(argv: list[str] | None = None, prog: str = "python flows/promote.py") -> int:
    """CLI entry point: 0 decided (promoted or not), 1 failed (e.g. timeout), 2 bad input."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--model", default=None, help="registered model name (default: preset's)")
    parser.add_argument("--config", default=DEFAULT_PRESET, help="preset name or YAML path")
    add_approval_arguments(parser, "move 'best' when newest wins")
    args = parser.parse_args(argv)
    return run_decision(
        args.config,
        args.overrides,
        lambda: promote(args.model, args.config, args.overrides, args.auto_approve),
    )


def add_approval_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--auto-approve`` (``what`` happens without pausing for approval) and overrides."""
    parser.add_argument(
        "--auto-approve",
        action="store_true",
        default=None,
        help=f"{what}, without pausing for approval",
    )
    parser.add_argument("overrides", nargs="*", help="section.field=value")


def run_decision(preset: str, overrides: list[str], decide_now: Callable[[], dict]) -> int:
    """Run a promotion flow from the CLI: print its JSON summary; the exit code.

    Args:
        preset: The preset whose ``run.output_dir`` hosts a local Prefect API when none is
            configured.
        overrides: Its overrides.
        decide_now: Runs the flow and returns its summary.

    Returns:
        0 decided (promoted or not), 1 failed (e.g. no approval in time), 2 bad input.
    """
    from flows.cli import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_FINISHED, prefect_api, print_error

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        cfg = load_config(preset, overrides)
        with prefect_api(Path(cfg.run.output_dir)):
            summary = decide_now()
    except (ConfigError, PromotionError) as exc:
        print_error(exc)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - e.g. the approval timed out
        print_error(exc)
        return EXIT_FAILED
    print(json.dumps(summary, indent=2))
    return EXIT_FINISHED


if __name__ == "__main__":
    sys.exit(main())
