"""The Hugging Face model builders, importing transformers only when a model is built.

``hf_causal_lm`` (a policy of the reasoning kind) and ``hf_reward_model`` (a scalar-head
reward model of the reward_model kind). Registering them costs nothing at start-up, so
embodied runs never import transformers.
"""

from __future__ import annotations

from typing import Any

from rl_core.models.registry import register_model


def build_hf_causal_lm(model_cfg: Any, spaces: Any = None) -> Any:
    """Build a :class:`~rl_core.models.causal_lm.CausalLMPolicy` from ``model.model_path``."""
    from rl_core.models.causal_lm import build_causal_lm

    return build_causal_lm(model_cfg, spaces)


def build_hf_reward_model(model_cfg: Any, spaces: Any = None) -> Any:
    """Build a :class:`~rl_core.models.reward_model.RewardModelPolicy` from ``model.model_path``."""
    from rl_core.models.reward_model import build_reward_model

    return build_reward_model(model_cfg, spaces)


register_model("hf_causal_lm", build_hf_causal_lm, category="reasoning")
register_model("hf_reward_model", build_hf_reward_model, category="reward_model")
