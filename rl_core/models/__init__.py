"""Policies: the BasePolicy contract, the model registry and built-in models."""

from rl_core.models.base_policy import BasePolicy
from rl_core.models.registry import MODELS, ModelSpec, get_model, register_model

__all__ = ["MODELS", "BasePolicy", "ModelSpec", "get_model", "register_model"]
