"""The embodied kind: control policies trained in simulated environments (on- and off-policy)."""

from kinds.embodied import registration  # noqa: F401  (registers the kind)
