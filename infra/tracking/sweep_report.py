"""The result of a sweep: mean ± std learning curves per grid point and a table of figures.

Read from the child runs' MLflow metric histories: the evaluation score (``eval/accuracy``
for reasoning runs, ``eval/return_mean`` otherwise) against env steps trained on, so runs
of different batch sizes share an x axis.
"""

from __future__ import annotations

import io
import statistics
from dataclasses import dataclass
from typing import Any

#: Score metrics in order of preference, and the x axis of the curves.
SCORE_KEYS = ("eval/accuracy", "eval/return_mean")
X_KEY = "env/total_steps"


@dataclass(frozen=True)
class ChildResult:
    """One finished (or failed) run of a sweep, as the report uses it."""

    name: str
    point: str
    seed: int
    run_id: str | None
    exit_code: int
    curve: tuple[tuple[float, float], ...] = ()  # (env steps, score) per evaluation
    cpu_hours: float | None = None
    score_key: str | None = None  # the evaluation metric of the curve

    @property
    def final(self) -> float | None:
        """The last evaluation's score."""
        return self.curve[-1][1] if self.curve else None

    @property
    def best(self) -> float | None:
        """The best evaluation's score."""
        return max(score for _, score in self.curve) if self.curve else None


def score_key(metric_keys: list[str]) -> str | None:
    """The evaluation metric a run logged (None: it never evaluated)."""
    return next((k for k in SCORE_KEYS if k in metric_keys), None)


def child_curve(
    client: Any, run_id: str
) -> tuple[tuple[tuple[float, float], ...], float | None, str | None]:
    """A run's ``((env steps, score), ...)``, CPU-hours total and score metric.

    The metric is None (and the curve empty) when the run never evaluated.
    """
    metrics = client.get_run(run_id).data.metrics
    key = score_key(list(metrics))
    if key is None:
        return (), metrics.get("cost/cpu_hours_total"), None
    steps = {m.step: m.value for m in client.get_metric_history(run_id, X_KEY)}
    points = []
    for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step):
        # step k's evaluation saw the weights after iteration k; its x is that step's total
        points.append((steps.get(m.step, float(m.step)), m.value))
    return tuple(points), metrics.get("cost/cpu_hours_total"), key


def mean_std_curves(
    children: list[ChildResult],
) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """Per grid point ``(x, mean, std)`` over its seeds, evaluation by evaluation.

    The k-th evaluations of the seeds are averaged (x is their mean env steps); a point
    stops where its shortest run stops (a run that solved early ends its curve there).
    """
    curves: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for point in dict.fromkeys(c.point for c in children):
        runs = [c.curve for c in children if c.point == point and c.curve]
        if not runs:
            continue
        length = min(map(len, runs))
        xs, means, stds = [], [], []
        for k in range(length):
            scores = [run[k][1] for run in runs]
            xs.append(statistics.fmean(run[k][0] for run in runs))
            means.append(statistics.fmean(scores))
            stds.append(statistics.pstdev(scores) if len(scores) > 1 else 0.0)
        curves[point] = (xs, means, stds)
    return curves


def render_sweep_png(
    curves: dict[str, tuple[list[float], list[float], list[float]]], title: str, ylabel: str
) -> bytes:
    """Mean ± std bands of every grid point, as a PNG."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100, layout="constrained")
    ax = fig.subplots()
    for point, (xs, means, stds) in curves.items():
        (line,) = ax.plot(xs, means, marker="o", markersize=3, linewidth=1.4, label=point)
        low = [m - s for m, s in zip(means, stds, strict=True)]
        high = [m + s for m, s in zip(means, stds, strict=True)]
        ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.2)
    ax.set_xlabel("env steps")
    ax.set_ylabel(f"{ylabel} (mean ± std over seeds)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _mean_std(values: list[float]) -> str:
    if not values:
        return "-"
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4g} ± {std:.2g}"


def summary_markdown(name: str, children: list[ChildResult], score: str) -> str:
    """Per grid point: final and best score (mean ± std over seeds); then every run."""
    lines = [
        f"# rlpipe sweep `{name}`",
        "",
        f"Score: `{score}`, the last and the best evaluation of each run.",
        "",
        "| grid point | runs | final score | best score | CPU-hours |",
        "| --- | --- | --- | --- | --- |",
    ]
    for point in dict.fromkeys(c.point for c in children):
        runs = [c for c in children if c.point == point]
        finals = [c.final for c in runs if c.final is not None]
        bests = [c.best for c in runs if c.best is not None]
        hours = [c.cpu_hours for c in runs if c.cpu_hours is not None]
        ok = sum(c.exit_code == 0 for c in runs)
        lines.append(
            f"| {point} | {ok}/{len(runs)} finished | {_mean_std(finals)} | "
            f"{_mean_std(bests)} | {_mean_std(hours)} |"
        )
    lines += [
        "",
        "| run | seed | exit | final | best | MLflow run |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in children:
        final = "-" if c.final is None else f"{c.final:.4g}"
        best = "-" if c.best is None else f"{c.best:.4g}"
        lines.append(f"| {c.name} | {c.seed} | {c.exit_code} | {final} | {best} | `{c.run_id}` |")
    return "\n".join(lines) + "\n"
