"""Every file and folder rlpipe logs to an MLflow run's artifacts."""

from __future__ import annotations

from rl_core.metrics_glossary.entries import ArtifactEntry

#: Every file and folder rlpipe logs to a run's artifacts.
ARTIFACTS: tuple[ArtifactEntry, ...] = (
    ArtifactEntry(
        "config/resolved_config.yaml",
        "all",
        "The validated config, secrets masked (when the run starts).",
    ),
    ArtifactEntry(
        "checkpoints/step_<n>/",
        "all",
        "The checkpoint after `<n>` iterations: the final one, and every "
        "`tracking.log_checkpoint_interval` iterations.",
    ),
    ArtifactEntry(
        "eval/samples_<n>.json",
        "all",
        "Sample rows of the evaluation after `<n>` iterations, an MLflow table: prompts, "
        "completions, answers, rewards (reasoning runs); in evaluation runs of "
        "`flows/evaluate.py` also the episodes (seed, return, length) of embodied ones.",
    ),
    ArtifactEntry(
        "eval/videos/episode_<n>.gif",
        "embodied",
        "The rendered evaluation episode of the evaluation at step `<n>` (`eval.video`).",
    ),
    ArtifactEntry(
        "plots/learning_curve.png",
        "all",
        "Key metrics against step, drawn at the end of the run (`tracking.learning_curve`).",
    ),
    ArtifactEntry(
        "model/step_<n>/",
        "all",
        "The registered policy, exported from checkpoint `<n>`.",
    ),
    ArtifactEntry(
        "sweep.md",
        "all",
        "A sweep's parent run: the final figures of every run.",
    ),
    ArtifactEntry(
        "plots/sweep.png",
        "all",
        "A sweep's parent run: mean ± std learning curves per grid point.",
    ),
)
