"""Agents: language models that act in several turns and call tools between generations.

The pieces are registries (tools, tool parsers, agent loops, sandboxes) and the data a
multi-turn trajectory leaves for training. Nothing here imports the cluster code: a
sandbox implementation is named by a ``"module:attribute"`` reference and resolved by the
code that runs it.
"""
