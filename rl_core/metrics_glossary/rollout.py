"""The ``rollout/``, ``env/`` and ``async/`` metrics: collecting the iteration's batch."""

from __future__ import annotations

from rl_core.metrics_glossary.entries import MetricEntry

#: Metrics of the section, in the order of ``docs/metrics.md``.
ROLLOUT_METRICS: tuple[MetricEntry, ...] = (
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
        "rollout/sync_probe_max_diff",
        "nats",
        "reasoning",
        "After the weight sync: the largest difference between a rollout engine's log-probs "
        "of a fixed probe text and the trainer's (`rollout.sync_probe`); above "
        "`rollout.sync_probe_atol` the iteration fails.",
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
        "demos/episodes",
        "count",
        "embodied",
        "Demonstrations (`rlpipe demos`, a `demos-<env type>` run): episodes the scripted "
        "expert played (`demos.episodes`).",
    ),
    MetricEntry(
        "demos/success_rate",
        "fraction",
        "embodied",
        "Demonstrations: share of those episodes in which the task succeeded.",
    ),
    MetricEntry(
        "demos/steps",
        "env steps",
        "embodied",
        "Demonstrations: steps recorded (observation and action pairs).",
    ),
    MetricEntry(
        "demos/seconds",
        "seconds",
        "embodied",
        "Demonstrations: wall time of the collection (its parallel tasks included).",
    ),
    MetricEntry(
        "env/success_rate",
        "fraction",
        "embodied",
        "Share of those episodes in which the task succeeded at some step (envs that report "
        '`info["success"]`, such as manipulation tasks).',
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
        "prompt–answer pairs (SFT), preference pairs (reward models); a sweep's x axis.",
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
    MetricEntry(
        "reward/rm_score_mean",
        "reward",
        "reasoning",
        "With `reward.model`: the reward model's (or judge's) score, after "
        "`reward.model.score_scale` and `score_offset`, mean over the rows it scored.",
    ),
    MetricEntry(
        "reward/rm_failures",
        "count",
        "reasoning",
        "With `reward.model`: rows of the batch the model gave no score (a judge reply the "
        "parser found no score in); they are left out of training.",
    ),
    MetricEntry(
        "reward/rm_failure_fraction",
        "fraction",
        "reasoning",
        "With `reward.model`: `reward/rm_failures` as a share of the batch.",
    ),
    MetricEntry(
        "reward/rule_<rule>_mean",
        "reward",
        "reasoning",
        "With `reward.model` and a composite reward: mean score of each rule component, "
        "before its weight.",
    ),
)
