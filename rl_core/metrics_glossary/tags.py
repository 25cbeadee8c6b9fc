"""Every MLflow tag (and registered-model alias) rlpipe sets, by scope."""

from __future__ import annotations

from rl_core.metrics_glossary.entries import TagEntry

#: Every tag (and alias) rlpipe sets.
TAGS: tuple[TagEntry, ...] = (
    TagEntry(
        "rlpipe.run_name",
        "run",
        "`run.name`",
        "The training run's name; on an evaluation run, the training run it evaluated.",
    ),
    TagEntry("rlpipe.preset", "run", "preset name", "The preset the run was started from."),
    TagEntry(
        "rlpipe.task",
        "run",
        "e.g. `CartPole-v1`",
        "What was trained on: the env id (embodied), the prompt set (reasoning).",
    ),
    TagEntry(
        "rlpipe.model_kind",
        "run",
        "e.g. `mlp_actor_critic`",
        "`model.model_type`, lower case.",
    ),
    TagEntry(
        "rlpipe.algorithm",
        "run",
        "e.g. `ppo`, `grpo`, `sft`",
        "The algorithm's name, as in the Prefect tag `algorithm:<name>`.",
    ),
    TagEntry(
        "rlpipe.eval_protocol",
        "run",
        "12 hex digits",
        "Hash of the settings that give an evaluation score its meaning (scores of "
        "different protocols are not compared).",
    ),
    TagEntry(
        "rlpipe.config_hash",
        "run",
        "12 hex digits",
        "Hash of the resolved config: equal hashes, equal configs.",
    ),
    TagEntry(
        "rlpipe.git_commit",
        "run",
        "commit hash",
        "The checkout that ran, `-dirty` when tracked files had changes (`unknown` outside git).",
    ),
    TagEntry(
        "prefect.flow_run_id",
        "run",
        "UUID",
        "The train (or SFT) flow run.",
    ),
    TagEntry(
        "prefect.flow_run_url",
        "run",
        "URL",
        "Its page in the Prefect UI.",
    ),
    TagEntry(
        "mlflow.parentRunId",
        "run",
        "MLflow run id",
        "Nests the run under its parent in the MLflow UI: a sweep's run under the sweep "
        "(`tracking.parent_run_id`), an evaluation run under its training run.",
    ),
    TagEntry(
        "rlpipe.kind",
        "run",
        "`evaluation`",
        "Marks the evaluation runs of `flows/evaluate.py`.",
    ),
    TagEntry(
        "rlpipe.sweep",
        "run",
        "sweep name",
        "Marks a sweep's parent run (a rerun of the sweep finds it by this tag).",
    ),
    TagEntry(
        "rlpipe.previous_mlflow_run_id",
        "run",
        "MLflow run id",
        "A resume whose tracking store lacks the checkpoint's run continues in a new run: "
        "the run holding the earlier iterations.",
    ),
    TagEntry(
        "rlpipe.previous_tracking_uri",
        "run",
        "URI (credentials masked)",
        "The store that run is in (`unknown` when the checkpoint does not say).",
    ),
    TagEntry(
        "rlpipe.registered_model",
        "run",
        "`models:/<name>/<version>`",
        "The model version the run registered at its end.",
    ),
    TagEntry(
        "rlpipe.registered_step",
        "run",
        "`<name>:<checkpoint step>`",
        "The checkpoint registered; a rerun of a finished run registers nothing again.",
    ),
    TagEntry(
        "mlflow.experimentKind",
        "experiment",
        "`custom_model_development`",
        "Opens the experiment in the MLflow UI's model-training view.",
    ),
    TagEntry(
        "run_name",
        "model version",
        "`run.name`",
        "The training run that produced the version.",
    ),
    TagEntry("preset", "model version", "preset name", "Its preset."),
    TagEntry("task", "model version", "as `rlpipe.task`", "What it was trained on."),
    TagEntry("config_hash", "model version", "12 hex digits", "Its resolved config's hash."),
    TagEntry(
        "eval_protocol",
        "model version",
        "12 hex digits",
        "The evaluation protocol of its score; `best` moves only between equal protocols.",
    ),
    TagEntry(
        "eval_metric",
        "model version",
        "`eval/return_mean` or `eval/accuracy`",
        "The metric that scores it.",
    ),
    TagEntry(
        "eval_score",
        "model version",
        "number",
        "That metric's last value, when that evaluation saw exactly these weights "
        "(unset otherwise: the version cannot take `best`).",
    ),
    TagEntry(
        "eval_step",
        "model version",
        "step",
        "Step of the run's last evaluation.",
    ),
    TagEntry(
        "checkpoint_step",
        "model version",
        "step",
        "The checkpoint exported (`model/step_<n>/`).",
    ),
    TagEntry(
        "weights",
        "model version",
        "`full` or `merged`",
        "What the version's model directory holds: the trained weights (`full`), or for a "
        "LoRA run (`actor.lora.rank` above 0) the base weights with the adapter merged in (`merged`).",
    ),
    TagEntry(
        "adapter",
        "model version",
        "`adapter/ (peft)`",
        "LoRA runs: where the adapter alone is, in PEFT's format (`peft` loads it onto the "
        "base model).",
    ),
    TagEntry(
        "mlflow_flavor",
        "model version",
        "`transformers`, `python_function` or `none`",
        "The MLflow flavor the version's folder also is: `mlflow.transformers.load_model` "
        "(language models) or `mlflow.pyfunc.load_model` (control policies) load it; `none`: "
        "rlpipe's loaders only (other policies, `tracking.mlflow_flavor: false`, or a flavor "
        "that could not be written).",
    ),
    TagEntry(
        "base_model_fingerprint",
        "model version",
        "12 hex digits",
        "LoRA runs: hash of the base model's weights and config the adapter was trained on "
        "(an adapter fits that base only).",
    ),
    TagEntry(
        "data_fingerprint",
        "model version",
        "12 hex digits",
        "Hash of the training data: the env's settings, the prompt generator's, or the "
        "prompt files' bytes (`unknown` when unreadable).",
    ),
    TagEntry(
        "parent_sft_run",
        "model version",
        "MLflow run id, or `-`",
        "The SFT run a `run.warm_start` run began from (`-`: none).",
    ),
    TagEntry(
        "git_commit",
        "model version",
        "as `rlpipe.git_commit`",
        "The code that trained it.",
    ),
    TagEntry(
        "prefect_flow_run",
        "model version",
        "UUID",
        "The train flow run that trained it.",
    ),
    TagEntry(
        "promotion",
        "model version",
        "`approved`, `auto_approved`, `rejected`, `not_better`",
        "The promote flow's decision about this version.",
    ),
    TagEntry(
        "rlpipe.served_promotion",
        "run",
        "`auto_approved`, `approved`, `rejected`, `not_better`, `too_little_feedback`",
        "Prefix: `rlpipe.served_promotion.v<version>` is promote-served's decision about "
        "that A/B candidate, `rlpipe.served_promotion.v<version>.note` the comparison or the "
        "approver's note.",
    ),
    TagEntry(
        "promotion_score",
        "model version",
        "number",
        "Its score in the promote flow's held-out comparison.",
    ),
    TagEntry(
        "promotion_best_score",
        "model version",
        "number, or `-`",
        "The score of the version holding `best` in that comparison.",
    ),
    TagEntry(
        "promoted_from_version",
        "model version",
        "version, or `-`",
        "The version that held `best` before.",
    ),
    TagEntry(
        "promotion_note",
        "model version",
        "text, or `-`",
        "The approver's note, or why it was decided without one.",
    ),
    TagEntry(
        "promotion_flow_run",
        "model version",
        "UUID, or `-`",
        "The Prefect flow run that decided.",
    ),
    TagEntry(
        "newest",
        "model alias",
        "a version",
        "The most recently registered version.",
    ),
    TagEntry(
        "best",
        "model alias",
        "a version",
        "The version with the highest `eval_score` (under one protocol), or the one the "
        "promote flow promoted (`tracking.promotion: gated`).",
    ),
    TagEntry(
        "rlpipe.iteration",
        "trace",
        "iteration index",
        "The iteration whose rollout the trajectory is from.",
    ),
)
