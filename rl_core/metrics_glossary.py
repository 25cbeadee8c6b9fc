"""Every MLflow metric, tag and artifact rlpipe writes: the source of ``docs/metrics.md``.

Pure data. ``scripts/gen_metric_docs.py`` renders it as ``docs/metrics.md``, and
``tests/unit/test_metric_glossary.py`` checks it against the code both ways: a metric key or
tag the code writes without an entry here fails, and so does an entry the code no longer
writes.

A metric key is a pattern: ``<name>`` stands for a variable part, one of
:data:`PLACEHOLDERS` (``time/<step>`` is ``time/rollout``, ``time/update``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass


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
    "agent": "reasoning runs whose rollouts are agent trajectories (`agent.loop` other than "
    "`single_turn`)",
}

#: Variable parts of metric keys.
PLACEHOLDERS: tuple[Placeholder, ...] = (
    Placeholder(
        "step",
        "a step of the iteration",
        (
            "weight_sync",
            "rollout",
            "reward",
            "advantage",
            "update",
            "sft_update",
            "evaluate",
            "checkpoint",
        ),
    ),
    Placeholder(
        "stateful_step",
        "a step that changes worker state, snapshotted before it runs so a retry can undo it",
        ("rollout", "update", "sft_update"),
    ),
    Placeholder(
        "phase",
        "a phase of the iteration: a step, or the orchestration between the steps",
        (
            "weight_sync",
            "rollout",
            "reward",
            "advantage",
            "update",
            "evaluate",
            "checkpoint",
            "sft_update",
            "orchestration",
        ),
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
        "k", "`eval.pass_k`, the responses sampled per held-out prompt", (), "[0-9]+", "a number"
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
        ("rollout/", "env/", "async/"),
        "Collecting the iteration's batch: the `weight_sync`, `rollout`, `reward` and "
        "`advantage` steps, the training episodes of embodied runs and, with "
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
        "System",
        ("system/",),
        "Sampled from the driver's machine every `tracking.system_metrics_interval` "
        "seconds while `tracking.system_metrics` is on; their step counts samples, not "
        "iterations ([MLflow](mlflow.md#system-metrics)).",
    ),
)

#: Every metric rlpipe logs.
METRICS: tuple[MetricEntry, ...] = (
    # -- training -------------------------------------------------------------------------
    MetricEntry(
        "train/policy_loss",
        "loss",
        "all",
        "Policy loss of `algorithm.loss_type` (PPO's clipped surrogate, decoupled PPO), "
        "mean over the update's minibatches; not written by SAC, CrossQ, RLPD.",
    ),
    MetricEntry(
        "train/value_loss",
        "loss",
        "all",
        "Critic loss ½·(value − return target)², clipped by `algorithm.value_clip`: "
        "embodied PPO, and reasoning runs with a critic (`token_gae`).",
    ),
    MetricEntry(
        "train/entropy",
        "nats",
        "all",
        "Mean entropy of the policy's action (token) distribution on the batch; SAC, CrossQ "
        "and RLPD: −mean log-prob of the actor's sampled actions at its steps.",
    ),
    MetricEntry(
        "train/kl",
        "nats",
        "embodied",
        "KL estimate (`algorithm.kl_estimator`) between the policy being updated and the "
        "batch's old log-probs, mean over minibatches; `algorithm.target_kl` stops the "
        "epochs early when it passes.",
    ),
    MetricEntry(
        "train/kl_loss",
        "nats",
        "reasoning",
        "KL estimate to the reference model used as a loss term (`algorithm.kl_coef` > 0, "
        "`algorithm.kl_in_reward` off).",
    ),
    MetricEntry(
        "train/approx_kl",
        "nats",
        "all",
        "Mean of old minus new log-prob over the trained tokens (steps): the k1 estimate of "
        "how far the update moved the policy.",
    ),
    MetricEntry(
        "train/clipfrac",
        "fraction",
        "all",
        "Share of trained tokens (steps) where PPO's ratio clip was active.",
    ),
    MetricEntry(
        "train/dual_clipfrac",
        "fraction",
        "all",
        "Share where the dual clip (`algorithm.clip_ratio_c`) bounded the loss of a "
        "negative advantage; 0 without dual clipping.",
    ),
    MetricEntry(
        "train/ratio_mean",
        "ratio",
        "all",
        "Mean probability ratio new / old policy over the trained tokens (steps).",
    ),
    MetricEntry(
        "train/value_clipfrac",
        "fraction",
        "embodied",
        "Share of value predictions where the clipped value loss was the larger one "
        "(0 without `algorithm.value_clip`).",
    ),
    MetricEntry(
        "train/behaviour_weight_mean",
        "ratio",
        "all",
        "`loss_type: decoupled_ppo`: mean weight min(π_prox / π_behav, "
        "`algorithm.behaviour_weight_cap`) of the samples.",
    ),
    MetricEntry(
        "train/behaviour_clipped_fraction",
        "fraction",
        "all",
        "`loss_type: decoupled_ppo`: share of tokens (steps) whose behaviour weight was capped.",
    ),
    MetricEntry(
        "train/is_weight_mean",
        "ratio",
        "reasoning",
        "With `algorithm.is_correction`: mean importance weight (trainer over rollout engine) "
        "of the trained tokens.",
    ),
    MetricEntry(
        "train/is_clipped_fraction",
        "fraction",
        "reasoning",
        "With `algorithm.is_correction`: share of tokens whose weight differs from their "
        "ratio (truncated by `tis`, masked by `mis`).",
    ),
    MetricEntry(
        "train/is_log_ratio_abs_mean",
        "nats",
        "reasoning",
        "With `algorithm.is_correction`: mean |log(trainer / rollout engine)| of the trained "
        "tokens (per sequence with `algorithm.is_level: sequence`).",
    ),
    MetricEntry(
        "train/grad_norm",
        "L2 norm",
        "all",
        "Global gradient norm before clipping to `actor.max_grad_norm`, mean over the "
        "applied steps (PPO-family and SFT updates).",
    ),
    MetricEntry(
        "train/lr",
        "learning rate",
        "all",
        "Learning rate of this iteration's update under `actor.lr_schedule` and warm-up "
        "(SAC, CrossQ, RLPD: the actor's).",
    ),
    MetricEntry(
        "train/minibatch_updates",
        "count",
        "embodied",
        "PPO minibatch updates applied: `actor.update_epochs` × `actor.num_minibatches`, "
        "fewer when `algorithm.target_kl` stopped early or updates were skipped.",
    ),
    MetricEntry(
        "train/optimizer_steps",
        "count",
        "reasoning",
        "Optimizer steps applied: `actor.update_epochs` × `actor.num_minibatches` minus "
        "the skipped ones.",
    ),
    MetricEntry(
        "train/skipped_updates",
        "count",
        "all",
        "Updates not applied because their loss or gradient norm was not finite (weights "
        "and optimizer left as they were); SFT: summed over the iteration's steps.",
    ),
    MetricEntry(
        "train/advantage_mean",
        "advantage",
        "all",
        "Mean advantage of the batch (embodied PPO: before per-minibatch normalization; "
        "reasoning: over the trained tokens, after `algorithm.normalize_advantages`).",
    ),
    MetricEntry(
        "train/return_target_mean",
        "return",
        "embodied",
        "Mean return target (the critic's regression target) of the batch, PPO.",
    ),
    MetricEntry(
        "train/tokens_per_second",
        "tokens/s",
        "reasoning",
        "Prompt and response tokens the update processed (× `actor.update_epochs`, tool "
        "output included) per second of the update step.",
    ),
    MetricEntry(
        "train/sft_loss",
        "nats/token",
        "reasoning",
        "SFT: negative log-likelihood per trained target token, mean over the iteration's "
        "`actor.sft_steps_per_iteration` steps (0 for a skipped step).",
    ),
    MetricEntry(
        "train/critic_loss",
        "loss",
        "embodied",
        "SAC, CrossQ, RLPD: ½·mean squared TD error, summed over the critics, mean over "
        "the gradient steps.",
    ),
    MetricEntry(
        "train/critic_grad_norm",
        "L2 norm",
        "embodied",
        "SAC, CrossQ, RLPD: the critics' gradient norm before clipping, mean over the "
        "gradient steps.",
    ),
    MetricEntry(
        "train/q_mean",
        "return",
        "embodied",
        "SAC, CrossQ, RLPD: mean critic prediction Q(s, a) on the replay minibatches.",
    ),
    MetricEntry(
        "train/actor_loss",
        "loss",
        "embodied",
        "SAC, CrossQ, RLPD: mean of α·log π(a|s) − Q(s, a) at the actor steps (every "
        "`algorithm.off_policy.actor_update_interval` critic steps).",
    ),
    MetricEntry(
        "train/actor_grad_norm",
        "L2 norm",
        "embodied",
        "SAC, CrossQ, RLPD: the actor's gradient norm before clipping, mean over its steps.",
    ),
    MetricEntry(
        "train/alpha_loss",
        "loss",
        "embodied",
        "SAC, CrossQ, RLPD with `algorithm.off_policy.autotune_alpha`: the entropy "
        "temperature's loss, mean over the actor steps.",
    ),
    MetricEntry(
        "train/alpha",
        "temperature",
        "embodied",
        "SAC, CrossQ, RLPD: the entropy temperature α after the update.",
    ),
    MetricEntry(
        "train/gradient_steps",
        "count",
        "embodied",
        "SAC, CrossQ, RLPD: gradient steps of the iteration (`algorithm.off_policy.utd_ratio` "
        "× its env steps); 0 until the buffer holds `replay.learning_starts` transitions.",
    ),
    MetricEntry(
        "replay/size",
        "count",
        "embodied",
        "SAC, CrossQ, RLPD: transitions in the replay buffer after adding the iteration's.",
    ),
    # -- rollout --------------------------------------------------------------------------
    MetricEntry(
        "rollout/reward_mean",
        "reward",
        "all",
        "Embodied: mean per-step reward of the batch after `reward.reward_type`; "
        "reasoning: mean reward of the scored responses, before the overlong penalty and "
        "`agent.call_cost`.",
    ),
    MetricEntry(
        "rollout/steps_per_second",
        "env steps/s",
        "embodied",
        "Env steps collected per second of the rollout step.",
    ),
    MetricEntry(
        "rollout/tokens_per_second",
        "tokens/s",
        "reasoning",
        "Response tokens generated per second of the rollout step (the batch's response "
        "tokens × `rollout/generation_rounds`).",
    ),
    MetricEntry(
        "rollout/response_length_mean",
        "tokens",
        "reasoning",
        "Mean response length of the batch (agent trajectories: with the tool output in them).",
    ),
    MetricEntry(
        "rollout/truncated_fraction",
        "fraction",
        "reasoning",
        "Share of the batch's responses that did not finish (cut at a token limit, such as "
        "`rollout.max_new_tokens`).",
    ),
    MetricEntry(
        "rollout/generation_rounds",
        "count",
        "reasoning",
        "Rounds of sampling that made the batch: 1, up to `algorithm.max_num_gen_batches` "
        "with DAPO's `algorithm.dynamic_sampling`.",
    ),
    MetricEntry(
        "rollout/unscored_fraction",
        "fraction",
        "reasoning",
        "Share of responses left out of training because nobody could score them (a NaN "
        "reward, a tool's infrastructure failure).",
    ),
    MetricEntry(
        "rollout/overlong_penalty_mean",
        "reward",
        "reasoning",
        "DAPO's soft overlong penalty (≤ 0), mean over the scored responses, with "
        "`algorithm.overlong_buffer_length` set.",
    ),
    MetricEntry(
        "rollout/kl_to_ref",
        "nats",
        "reasoning",
        "Mean per-token KL estimate between the trainer's policy and the reference model on "
        "the batch, with a reference (`algorithm.kl_coef` > 0).",
    ),
    MetricEntry(
        "rollout/logprob_mismatch",
        "nats",
        "reasoning",
        "Mean |trainer − rollout engine| log-prob of the batch's trained tokens: how far "
        "the engine's numerics (or weights) are from the trainer's.",
    ),
    MetricEntry(
        "rollout/weight_sync_bytes",
        "bytes",
        "all",
        "Bytes the weight sync sent to the rollout workers (0 with the hybrid engine, "
        "which syncs in memory).",
    ),
    MetricEntry(
        "rollout/weight_sync_buckets",
        "count",
        "embodied",
        "Object-store buckets (`rollout.weight_sync_bucket_mb` each) the weights were sent "
        "in; 0 with the hybrid engine.",
    ),
    MetricEntry(
        "rollout/weight_sync_full",
        "0 or 1",
        "reasoning",
        "1 when the weight sync sent the full weights, 0 when a patch of the changed "
        "elements (`rollout.weight_sync_mode: patch`).",
    ),
    MetricEntry(
        "env/episodes",
        "count",
        "embodied",
        "Training episodes that ended during the rollout (all env workers).",
    ),
    MetricEntry(
        "env/episode_return_mean",
        "return",
        "embodied",
        "Mean return of those episodes (logged when at least one ended).",
    ),
    MetricEntry(
        "env/episode_length_mean",
        "env steps",
        "embodied",
        "Mean length of those episodes (logged when at least one ended).",
    ),
    MetricEntry(
        "env/step_seconds",
        "seconds",
        "embodied",
        "Longest time an env worker spent stepping its envs during the rollout (env steps "
        "only, not the policy's inference).",
    ),
    MetricEntry(
        "env/total_steps",
        "count",
        "all",
        "Samples trained on so far: env steps (embodied), responses (reasoning RL), "
        "prompt–answer pairs (SFT); a sweep's x axis.",
    ),
    MetricEntry(
        "async/staleness_mean",
        "weight versions",
        "all",
        "`run.mode: async`: weight versions the batch lags the trainer by (reasoning: mean "
        "over its sampled tokens; embodied: the batch's, one value).",
    ),
    MetricEntry(
        "async/staleness_max",
        "weight versions",
        "all",
        "`run.mode: async`: the largest lag of the batch's samples (tokens), in weight versions.",
    ),
    MetricEntry(
        "async/buffer_fill",
        "fraction",
        "all",
        "`run.mode: async`: batches launched ahead and still waiting after this one was "
        "taken, over `algorithm.max_staleness`.",
    ),
    MetricEntry(
        "async/trainer_idle_seconds",
        "seconds",
        "all",
        "`run.mode: async`: time the rollout step waited for its batch to be ready.",
    ),
    MetricEntry(
        "async/rollout_idle_seconds",
        "seconds",
        "all",
        "`run.mode: async`: longest pause of a rollout (env) worker between finishing its "
        "previous batch and starting this one.",
    ),
    # -- evaluation -----------------------------------------------------------------------
    MetricEntry(
        "eval/return_mean",
        "return",
        "all",
        "Embodied: mean return of the evaluation episodes; reasoning: mean reward of the "
        "greedy responses to the held-out prompts. The score of embodied checkpoints; "
        "`run.stop_at_eval_return` compares it.",
    ),
    MetricEntry(
        "eval/return_std",
        "return",
        "embodied",
        "Standard deviation of the evaluation episodes' returns.",
    ),
    MetricEntry(
        "eval/return_min",
        "return",
        "embodied",
        "Lowest return of the evaluation episodes.",
    ),
    MetricEntry(
        "eval/return_max",
        "return",
        "embodied",
        "Highest return of the evaluation episodes (evaluation runs of `flows/evaluate.py` only).",
    ),
    MetricEntry(
        "eval/length_mean",
        "env steps",
        "embodied",
        "Mean length of the evaluation episodes.",
    ),
    MetricEntry(
        "eval/episodes",
        "count",
        "embodied",
        "Evaluation episodes (`eval.num_episodes`; `--episodes` of `flows/evaluate.py`).",
    ),
    MetricEntry(
        "eval/accuracy",
        "fraction",
        "reasoning",
        "Share of greedy responses to the held-out prompts that the `eval.correct_when` "
        "reward scores in full; the score of reasoning checkpoints.",
    ),
    MetricEntry(
        "eval/accuracy/<kind>",
        "fraction",
        "reasoning",
        "`eval/accuracy` of the held-out prompts of one kind.",
    ),
    MetricEntry(
        "eval/pass_at_<k>",
        "fraction",
        "reasoning",
        "Share of held-out prompts with at least one correct response among `eval.pass_k` "
        "sampled ones.",
    ),
    MetricEntry(
        "eval/response_length_mean",
        "tokens",
        "reasoning",
        "Mean length of the greedy responses.",
    ),
    MetricEntry(
        "eval/prompts",
        "count",
        "reasoning",
        "Held-out prompts evaluated.",
    ),
    MetricEntry(
        "eval/video_return",
        "return",
        "embodied",
        "Return of the rendered evaluation episode (the first evaluation seed), when a "
        "video was recorded (`eval.video`).",
    ),
    # -- timing and orchestration ----------------------------------------------------------
    MetricEntry(
        "time/<step>",
        "seconds",
        "all",
        "Worker time of each step that ran: the wall time of its worker-group calls "
        "(embodied `evaluate`: the slowest evaluation task's own time), its snapshot "
        "(`time/snapshot_<stateful_step>`) and video (`time/eval_video`) included.",
    ),
    MetricEntry(
        "time/compute",
        "seconds",
        "all",
        "Sum of the iteration's `time/<step>`.",
    ),
    MetricEntry(
        "time/iteration",
        "seconds",
        "all",
        "Wall time from calling the `iteration-<k>` child flow to having queued its metrics.",
    ),
    MetricEntry(
        "time/orchestration",
        "seconds",
        "all",
        "`time/iteration` − `time/compute`: the Prefect flow and task engines, API calls, "
        "queuing the MLflow metrics.",
    ),
    MetricEntry(
        "time/orchestration_ratio",
        "fraction",
        "all",
        "`time/orchestration` / `time/iteration`.",
    ),
    MetricEntry(
        "time/orch_flow_start",
        "seconds",
        "all",
        "From calling the child flow to its body starting (flow-run creation, state API calls).",
    ),
    MetricEntry(
        "time/orch_tasks",
        "seconds",
        "all",
        "Inside the child flow's body, the time not spent in workers (the task engine "
        "around each step).",
    ),
    MetricEntry(
        "time/orch_flow_end_and_tracking",
        "seconds",
        "all",
        "From the body returning to the iteration's metrics being queued for MLflow.",
    ),
    MetricEntry(
        "time/snapshot_<stateful_step>",
        "seconds",
        "all",
        "Keeping what the step changes so that a retry can undo it (counted in the step's "
        "`time/<step>`).",
    ),
    MetricEntry(
        "time/eval_video",
        "seconds",
        "embodied",
        "Rendering the evaluation video (counted in `time/evaluate`), when one was recorded.",
    ),
    # -- cost -----------------------------------------------------------------------------
    MetricEntry(
        "cost/cpu_hours_<phase>",
        "CPU-hours",
        "all",
        "This iteration's CPU-hours in the phase: its `time/<phase>` × the reserved CPUs.",
    ),
    MetricEntry(
        "cost/gpu_hours_<phase>",
        "GPU-hours",
        "all",
        "The same in GPU-hours, when the workers reserve GPUs.",
    ),
    MetricEntry(
        "cost/cpu_hours_total",
        "CPU-hours",
        "all",
        "The run's running total; a resumed run continues it.",
    ),
    MetricEntry(
        "cost/gpu_hours_total",
        "GPU-hours",
        "all",
        "The run's running total in GPU-hours (0 without GPUs); a resumed run continues it.",
    ),
    MetricEntry(
        "cost/cpu_hours_per_1k_samples",
        "CPU-hours",
        "all",
        "`cost/cpu_hours_total` per 1 000 samples trained on (see `env/total_steps`); after "
        "a resume the samples count from the resume.",
    ),
    MetricEntry(
        "cost/gpu_hours_per_1k_samples",
        "GPU-hours",
        "all",
        "`cost/gpu_hours_total` per 1 000 samples, likewise, when the workers reserve GPUs.",
    ),
    # -- agents ---------------------------------------------------------------------------
    MetricEntry(
        "agent/turns_mean",
        "count",
        "agent",
        "Model turns per trajectory of the batch.",
    ),
    MetricEntry(
        "agent/tool_calls_mean",
        "count",
        "agent",
        "Tool calls per trajectory.",
    ),
    MetricEntry(
        "agent/tool_call_rate",
        "fraction",
        "agent",
        "Share of trajectories with at least one tool call.",
    ),
    MetricEntry(
        "agent/tool_error_rate",
        "fraction",
        "agent",
        "Share of the tool calls that failed through the model's fault.",
    ),
    MetricEntry(
        "agent/tool_timeout_rate",
        "fraction",
        "agent",
        "Share of the tool calls stopped by the sandbox's wall-clock or CPU limit.",
    ),
    MetricEntry(
        "agent/tool_latency_mean",
        "seconds",
        "agent",
        "Mean latency of a tool call (0 without calls).",
    ),
    MetricEntry(
        "agent/infra_failure_rate",
        "fraction",
        "agent",
        "Share of trajectories that met an infrastructure failure of a tool.",
    ),
    MetricEntry(
        "agent/masked_token_fraction",
        "fraction",
        "agent",
        "Share of the trajectories' tokens that the model did not produce (tool output: "
        "loss mask 0).",
    ),
    MetricEntry(
        "agent/reward_with_tool",
        "reward",
        "agent",
        "Mean reward (before the overlong penalty and `agent.call_cost`) of the scored "
        "trajectories that called a tool; absent when none did.",
    ),
    MetricEntry(
        "agent/reward_without_tool",
        "reward",
        "agent",
        "The same for the trajectories that called no tool; absent when all did.",
    ),
    MetricEntry(
        "agent/<kind>/<trajectory_metric>",
        "as `agent/<trajectory_metric>`",
        "agent",
        "The trajectory statistic of the batch's rows of one kind.",
    ),
    MetricEntry(
        "agent/<kind>/reward_with_tool",
        "reward",
        "agent",
        "`agent/reward_with_tool` of the rows of one kind.",
    ),
    MetricEntry(
        "agent/<kind>/reward_without_tool",
        "reward",
        "agent",
        "`agent/reward_without_tool` of the rows of one kind.",
    ),
    MetricEntry(
        "agent/turn_rows",
        "count",
        "agent",
        "Rows trained on when `agent.context` rewrites contexts: one per model turn.",
    ),
    MetricEntry(
        "eval/agent/<trajectory_metric>",
        "as `agent/<trajectory_metric>`",
        "agent",
        "The trajectory statistic of the evaluation's greedy trajectories.",
    ),
    MetricEntry(
        "eval/agent/<kind>/<trajectory_metric>",
        "as `agent/<trajectory_metric>`",
        "agent",
        "The same for the held-out prompts of one kind.",
    ),
    # -- system ---------------------------------------------------------------------------
    MetricEntry(
        "system/<name>",
        "as named",
        "all",
        "MLflow's system metrics (`cpu_utilization_percentage`, "
        "`system_memory_usage_megabytes`, `disk_usage_percentage`, GPU ones with `pynvml`).",
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
