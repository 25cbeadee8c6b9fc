"""Every MLflow metric, tag and artifact rlpipe writes: the source of ``docs/metrics.md``.

Pure data. ``scripts/gen_metric_docs.py`` renders it as ``docs/metrics.md``, and
``tests/unit/test_metric_glossary.py`` checks it against the code both ways: a metric key or
tag the code writes without an entry here fails, and so does an entry the code no longer
writes.

A metric key is a pattern: ``<name>`` stands for a variable part, one of
:data:`PLACEHOLDERS` (``time/<step>`` is ``time/rollout``, ``time/update``, ...).

The glossary is kept in one module per responsibility; this package assembles them:

- ``entries``: the record types (:class:`MetricEntry`, :class:`TagEntry`,
  :class:`ArtifactEntry`, :class:`Placeholder`) and the tables entries refer to
  (:data:`RUNS`, :data:`PLACEHOLDERS`, :data:`METRIC_SECTIONS`, :data:`TAG_SCOPES`).
- ``training``, ``rollout``, ``evaluation``, ``timing``, ``cost``, ``agents``,
  ``online``, ``system``: the metrics, one module per section of :data:`METRIC_SECTIONS`.
- ``tags``: :data:`TAGS`; ``artifacts``: :data:`ARTIFACTS`.

The order of :data:`METRICS` (the sections' tuples, in the order above) is the order of
the rows of ``docs/metrics.md``; add an entry to the module of its section.
"""

from __future__ import annotations

from rl_core.metrics_glossary.agents import AGENT_METRICS
from rl_core.metrics_glossary.artifacts import ARTIFACTS
from rl_core.metrics_glossary.cost import COST_METRICS
from rl_core.metrics_glossary.entries import (
    METRIC_SECTIONS,
    PLACEHOLDERS,
    RUNS,
    TAG_SCOPES,
    ArtifactEntry,
    MetricEntry,
    Placeholder,
    TagEntry,
)
from rl_core.metrics_glossary.evaluation import EVALUATION_METRICS
from rl_core.metrics_glossary.online import ONLINE_METRICS
from rl_core.metrics_glossary.rollout import ROLLOUT_METRICS
from rl_core.metrics_glossary.system import SYSTEM_METRICS
from rl_core.metrics_glossary.tags import TAGS
from rl_core.metrics_glossary.timing import TIMING_METRICS
from rl_core.metrics_glossary.training import TRAINING_METRICS

#: Every metric rlpipe logs.
METRICS: tuple[MetricEntry, ...] = (
    *TRAINING_METRICS,
    *ROLLOUT_METRICS,
    *EVALUATION_METRICS,
    *TIMING_METRICS,
    *COST_METRICS,
    *AGENT_METRICS,
    *ONLINE_METRICS,
    *SYSTEM_METRICS,
)

__all__ = [
    "ARTIFACTS",
    "METRICS",
    "METRIC_SECTIONS",
    "PLACEHOLDERS",
    "RUNS",
    "TAGS",
    "TAG_SCOPES",
    "ArtifactEntry",
    "MetricEntry",
    "Placeholder",
    "TagEntry",
]
