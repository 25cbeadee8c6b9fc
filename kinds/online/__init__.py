"""The online kind: serve a run's policy, store generations and feedback, train on them."""

from kinds.online import registration  # noqa: F401  (registers the kind)
