"""The ``train/`` and ``replay/`` metrics: the update step and the replay buffer."""

from __future__ import annotations

from rl_core.metrics_glossary.entries import MetricEntry

#: Metrics of the section, in the order of ``docs/metrics.md``.
TRAINING_METRICS: tuple[MetricEntry, ...] = (
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
        "embodied PPO, and reasoning runs with a critic (`token_gae`). IQL: expectile loss "
        "of V(s) towards the target critics' smallest Q(s, a), mean over the gradient steps.",
    ),
    MetricEntry(
        "train/entropy",
        "nats",
        "all",
        "Mean entropy of the policy's action (token) distribution on the batch; SAC, CrossQ "
        "and RLPD: −mean log-prob of the actor's sampled actions at its steps; IQL: the "
        "actor's entropy on the dataset's states at its steps.",
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
        "reasoning: over the trained tokens, after `algorithm.normalize_advantages`; IQL: "
        "mean Q(s, a) − V(s) of the dataset actions at the actor's steps).",
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
        "train/bc_loss",
        "nats/action",
        "embodied",
        "Behaviour cloning (`rlpipe sft` of a control policy): negative log-likelihood of the "
        "demonstrated actions under the policy, mean over the iteration's "
        "`demos.steps_per_iteration` steps; IQL: the same, unweighted, at the actor's steps.",
    ),
    MetricEntry(
        "train/rm_loss",
        "nats/pair",
        "reward_model",
        "Bradley-Terry loss, mean over the pairs of a step of -log sigmoid(r_chosen - "
        "r_rejected), mean over the iteration's `actor.steps_per_iteration` steps (0 for a "
        "skipped step).",
    ),
    MetricEntry(
        "train/pairwise_accuracy",
        "fraction",
        "reward_model",
        "Share of the training pairs whose chosen response scored higher, before the step "
        "on them; mean over the iteration's steps.",
    ),
    MetricEntry(
        "train/reward_margin",
        "reward",
        "reward_model",
        "Mean r_chosen - r_rejected of the training pairs, before the step on them; mean "
        "over the iteration's steps.",
    ),
    MetricEntry(
        "train/critic_loss",
        "loss",
        "embodied",
        "SAC, CrossQ, RLPD: ½·mean squared TD error, summed over the critics, mean over "
        "the gradient steps; IQL: mean squared error towards r + γ(1 − d)·V(s'), summed over "
        "the critics.",
    ),
    MetricEntry(
        "train/critic_grad_norm",
        "L2 norm",
        "embodied",
        "SAC, CrossQ, RLPD, IQL: the critics' gradient norm before clipping, mean over the "
        "gradient steps.",
    ),
    MetricEntry(
        "train/q_mean",
        "return",
        "embodied",
        "SAC, CrossQ, RLPD, IQL: mean critic prediction Q(s, a) on the replay (IQL: dataset) "
        "minibatches.",
    ),
    MetricEntry(
        "train/actor_loss",
        "loss",
        "embodied",
        "SAC, CrossQ, RLPD: mean of α·log π(a|s) − Q(s, a) at the actor steps (every "
        "`algorithm.off_policy.actor_update_interval` critic steps); IQL: mean of "
        "−w·log π(a|s) over the dataset actions, w = min(exp(β·(Q − V)), max weight).",
    ),
    MetricEntry(
        "train/actor_grad_norm",
        "L2 norm",
        "embodied",
        "SAC, CrossQ, RLPD, IQL: the actor's gradient norm before clipping, mean over its steps.",
    ),
    MetricEntry(
        "train/value_grad_norm",
        "L2 norm",
        "embodied",
        "IQL: the state-value network's gradient norm before clipping, mean over the "
        "gradient steps.",
    ),
    MetricEntry(
        "train/v_mean",
        "return",
        "embodied",
        "IQL: mean state value V(s) on the dataset minibatches.",
    ),
    MetricEntry(
        "train/awr_weight_mean",
        "ratio",
        "embodied",
        "IQL: mean advantage weight min(exp(β·(Q − V)), `algorithm.iql.max_weight`) of the "
        "dataset actions at the actor's steps (1: behaviour cloning).",
    ),
    MetricEntry(
        "train/awr_clipped_fraction",
        "fraction",
        "embodied",
        "IQL: share of the dataset actions whose advantage weight reached "
        "`algorithm.iql.max_weight`.",
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
        "× its env steps); 0 until the buffer holds `replay.learning_starts` transitions. "
        "IQL: `demos.steps_per_iteration`.",
    ),
    MetricEntry(
        "replay/size",
        "count",
        "embodied",
        "SAC, CrossQ, RLPD: transitions in the replay buffer after adding the iteration's.",
    ),
)
