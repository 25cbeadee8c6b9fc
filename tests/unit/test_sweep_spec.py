"""Sweep specifications (seeds, grid) and the sweep report's arithmetic and table."""

from __future__ import annotations

import pytest

from infra.tracking.sweep_report import (
    ChildResult,
    mean_std_curves,
    render_sweep_png,
    summary_markdown,
)
from rl_core.config import ConfigError
from rl_core.config.sweep import MAX_SWEEP_RUNS, expand_sweep, parse_grid, parse_seeds


def test_seed_ranges_and_lists():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("0,2,7") == [0, 2, 7]
    assert parse_seeds("1-2,9") == [1, 2, 9]
    for bad, why in [
        ("4-1", "ends before"),
        ("a", "not a seed"),
        ("", "no seed"),
        ("1,1", "twice"),
    ]:
        with pytest.raises(ConfigError, match=why):
            parse_seeds(bad)


def test_grid_axes_multiply_with_seeds():
    grid = parse_grid(["actor.lr=1e-3,3e-3", "env.num_envs=8,16"])
    runs = expand_sweep("lr", [0, 1], grid)
    assert len(runs) == 2 * 2 * 2
    first = runs[0]
    assert first.name == "lr-lr1e-3-num_envs8-s0" and first.point == "lr1e-3-num_envs8"
    assert first.overrides == (
        "actor.lr=1e-3",
        "env.num_envs=8",
        "run.seed=0",
        "run.name=lr-lr1e-3-num_envs8-s0",
    )
    plain = expand_sweep("cp", [3], [])
    assert [(r.name, r.point, r.overrides) for r in plain] == [
        ("cp-s3", "base", ("run.seed=3", "run.name=cp-s3"))
    ]
    for bad in (["actor.lr"], ["lr=1,2"], ["actor.lr=1", "actor.lr=2"]):
        with pytest.raises(ConfigError, match="--grid"):
            parse_grid(bad)
    with pytest.raises(ConfigError, match=f"at most {MAX_SWEEP_RUNS}"):
        expand_sweep("big", list(range(MAX_SWEEP_RUNS + 1)), [])


def child(point, seed, curve, code=0):
    return ChildResult(f"{point}-s{seed}", point, seed, f"id{seed}", code, tuple(curve), 0.01)


def test_mean_and_std_per_evaluation_up_to_the_shortest_run():
    children = [
        child("a", 0, [(100, 10.0), (200, 30.0), (300, 50.0)]),
        child("a", 1, [(100, 20.0), (200, 40.0)]),  # solved early: its curve ends
        child("b", 0, [(100, 5.0)]),
        child("b", 1, [], code=1),  # failed before evaluating
    ]
    curves = mean_std_curves(children)
    assert curves["a"] == ([100.0, 200.0], [15.0, 35.0], [5.0, 5.0])
    assert curves["b"] == ([100.0], [5.0], [0.0])
    png = render_sweep_png(curves, "sweep t", "eval/return_mean")
    assert png.startswith(b"\x89PNG")
    table = summary_markdown("t", children, "eval/return_mean")
    assert "| a | 2/2 finished | 45 ± 5 | 45 ± 5 |" in table  # finals 50 and 40
    assert "| b | 1/2 finished | 5 ± 0 | 5 ± 0 |" in table
    assert "| b-s1 | 1 | 1 | - | - |" in table
