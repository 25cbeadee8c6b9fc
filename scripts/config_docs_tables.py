"""Hand-written tables of scripts/gen_config_docs.py: what the schema cannot say itself.

``gen_config_docs.render`` checks every table against the schema, so a renamed field, a new
validator or a new cross-field rule fails loudly instead of leaving the page wrong.
"""

from __future__ import annotations

#: Fields validated against a registry: (section, field) -> registry kind (``registry_for``).
REGISTERED_FIELDS: dict[tuple[str, str], str] = {
    ("env", "env_type"): "env",
    ("model", "model_type"): "model",
    ("algorithm", "adv_type"): "advantage",
    ("algorithm", "loss_type"): "policy_loss",
    ("algorithm", "is_correction"): "is_correction",
    ("reward", "reward_type"): "reward",
    ("algorithm", "kl_estimator"): "kl_estimator",
    ("algorithm", "loss_agg_mode"): "loss_agg_mode",
    ("actor", "optimizer"): "optimizer",
    ("actor", "lr_schedule"): "lr_schedule",
    ("actor", "backend"): "trainer_backend",
    ("rollout", "engine"): "rollout_engine",
    ("agent", "loop"): "agent_loop",
    ("agent", "parser"): "tool_parser",
    ("agent", "context"): "agent_context",
    ("data", "source"): "prompt_source",
    ("eval", "correct_when"): "reward",
    ("reward", "sandbox"): "sandbox",
}

#: What the other field validators of the schema allow (shown in the "allowed" column).
FIELD_VALIDATOR_NOTES: dict[tuple[str, str], str] = {
    ("cluster", "component_placement"): (
        "keys: comma-separated components ({components}), each placed once; values: an index "
        "(`0`), range (`0-3`), list (`0,2`) or `all`; GPU indices count across nodes and "
        "must exist (`num_nodes` x `num_gpus_per_node`)"
    ),
    ("cluster", "gpus_per_worker"): (
        "keys: components ({components}); values 0 to 1; the shares on one GPU add up to at most 1"
    ),
    ("cluster", "device"): "`cuda` needs GPUs in the Ray cluster",
    (
        "agent",
        "tools",
    ): "registered tool names (`calculator`, `python`, an extension's), or null for every one",
    ("cluster", "hybrid_engine"): (
        "`on` needs rollout and actor on the same index set and `rollout.num_workers` = "
        "`actor.num_workers`; YAML `true`/`false` read as `on`/`off`"
    ),
    ("env", "env_id"): "a registered gymnasium id when `env_type` is `gym`",
    ("env.manipulation", "tasks"): (
        "distinct names; with `env_type: metaworld`, Meta-World V3 task names (`reach-v3`, "
        "`push-v3`, `pick-place-v3`, ...)"
    ),
    ("actor.lora", "target_modules"): (
        "non-empty names of linear layers (`q_proj`, `v_proj`, ...), or `[all-linear]` alone"
    ),
    ("model", "hidden_sizes"): "non-empty, each from 1 to {max_layer_width}",
    ("model", "critic_hidden_sizes"): "None, or non-empty with each from 1 to {max_layer_width}",
    ("demos", "action_noise"): "one std, or a non-empty list of stds; each from 0 to 10",
    ("model", "cnn_channels"): (
        "1 to {max_conv_layers} conv layers, each with 1 to {max_layer_width} channels"
    ),
    ("algorithm", "loss_type"): (
        "or an off-policy algorithm: `sac`, `crossq`, `rlpd` (trained from a replay buffer), "
        "`iql` (offline, from the demonstration dataset)"
    ),
    ("algorithm", "is_correction"): "or `none` (no correction)",
    ("run", "checkpoint_uri"): "a local path or `s3://<bucket>[/prefix]`; no credentials",
    ("online", "baseline"): "registered: `none`, `running_mean`",
    ("online", "mirror"): "a local path or `s3://<bucket>[/prefix]`; no credentials",
    (
        "run",
        "init_from",
    ): "`models:/<name>@<alias>`, `models:/<name>/<version>`, `models:/<name>/latest` or a folder; not with `run.warm_start`",
    ("run", "name"): (
        "1 to 128 letters, digits, `.`, `_` or `-`, starting with a letter or digit (one "
        "folder name)"
    ),
    ("tracking", "artifact_location"): "a local path or an MLflow artifact URI; no credentials",
    ("tracking", "registered_model_name"): (
        "only `{{task}}`, `{{preset}}` and `{{run_name}}` placeholders; no `/` or `:` (MLflow "
        "model names)"
    ),
}

