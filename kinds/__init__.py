"""The kinds of training rlpipe ships, one package each.

Each package holds everything one kind of run needs above the shared cluster code: its
config sections and config class, its runtime (the steps of an iteration), its Ray workers,
its evaluation and its registration (:func:`rl_core.kind.register_kind`), made when the
package is imported. Packages are found through the ``rlpipe.kinds`` entry points
(:mod:`rl_core.kind_packages`), the same way a user's kind package is.

- :mod:`kinds.embodied`: control policies in simulated environments (on- and off-policy).
- :mod:`kinds.reasoning`: language models on prompt sets with verifiable rewards, agents
  with tools, and reward-model scoring.
- :mod:`kinds.online`: reasoning runs that serve their policy and learn from feedback.
- :mod:`kinds.reward_model`: scalar-head reward models trained on preference pairs.
"""
