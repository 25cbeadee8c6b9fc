"""Kinds of training: what kind of run a config describes, and everything that depends on it.

A :class:`Kind` is registered once (:func:`register_kind`) and owns its config class, how its
runs are named, what its evaluation protocol is, its score metric, what data it trains on,
its runtime and how a registered version of its models is scored again. The kind of a
config is the category of its ``model.model_type``; nothing outside the kinds branches on
it.
"""

from rl_core.kinds.kind import (
    KINDS,
    Kind,
    kind_named,
    kind_of,
    kind_of_model_type,
    register_kind,
)

__all__ = ["KINDS", "Kind", "kind_named", "kind_of", "kind_of_model_type", "register_kind"]