#: Descriptions for fields whose schema ``Field`` has none (the schema's own text wins).
FALLBACK_DESCRIPTIONS: dict[tuple[str, str], str] = {
    ("", "preset"): "Set from the preset file's name when loading a preset.",
    ("run", "name"): "Run name: the resume key and the folder `<output_dir>/<name>/`.",
    ("run", "seed"): "Seed of the driver; every worker's seed is derived from it.",
    ("run", "max_iterations"): "Training iterations of the run.",
    ("run", "output_dir"): "Root of checkpoints, MLflow store and logs.",
    ("env", "num_workers"): "Env workers (Ray actors).",
    ("env", "vectorization"): "gymnasium `SyncVectorEnv` (one process) or `AsyncVectorEnv`.",
    ("env", "max_episode_steps"): "Episode step limit for `gymnasium.make` (None: the env's own).",
    ("model", "model_type"): "Registered policy builder.",
    ("model", "hidden_sizes"): "Hidden layer widths of the actor and critic MLPs.",
    ("model", "activation"): "Activation of the hidden layers.",
    ("model", "init_log_std"): "Initial log standard deviation of the Gaussian head.",
    ("rollout", "num_workers"): "Rollout workers; env worker i queries rollout worker i mod n.",
    ("algorithm", "adv_type"): "Registered advantage estimator.",
    ("algorithm", "loss_type"): "Registered policy loss or off-policy algorithm.",
    ("algorithm", "gamma"): "Discount factor.",
    ("algorithm", "gae_lambda"): "GAE λ.",
    ("algorithm", "normalize_advantages"): "Standardise advantages per minibatch.",
    ("algorithm", "clip_ratio_low"): "PPO ratio clip below 1 (ratio ≥ 1 - low).",
    ("algorithm", "clip_ratio_high"): "PPO ratio clip above 1 (ratio ≤ 1 + high).",
    ("algorithm", "value_clip"): "Clip range of the value loss; None = unclipped.",
    ("algorithm", "value_coef"): "Weight of the value loss.",
    ("algorithm", "entropy_coef"): "Weight of the entropy bonus.",
    ("algorithm", "kl_estimator"): "Estimator of the `train/kl` metric (also used by `target_kl`).",
    ("actor", "num_workers"): "Trainer workers (Ray actors).",
    (
        "actor",
        "optimizer",
    ): "Optimizer class (sac, crossq, rlpd: of actor, critics and temperature).",
    ("actor", "lr"): "Peak learning rate.",
    ("actor", "adam_eps"): "Adam/AdamW epsilon; None = 1e-5 (sac, crossq, rlpd: 1e-8).",
    ("actor", "weight_decay"): (
        "Optimizer weight decay (sac, crossq, rlpd: actor and critics, not the temperature)."
    ),
    ("actor", "lr_schedule"): (
        "Decay after warm-up: constant, or linear/cosine to 0 at the end (sac, crossq, rlpd: "
        "of every learning rate)."
    ),
    ("actor", "warmup_iterations"): "Linear warm-up iterations.",
    ("actor", "update_epochs"): "Passes over each rollout batch.",
    ("actor", "num_minibatches"): "Minibatches per epoch.",
    ("actor", "max_grad_norm"): "Gradient-norm clip; None = no clipping.",
    ("reward", "scale"): "Multiplier applied to the reward.",
    ("eval", "num_episodes"): "Episodes per evaluation (fixed seeds, the same every time).",
    ("eval", "num_envs"): "Envs stepped together inside one evaluation task.",
    ("eval", "deterministic"): "Greedy/mean actions instead of sampling.",
    ("tracking", "enabled"): "Log to MLflow.",
}

