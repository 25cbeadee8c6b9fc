"""Train a policy: ``python flows/train.py [--config PRESET] [section.field=value ...]``.

The ``train`` flow connects Ray, builds the worker groups, opens (or re-attaches) the MLflow
run, resumes from the latest committed checkpoint, then runs one ``iteration-<k>`` child
flow per training iteration.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # the local Prefect API and Ray start while the imports below run
    from flows.early_start import start_services_early

    start_services_early(sys.argv[1:])


from flows.masked_flow import masked_flow
from flows.run_loop import flow_run_namer, prepare_model_files, run_training, train_session
from flows.sft import ensure_demonstrations, log_demonstrations, sft
from flows.stop_signals import stop_signals_in_flow
from infra.checkpoint.export import is_finished_export
from infra.checkpoint.location import run_store_uri
from infra.checkpoint.store import open_store
from infra.driver.init_from import apply_init_from
from infra.driver.session import resolve_tracking_uri
from infra.tracking.secrets import redacted_errors
from kinds.reasoning.reward_model_source import (
    preset_model_dir,
    resolve_model_source,
    with_model_uri,
)
from rl_core.config import RLPipeConfig, load_config
from tasks.sft import export_model

logger = logging.getLogger("rlpipe.train")


class WarmStartError(RuntimeError):
    """The warm start's supervised run did not finish, so there is no model to start from."""


@masked_flow(
    name="train", flow_run_name=flow_run_namer("train"), persist_result=False, log_prints=False
)
def train(
    preset: str = "ppo_cartpole",
    overrides: list[str] | None = None,
    run_name: str | None = None,
) -> dict[str, Any]:
    """Train with a preset plus dotted overrides; resumes the run's latest checkpoint.

    Args:
        preset: Preset name (``rl_core/presets/``) or a YAML path.
        overrides: ``section.field=value`` strings.
        run_name: Shortcut for ``run.name=...`` (the resume key).

    An offline algorithm (``iql``) trains on the demonstration dataset, collected first
    (the ``demos`` flow) when missing.

    Returns:
        Summary: MLflow run id and tracking URI, checkpoint dir, final metrics.
    """
    ensure_demonstrations(preset, overrides, supervised=False)
    with (
        stop_signals_in_flow(),
        redacted_errors(),
        train_session(preset, overrides, run_name, prepare=prepare_model) as session,
    ):
        log_demonstrations(session, supervised=False)
        return run_training(session)


def prepare_model(cfg: RLPipeConfig) -> RLPipeConfig:
    """Make sure the model directory exists before any worker starts.

    ``run.warm_start`` runs that SFT preset first (as a child flow) unless the export of a
    finished run of it exists (a stopped one resumes and finishes), and points
    ``model.model_path`` at it; ``run.init_from`` fetches the model a new run starts from
    (:func:`infra.driver.init_from.apply_init_from`); then :func:`prepare_model_files`.

    Raises:
        WarmStartError: The supervised run stopped again before finishing.
    """
    if cfg.run.warm_start:
        sft_overrides = [f"run.output_dir={cfg.run.output_dir}", f"run.seed={cfg.run.seed}"]
        sft_cfg = load_config(cfg.run.warm_start, sft_overrides)
        model_dir = Path(cfg.run.output_dir) / sft_cfg.run.name / "model"
        if not is_finished_export(model_dir):
            logger.info(
                "warm start: running %s first (no finished export in %s; a stopped run resumes)",
                cfg.run.warm_start,
                model_dir,
            )
            summary = sft(preset=cfg.run.warm_start, overrides=sft_overrides)
            if not summary.get("model_dir"):
                raise WarmStartError(
                    f"the warm start {cfg.run.warm_start} (run {sft_cfg.run.name}) stopped before "
                    "finishing; rerun the same command to resume it, or set run.warm_start=null "
                    "and model.model_path to a model of your choice"
                )
        cfg = cfg.warm_started(str(model_dir.resolve()))
    if cfg.run.init_from and not has_checkpoint(cfg):  # a resumed run has its weights
        tracking_uri = resolve_tracking_uri(cfg.tracking.tracking_uri, Path(cfg.run.output_dir))
        cfg = apply_init_from(cfg, tracking_uri)
    return prepare_reward_model(prepare_model_files(cfg))


def prepare_reward_model(cfg: RLPipeConfig) -> RLPipeConfig:
    """Make the model of ``reward.model`` a checked local directory before workers start.

    ``reward.model.preset`` names a reward-model preset: its run's export
    ``<output_dir>/<its run name>/model`` is the model, and the preset is trained first (a
    child ``train`` flow; a stopped run resumes) and exported when that export is missing.
    A registered model (``models:/...``) is downloaded into the run's folder
    (:func:`kinds.reasoning.reward_model_source.resolve_model_source`).

    Raises:
        WarmStartError: The reward model's run stopped before finishing.
    """
    section = cfg.reward_model_section()
    if section is None:
        return cfg
    if section.preset:
        overrides = [f"run.output_dir={cfg.run.output_dir}", f"run.seed={cfg.run.seed}"]
        rm_cfg = load_config(section.preset, overrides)
        model_dir = preset_model_dir(cfg.run.output_dir, rm_cfg.run.name)
        if not is_finished_export(model_dir):
            logger.info(
                "reward model: training %s first (no finished export in %s; a stopped run resumes)",
                section.preset,
                model_dir,
            )
            summary = train(preset=section.preset, overrides=overrides)
            if summary.get("stopped") is not None:
                raise WarmStartError(
                    f"the reward model {section.preset} (run {rm_cfg.run.name}) stopped before "
                    "finishing; rerun the same command to resume it, or set reward.model.uri "
                    "to a reward model of your choice"
                )
            store = run_store_uri(rm_cfg.run.output_dir, rm_cfg.run.name, rm_cfg.run.checkpoint_uri)
            export_model(store, str(model_dir), rm_cfg.run.name, finished=True)
        cfg = with_model_uri(cfg, str(model_dir.resolve()))
    tracking_uri = resolve_tracking_uri(cfg.tracking.tracking_uri, Path(cfg.run.output_dir))
    return resolve_model_source(cfg, tracking_uri)


def has_checkpoint(cfg: RLPipeConfig) -> bool:
    """Whether the run has a committed checkpoint (a rerun resumes it)."""
    uri = run_store_uri(cfg.run.output_dir, cfg.run.name, cfg.run.checkpoint_uri)
    return open_store(uri).latest() is not None


def main(argv: list[str] | None = None, prog: str = "python flows/train.py") -> int:
    """CLI entry point (see ``--help``)."""
    from flows.cli import run_cli

    return run_cli(train, argv, prog=prog)


if __name__ == "__main__":
    sys.exit(main())
