"""The reasoning kind: language models trained on prompt sets with verifiable rewards.

Agents with tools and scoring by reward models run inside it.
"""

from kinds.reasoning import registration  # noqa: F401  (registers the kind)
