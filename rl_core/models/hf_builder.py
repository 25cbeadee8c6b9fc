"""The ``hf_causal_lm`` builder, importing transformers only when a model is built.

Registering it costs nothing at start-up, so embodied runs never import transformers.
"""

from __future__ import annotations

from typing import Any

from rl_core.models.registry import register_model


def build_hf_causal_lm(model_cfg: Any, spaces: Any = None) -> Any:
    """Build a :class:`~rl_core.models.causal_lm.CausalLMPolicy` from ``model.model_path``."""
    from rl_core.models.causal_lm import build_causal_lm

    return build_causal_lm(model_cfg, spaces)


register_model("hf_causal_lm", build_hf_causal_lm, category="reasoning")