#: The schema's model validators (cross-field rules), keyed by (model class, validator).
CROSS_FIELD_RULES: dict[tuple[str, str], str] = {
    ("ReasoningRewardConfig", "_function_used_and_loadable"): (
        "`reward.function` is set exactly when the reward `function` is used (as "
        "`reward_type` or a component), and names an importable function with verl's or "
        "TRL's signature."
    ),
    ("ReasoningRewardConfig", "_model_reward_configured"): (
        "`reward.reward_type: reward_model` (or `reward_model` among `reward.components`) "
        "needs `reward.model`."
    ),
    ("EnvConfig", "_groups_fit"): "`env.num_envs` must be a multiple of `env.group_size`.",
    ("EnvConfig", "_batched_exists"): (
        "`env.vectorization: batched` needs an env type with a batched simulator "
        "(`maniskill`: ManiSkill3's GPU backend)."
    ),
    ("EnvConfig", "_env_type_accepts_settings"): (
        "The env type checks its own settings: `env_type: metaworld` needs Meta-World "
        "installed (`pip install 'rlpipe[metaworld]'`), Meta-World task names in "
        "`env.manipulation.tasks`, one of its cameras in `env.manipulation.camera` "
        "(`topview`, `corner`, `corner2`, `corner3`, `corner4`, `behindGripper`, `gripperPOV`) "
        "and no `env.kwargs` (its settings are `env.manipulation`)."
    ),
    ("RunConfig", "_one_starting_model"): (
        "`run.init_from` and `run.warm_start` both name the starting model: set one."
    ),
    ("TimeoutsConfig", "_heartbeat_timeout_covers_interval"): (
        "`timeouts.heartbeat_timeout_s` must be at least `timeouts.heartbeat_interval_s`."
    ),
    ("EmbodiedConfig", "_advantage_fits_model"): (
        "Embodied models need a per-step `algorithm.adv_type` (e.g. `gae`) and one trainer "
        "worker; `episode_grpo` needs `env.group_size` of 2 or more and `rollout.num_steps` "
        "equal to `env.max_episode_steps` (one whole episode per env per rollout), so no "
        "`env.manipulation.terminate_on_success` or `reset_on_success`."
    ),
    ("ManipulationConfig", "_one_end_on_success"): (
        "`env.manipulation.terminate_on_success` and `reset_on_success` cannot both be true."
    ),
    ("ReasoningActorConfig", "_lora_fits_backend"): (
        "`actor.lora.rank` above 0 needs `actor.backend: fsdp`."
    ),
    ("ReasoningConfig", "_engine_applies_lora"): (
        "`actor.lora.rank` above 0 needs a `rollout.engine` that applies LoRA adapters (`hf`, `vllm`)."
    ),
    ("ModelRewardConfig", "_one_source"): (
        "`reward.model` needs exactly one of `uri` and `preset`; `preset` (a reward model "
        "trained first) only with `kind: classifier`."
    ),
    ("OnlineConfig", "_online_fits"): (
        "`online.enabled: true` needs `algorithm.group_size: 1`, `algorithm.adv_type` "
        "`outcome` or `reinforce_plus_plus`, `run.mode: sync`, `agent.loop: single_turn`, no "
        "dynamic sampling and no LoRA."
    ),
    ("OnlineSection", "_user_needs_own_server"): (
        "`online.user.enabled: true` needs `online.server: run` (the simulated user asks the "
        "run's own endpoint)."
    ),
    ("ReasoningConfig", "_advantage_fits_model"): (
        "Reasoning models need a sequence/token estimator (`grpo`, `dr_grpo`, `rloo`, "
        "`reinforce_plus_plus`, `reinforce_plus_plus_baseline`, or `token_gae` with "
        "`model.value_head`) and a response reward (not `env`)."
    ),
    ("ReasoningConfig", "_agent_loop_fits"): (
        "An agent loop other than `single_turn` needs `rollout.partial_rollout_tokens` = 0; "
        "an `agent.context` other than `append` needs an outcome estimator (no critic) and "
        "no `algorithm.kl_in_reward`."
    ),
    ("ReasoningConfig", "_model_files_exist"): (
        "`hf_causal_lm` needs `model.model_path`, a local directory with a `config.json`, or "
        "a Hugging Face hub id (`owner/name`); a hub id must be in the local Hugging Face cache "
        "(or `model.hub_download: true`), checked before any server or worker starts."
    ),
    ("DataConfig", "_source_options"): (
        "`data.options` must fit the options schema of `data.source` (`hf`: `path`, `name`, "
        "`split`, `eval_split`, `data_files`, `revision`); sources without options take none."
    ),
    ("DataConfig", "_files_given"): (
        "`data.source: files` needs `data.train_files`; `data.prompt_template` must contain "
        "`{prompt}`."
    ),
    ("ClusterConfig", "_gpu_indices_exist"): (
        "`cluster.device: cuda` with `cluster.num_gpus_per_node` set: every index of "
        "`cluster.component_placement` must be below `num_nodes × num_gpus_per_node` "
        "(`num_gpus_per_node: 0` is refused with `device: cuda`)."
    ),
    ("RLPipeConfig", "_hybrid_engine_possible"): (
        "`cluster.hybrid_engine: on` needs rollout and actor on the same index set, "
        "`rollout.num_workers` equal to `actor.num_workers` and `run.mode: sync`."
    ),
    ("EmbodiedConfig", "_stages_divide"): (
        "`rollout.pipeline_stages` must divide `env.num_envs` into slices that are multiples "
        "of `env.group_size`."
    ),
    ("EmbodiedConfig", "_batched_in_one_stage"): (
        "`env.vectorization: batched` holds an env worker's envs in one simulator: "
        "`rollout.pipeline_stages` must be 1."
    ),
    ("EmbodiedConfig", "_batch_divides"): (
        "Embodied: the batch `env.num_workers × env.num_envs × rollout.num_steps` must divide "
        "into `actor.num_minibatches × actor.num_workers` equal parts."
    ),
    ("ReasoningConfig", "_batch_divides"): (
        "Reasoning: the batch `data.prompts_per_batch × algorithm.group_size` must divide into "
        "`actor.num_minibatches × actor.num_workers` equal parts (megatron: data-parallel "
        "replicas, `actor.num_workers / actor.megatron.tensor_model_parallel_size`)."
    ),
    ("ReasoningConfig", "_token_budget_fits_a_row"): (
        "Reasoning: `actor.max_tokens_per_micro_batch`, when set, must hold the longest row, "
        "`data.max_prompt_length + rollout.max_new_tokens` tokens."
    ),
    ("RLPipeConfig", "_async_mode_fits"): (
        "`run.mode: async` runs the kinds that support it (embodied PPO and reasoning "
        "models); it turns the hybrid engine off (`cluster.hybrid_engine: on` is refused "
        "with it)."
    ),
    ("ReasoningConfig", "_async_generation_fits"): (
        "Reasoning: `run.mode: async` excludes DAPO's `algorithm.dynamic_sampling`; "
        "`rollout.partial_rollout_tokens` > 0 needs `run.mode: async` with "
        "`algorithm.max_staleness` ≥ 1."
    ),
    ("ReasoningConfig", "_off_policy_correction_fits"): (
        "`algorithm.loss_type: decoupled_ppo` excludes `algorithm.is_correction` (the same "
        "ratio would be corrected twice)."
    ),
    ("EmbodiedConfig", "_off_policy_fits"): (
        "An off-policy `algorithm.loss_type` (`sac`, `crossq`, `rlpd`, `iql`) needs a model "
        "with the forward types its learner calls (`sac`, `crossq`, `rlpd`: `sac_forward` and "
        "`q_forward`, `mlp_sac`; `iql`: `default_forward`, `q_forward` and `v_forward`, "
        "`mlp_iql`), the critic normalization the algorithm "
        "uses (`crossq`: `batch_renorm`, `rlpd`: `layer_norm`), "
        "`algorithm.off_policy.critic_subset` ≤ `model.num_critics`, `run.mode: sync`, and "
        "`replay.offline_data` (an existing file) exactly when the algorithm reads offline "
        "data (`rlpd`), and no Adam setting with `actor.optimizer: sgd` (`actor.adam_eps`, an "
        "`algorithm.off_policy.adam_beta1` other than 0.9); `mlp_sac` and `mlp_iql` are "
        "trained by those algorithms only."
    ),
    ("ReasoningConfig", "_megatron_layout_fits"): (
        "`actor.backend: megatron` trains `hf_causal_lm` without `model.value_head`; "
        "`actor.num_workers` must be a multiple of `tensor_model_parallel_size × "
        "pipeline_model_parallel_size`; the tensor-parallel size must divide the model's "
        "attention heads and MLP width and divide its key/value heads or be a multiple of "
        "them (read from `model.model_path`'s `config.json`); `sequence_parallel` needs a "
        "tensor-parallel size above 1."
    ),
    ("EmbodiedConfig", "_rollout_buffer_fits_memory"): (
        "A lower bound of the rollout batch's size must fit in the physical memory of the "
        "machine that validates the config (embodied: `env.num_workers × env.num_envs × "
        "rollout.num_steps` × 64 bytes)."
    ),
    ("ReasoningConfig", "_rollout_buffer_fits_memory"): (
        "The same for reasoning runs: `data.prompts_per_batch × algorithm.group_size × "
        "(data.max_prompt_length + rollout.max_new_tokens)` × 16 bytes."
    ),
    ("RewardModelConfig", "_model_files_exist"): (
        "`hf_reward_model` needs `model.model_path`, a local directory with a `config.json` "
        "or a Hugging Face hub id in the local cache (or `model.tiny_init: true`, or "
        "`run.warm_start`, which provides it)."
    ),
    ("PreferenceDataConfig", "_files_given"): (
        "Reward models: `data.source: files` needs `data.train_files`; `data.source: "
        "arithmetic` reads no files."
    ),
    ("RewardModelConfig", "_batch_divides"): (
        "Reward models: `data.pairs_per_batch` must divide into `actor.num_workers` equal parts."
    ),
}
