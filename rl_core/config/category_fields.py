"""Fields read by one model category only: setting them for another category is an error.

The schema is one set of sections shared by every category, plus fields that only the
embodied or only the reasoning runtime reads. Setting such a field (in a preset or an
override) for a run of the other category would be silently ignored, so
:func:`category_field_problems` finds it (the loader refuses the config), naming the field and the category that reads it.
Categories registered by extensions are not checked.
"""

from __future__ import annotations

from typing import Any

#: ``{category: {section: fields (or "*" for the whole section)}}``.
CATEGORY_ONLY_FIELDS: dict[str, dict[str, Any]] = {
    "embodied": {
        "env": "*",
        "model": {
            "hidden_sizes",
            "activation",
            "continuous_action",
            "init_log_std",
            "critic_hidden_sizes",
            "num_critics",
            "critic_norm",
        },
        "replay": "*",
        "rollout": {"num_steps", "pipeline_stages"},
        "algorithm": {"off_policy"},
        "eval": {
            "num_episodes",
            "num_envs",
            "deterministic",
            "max_steps",
            "video",
            "video_interval",
            "video_max_frames",
            "video_frame_skip",
            "video_scale",
        },
    },
    "reasoning": {
        "data": "*",
        "model": {
            "model_path",
            "dtype",
            "trust_remote_code",
            "attn_implementation",
            "value_head",
            "gradient_checkpointing",
            "tiny_init",
        },
        "rollout": {
            "engine",
            "vllm",
            "max_new_tokens",
            "partial_rollout_tokens",
            "temperature",
            "top_p",
            "top_k",
            "weight_sync_mode",
            "weight_sync_dtype",
            "patch_full_sync_interval",
        },
        "algorithm": {
            "group_size",
            "loss_agg_mode",
            "loss_agg_norm",
            "dynamic_sampling",
            "max_num_gen_batches",
            "overlong_buffer_length",
            "overlong_penalty_factor",
            "kl_in_reward",
            "is_correction",
            "is_level",
            "is_threshold",
            "is_threshold_low",
            "behaviour_weight_cap",
        },
        "actor": {
            "micro_batch_size",
            "sft_steps_per_iteration",
            "fsdp_config",
            "backend",
            "megatron",
        },
        "eval": {"pass_k", "sample_rows"},
        "reward": {"num_tasks", "fanout_min_seconds", "format_pattern"},
    },
}


def category_field_problems(data: dict[str, Any], cfg: Any) -> list[str]:
    """Fields set in ``data`` (what the user wrote) that ``cfg``'s category does not read.

    A field written with its default value changes nothing and is not reported.

    Args:
        data: The preset plus overrides, before validation.
        cfg: The validated config (defaults filled in).

    Returns:
        One line per such field, naming the category that reads it (empty: none).
    """
    category, model_type = cfg.category, cfg.model.model_type
    if category not in CATEGORY_ONLY_FIELDS:
        return []
    problems = []
    for other, sections in CATEGORY_ONLY_FIELDS.items():
        if other == category:
            continue
        for section, fields in sections.items():
            written = data.get(section)
            if not isinstance(written, dict):
                continue
            names = sorted(written) if fields == "*" else sorted(set(written) & fields)
            names = [n for n in names if not _is_default(cfg, section, n)]
            problems += [
                f"{section}.{name}: read by {other} runs only; this run's model "
                f"({model_type}) is {category}"
                for name in names
            ]
    return problems


def _is_default(cfg: Any, section: str, name: str) -> bool:
    """Whether ``section.name`` of ``cfg`` equals the schema's default."""
    part = getattr(cfg, section)
    field = type(part).model_fields.get(name)
    if field is None:
        return False
    default = field.get_default(call_default_factory=True)
    value = getattr(part, name)
    if hasattr(value, "model_dump") and hasattr(default, "model_dump"):
        return value.model_dump() == default.model_dump()
    return value == default
