"""Supervised warm start: ``python flows/sft.py [--config sft_arith] [section.field=value ...]``.

The same machinery as training (Prefect flows and tasks, FSDP2 trainer ranks on Ray,
MLflow, checkpoints and resume): each ``sft-<k>`` child flow runs one supervised step on
prompt→answer pairs (loss on the answer tokens, warm-up + cosine learning rate), with
held-out evaluation and checkpoints when due. At the end the policy is exported as a
Hugging Face model directory, ``<output_dir>/<run name>/model``, which reasoning presets
load with ``model.model_path``.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.runtime import flow_run
from prefect_ray import RayTaskRunner

from flows.iteration import (
    CHILD_FLOW_OPTIONS,
    IterationResult,
    child_flow_body,
    finish_iteration,
)
from flows.masked_flow import masked_flow
from flows.run_loop import flow_run_namer, run_training, train_session
from flows.stop_signals import stop_signals_in_flow
from infra.driver.session import get_session
from infra.tracking.secrets import redacted_errors
from rl_core.steps import Step
from tasks.sft import export_model
from tasks.steps import step_task

logger = logging.getLogger("rlpipe.sft")


@flow(
    name="sft-iteration",
    flow_run_name="sft-{iteration}",
    task_runner=RayTaskRunner(),
    **CHILD_FLOW_OPTIONS,
)
def sft_iteration_flow(session_id: str, iteration: int) -> IterationResult:
    """One supervised step, then evaluation and checkpoint when due.

    Retried like the RL iteration: a completed step is not run again and a failed
    ``sft_update`` is undone (trainer and prompt cursor) before it is tried again.
    """
    body_started = time.perf_counter()
    session = get_session(session_id)
    with child_flow_body():
        rewound = session.guard.begin(iteration, flow_run.run_count or 1)
        if rewound is not None:
            return IterationResult(rewound_to=rewound)
        sft_update = step_task(Step.SFT_UPDATE)
        steps = {
            Step.SFT_UPDATE: session.guard.run(
                Step.SFT_UPDATE, lambda: sft_update(session_id, iteration)
            )
        }
        return finish_iteration(session, iteration, steps, body_started)


@masked_flow(
    name="sft", flow_run_name=flow_run_namer("sft"), persist_result=False, log_prints=False
)
def sft(
    preset: str = "sft_arith", overrides: list[str] | None = None, run_name: str | None = None
) -> dict[str, Any]:
    """Supervised warm start; resumes the run's latest checkpoint.

    A language model trains on prompt→answer pairs; a control policy clones the
    demonstrations of ``demos.path``, collected first (the ``demos`` flow) when missing.

    Returns:
        The training summary plus ``model_dir``, the exported model directory.
    """
    ensure_demonstrations(preset, overrides)
    with (
        stop_signals_in_flow(),
        redacted_errors(),
        train_session(preset, overrides, run_name, supervised=True) as session,
    ):
        log_demonstrations(session)
        summary = run_training(session, step_flow=sft_iteration_flow)
    if summary["stopped"] is not None:
        logger.warning(
            "%s stopped before finishing: its model is not exported (a warm start would begin "
            "from a half-trained model); rerun the same command to resume and finish it",
            session.cfg.run.name,
        )
    elif session.store.latest() is not None:
        out = Path(session.run_dir) / "model"
        cfg = session.cfg
        trust = cfg.run.trust_checkpoint or cfg.model.trust_remote_code  # the run's own model
        exported = export_model(session.store_uri, str(out), cfg.run.name, trust, finished=True)
        summary["model_dir"] = exported["model_dir"]
    return summary


def ensure_demonstrations(
    preset: str, overrides: list[str] | None, supervised: bool = True
) -> None:
    """Collect the demonstrations a run trains on (behaviour cloning, offline RL), when missing.

    Args:
        preset: Preset name or YAML path.
        overrides: Dotted overrides.
        supervised: The run is supervised fine-tuning (else an RL run, which reads
            demonstrations when its algorithm is offline).
    """
    from infra.extensions import load_extension_modules
    from rl_core.config import load_config

    load_extension_modules()  # the config may name the extensions' envs, tools or models
    cfg = load_config(preset, overrides or [])
    folder = cfg.demonstrations(supervised)
    if folder is None or (Path(folder) / "demos.json").is_file():
        return
    from flows.demos import demos

    logger.info("no demonstrations at %s yet: collecting them first", folder)
    demos(preset=preset, overrides=overrides)


def log_demonstrations(session: Any, supervised: bool = True) -> None:
    """Record the demonstrations a run trains on as its MLflow dataset input."""
    demos_folder = session.cfg.demonstrations(supervised)
    if demos_folder is None or session.tracker is None:
        return
    from flows.demos import dataset_digest, dataset_profile
    from rl_core.data.demos import read_manifest

    folder = Path(demos_folder)
    manifest = read_manifest(folder)
    session.tracker.log_dataset(
        folder.name,
        str(folder.resolve()),
        dataset_digest(manifest),
        dataset_profile(manifest),
        "training",
    )


def main(argv: list[str] | None = None, prog: str = "python flows/sft.py") -> int:
    """CLI entry point (the train CLI's arguments)."""
    from flows.cli import run_cli
    from flows.cli_args import sft_presets

    return run_cli(
        sft,
        argv,
        default_preset="sft_arith",
        prog=prog,
        description="Supervised warm start with rlpipe: a language model trained on answers, "
        "a control policy on demonstrations (collected first when missing); its model is "
        "exported to <run.output_dir>/<run.name>/model for an RL run to start from.",
        presets=sft_presets(),
    )


if __name__ == "__main__":
    sys.exit(main())
