"""The learning-curve plot of a run, drawn from its MLflow metric history.

One panel per :data:`PANELS` entry that has data (evaluation score, training return or
reward, the reward model's score next to the held-out accuracy of runs it rewards, the
acceptance rate of an online run's served answers, policy
loss, value loss), each metric against the iteration step. Drawn with matplotlib's Agg backend (no
display needed) and logged as ``plots/learning_curve.png``.
"""

from __future__ import annotations

import io
import logging
import re
from typing import Any

logger = logging.getLogger(__name__)
PLOT_ARTIFACT = "plots/learning_curve.png"

#: ``(panel title, y label, key patterns in order of preference)``: a panel plots the keys
#: matching the first pattern that matches any (so each panel keeps one scale).
PANELS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Evaluation", "score", (r"^eval/(accuracy|pass_at_\d+)$", r"^eval/return_mean$")),
    ("Training", "return / reward", (r"^env/episode_return_mean$", r"^rollout/reward_mean$")),
    ("Reward model", "model score", (r"^reward/rm_score_mean$",)),
    ("Served feedback", "acceptance rate", (r"^online/acceptance_rate$",)),
    ("Policy loss", "loss", (r"^train/(policy|sft)_loss$",)),
    ("Value loss", "loss", (r"^train/value_loss$",)),
)
#: Panel title → keys drawn beside the panel's own when it has data: the reward model's
#: score of the held-out greedy answers (``eval/return_mean`` of a run it rewards) next to
#: its score of the sampled responses; rising while the accuracy falls is reward hacking.
COMPANIONS: dict[str, tuple[str, ...]] = {"Reward model": ("eval/return_mean",)}


def select_panels(metric_keys: list[str]) -> list[tuple[str, str, list[str]]]:
    """The panels that have data: ``(title, y label, sorted keys)``."""
    panels = []
    for title, ylabel, patterns in PANELS:
        for pattern in patterns:
            keys = sorted(k for k in metric_keys if re.match(pattern, k))
            if keys:
                keys += [k for k in COMPANIONS.get(title, ()) if k in metric_keys]
                panels.append((title, ylabel, keys))
                break
    return panels


def render_learning_curve(
    panels: list[tuple[str, str, list[str]]],
    series: dict[str, tuple[list[int], list[float]]],
    title: str,
) -> bytes:
    """Draw the panels as a PNG (one row of subplots).

    Args:
        panels: From :func:`select_panels`.
        series: Metric key → ``(steps, values)``.
        title: Figure title.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(3.6 * len(panels), 3.2), dpi=100, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (panel_title, ylabel, keys) in zip(axes, panels, strict=True):
        for key in keys:
            steps, values = series[key]
            marker = "o" if len(steps) <= 20 else None
            ax.plot(steps, values, label=key, marker=marker, markersize=3, linewidth=1.2)
        ax.set_title(panel_title)
        ax.set_xlabel("iteration (step)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def learning_curve_png(client: Any, run_id: str, title: str) -> bytes | None:
    """The learning-curve PNG of an MLflow run, or None when it has no plottable metric.

    Args:
        client: ``MlflowClient`` of the run's tracking store.
        run_id: The run.
        title: Figure title.
    """
    keys = list(client.get_run(run_id).data.metrics)
    panels = select_panels(keys)
    if not panels:
        return None
    series: dict[str, tuple[list[int], list[float]]] = {}
    for _, _, panel_keys in panels:
        for key in panel_keys:
            history = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
            series[key] = ([m.step for m in history], [m.value for m in history])
    return render_learning_curve(panels, series, title)
