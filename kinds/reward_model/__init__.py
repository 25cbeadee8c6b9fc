"""The reward_model kind: scalar-head reward models trained on preference pairs."""

from kinds.reward_model import registration  # noqa: F401  (registers the kind)
