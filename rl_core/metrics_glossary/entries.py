"""The glossary's record types and the small tables its entries refer to.

An entry names a run kind (a key of :data:`RUNS`), a tag scope (a key of
:data:`TAG_SCOPES`) and, in its key, placeholders (:data:`PLACEHOLDERS`; the step
placeholders take their values from :mod:`rl_core.steps`);
:data:`METRIC_SECTIONS` groups the metrics into the sections of ``docs/metrics.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rl_core.steps import COST_PHASES, STATEFUL_STEPS, Step


@dataclass(frozen=True)
class Placeholder:
    """A variable part of a metric key.

    Attributes:
        name: Its name, written ``<name>`` in keys.
        meaning: What it stands for.
        values: Every value it takes (empty: free text, see ``pattern``).
        pattern: Regular expression of a free value (used when ``values`` is empty).
        free_form: What a free value looks like, in words.
    """

    name: str
    meaning: str
    values: tuple[str, ...] = ()
    pattern: str = "[^/]+"
    free_form: str = "any"


@dataclass(frozen=True)
class MetricEntry:
    """One MLflow metric (or a family of them, with placeholders).

    Attributes:
        key: The key, ``<name>`` for each variable part (:data:`PLACEHOLDERS`).
        unit: Its unit (``seconds``, ``fraction``, ``count``, ``tokens/s``...).
        runs: Which runs write it: a key of :data:`RUNS`.
        meaning: One line: what the number is, and when it is logged.
    """

    key: str
    unit: str
    runs: str
    meaning: str


@dataclass(frozen=True)
class TagEntry:
    """One MLflow tag (or alias) rlpipe sets.

    Attributes:
        key: The tag's key (an alias: its name).
        scope: What carries it: a key of :data:`TAG_SCOPES`.
        value: What its value looks like.
        meaning: One line: what it says, and when it is set.
    """

    key: str
    scope: str
    value: str
    meaning: str


@dataclass(frozen=True)
class ArtifactEntry:
    """One file or folder rlpipe logs to an MLflow run's artifacts.

    Attributes:
        path: Its path in the run's artifacts (a folder ends with ``/``).
        runs: Which runs log it: a key of :data:`RUNS`.
        meaning: One line: what it holds, and when it is logged.
    """

    path: str
    runs: str
    meaning: str


#: Which runs write a metric (the ``runs`` column).
RUNS: dict[str, str] = {
    "all": "every training run, embodied and reasoning (conditions are in the meaning)",
    "embodied": "control-policy runs on gymnasium-style envs (PPO, SAC, CrossQ, RLPD)",
    "reasoning": "language-model runs: RL (GRPO, DAPO, ...) and SFT (`flows/sft.py`)",
    "reward_model": "reward-model runs: a scalar-head model trained on preference pairs "
    "(`hf_reward_model`, Bradley-Terry loss)",
    "agent": "reasoning runs whose rollouts are agent trajectories (`agent.loop` other than "
    "`single_turn`)",
    "online": "reasoning runs that serve their policy and train on its feedback (`online.enabled`)",
}

#: Variable parts of metric keys.
PLACEHOLDERS: tuple[Placeholder, ...] = (
    Placeholder("step", "a step of the iteration", tuple(map(str, Step))),
    Placeholder(
        "stateful_step",
        "a step that changes worker state, snapshotted before it runs so a retry can undo it",
        tuple(map(str, STATEFUL_STEPS)),
    ),
    Placeholder(
        "phase",
        "a phase of the iteration: a step, or the orchestration between the steps",
        tuple(map(str, COST_PHASES)),
    ),
    Placeholder(
        "trajectory_metric",
        "a statistic of agent trajectories (the `agent/` metrics of the same name)",
        (
            "turns_mean",
            "tool_calls_mean",
            "tool_call_rate",
            "tool_error_rate",
            "tool_timeout_rate",
            "tool_latency_mean",
            "infra_failure_rate",
            "masked_token_fraction",
        ),
    ),
    Placeholder(
        "kind",
        "the `kind` field of the prompt rows (e.g. `add`, `mul` for `tool_arithmetic`); "
        "rows without one count only in the metric without `<kind>`",
    ),
    Placeholder(
        "rule",
        "a rule reward among the components of a composite reward with a model reward "
        "(e.g. `math_verify`, `format`)",
    ),
    Placeholder(
        "k",
        "1 and `eval.pass_k` (the responses sampled per held-out prompt)",
        (),
        "[0-9]+",
        "a number",
    ),
    Placeholder(
        "name",
        "a metric of MLflow's system metrics monitor (its names depend on the MLflow "
        "version and on the GPU libraries installed)",
    ),
)

#: Sections of the page: ``(title, key prefixes, introduction)``; a key belongs to the
#: section of its longest matching prefix.
METRIC_SECTIONS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "Training",
        ("train/", "replay/"),
        "The trainer's update step (`update`, or `sft_update` in SFT runs), and the replay "
        "buffer of off-policy runs. Means are over the update's applied minibatch (or "
        "gradient) steps; a step skipped for a non-finite loss counts only in "
        "`train/skipped_updates`.",
    ),
    (
        "Rollout",
        ("rollout/", "env/", "async/", "reward/", "demos/"),
        "Collecting the iteration's batch: the `weight_sync`, `rollout`, `reward` (with its "
        "components when a reward model scores, `reward/`) and `advantage` steps, the training episodes of embodied runs and, with "
        "`run.mode: async`, how far the batches run ahead of the trainer.",
    ),
    (
        "Evaluation",
        ("eval/",),
        "The `evaluate` step: every `run.eval_interval` iterations and at the last one (also "
        "at step 0 before training with `eval.before_training`), on the fixed evaluation "
        "seeds (embodied) or the held-out prompts (reasoning). `flows/evaluate.py` logs the "
        "same metrics to an evaluation run at the checkpoint's step.",
    ),
    (
        "Timing and orchestration",
        ("time/",),
        "Where each iteration's wall time went ([performance](performance.md)). Worker time "
        "is measured by the driver around its calls to the worker groups.",
    ),
    (
        "Cost",
        ("cost/",),
        "Resource-hours: every phase costs its seconds times the CPUs (GPUs) the run's "
        "workers reserve, busy or not ([MLflow](mlflow.md#cost)). `run.budget_hours` stops "
        "a run on these totals.",
    ),
    (
        "Agents",
        ("agent/", "eval/agent/"),
        "Agent trajectories of the rollout step (`agent/`) and of the evaluation's greedy "
        "responses (`eval/agent/`) ([agents](agents.md)).",
    ),
    (
        "Online",
        ("online/",),
        "Online runs: the feedback each iteration trains on and the policy it serves "
        "([online RL](online.md)).",
    ),
    (
        "System",
        ("system/",),
        "Sampled from the driver's machine every `tracking.system_metrics_interval` "
        "seconds while `tracking.system_metrics` is on; their step counts samples, not "
        "iterations ([MLflow](mlflow.md#system-metrics)).",
    ),
)

#: What carries a tag (the tag tables, in this order).
TAG_SCOPES: dict[str, str] = {
    "run": "MLflow runs: a training run, an evaluation run of `flows/evaluate.py`, a sweep's "
    "parent run",
    "experiment": "the MLflow experiments rlpipe logs to",
    "model version": "versions of a registered model (`register_model` at the end of a run, "
    "and the promote flow)",
    "model alias": "aliases of a registered model, each pointing at one version",
    "trace": "MLflow traces of agent trajectories (`tracking.agent_traces`)",
}
