"""Sweep specifications: seeds and a grid of overrides, expanded into the runs of a sweep.

``--seeds 0-4`` (or ``0,2,7``) and ``--grid actor.lr=1e-3,3e-3 --grid env.num_envs=8,16``
expand to one run per seed per grid point (the product of the grid's values), each with
its own ``run.name`` and ``run.seed``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from rl_core.config.loader import ConfigError

_RANGE = re.compile(r"^(\d+)-(\d+)$")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: Most runs one sweep starts (a typo such as ``0-10000`` fails instead).
MAX_SWEEP_RUNS = 256


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep.

    Attributes:
        name: Its ``run.name`` (``<sweep>-<point>-s<seed>``).
        seed: Its ``run.seed``.
        point: The grid point's label (``"base"`` without a grid).
        overrides: The grid point's overrides plus ``run.seed`` and ``run.name``.
    """

    name: str
    seed: int
    point: str
    overrides: tuple[str, ...]


def parse_seeds(spec: str) -> list[int]:
    """``"0-4"`` → ``[0, 1, 2, 3, 4]``; ``"0,2,7"`` → ``[0, 2, 7]`` (ranges may mix in).

    Raises:
        ConfigError: Not a list of non-negative integers and ``a-b`` ranges.
    """
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        match = _RANGE.match(part)
        if match:
            low, high = int(match[1]), int(match[2])
            if high < low:
                raise ConfigError(f"--seeds {spec!r}: range {part!r} ends before it starts")
            seeds.extend(range(low, high + 1))
        elif part.isdigit():
            seeds.append(int(part))
        else:
            raise ConfigError(
                f"--seeds {spec!r}: {part!r} is not a seed; use e.g. 0-4 or 0,2,7 "
                "(non-negative integers)"
            )
    if not seeds:
        raise ConfigError(f"--seeds {spec!r}: no seed given (e.g. 0-4)")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {spec!r}: a seed appears twice")
    return seeds


def parse_grid(axes: list[str]) -> list[tuple[str, list[str]]]:
    """``["actor.lr=1e-3,3e-3"]`` → ``[("actor.lr", ["1e-3", "3e-3"])]``.

    Raises:
        ConfigError: An axis that is not ``section.field=v1,v2,...`` or names a field twice.
    """
    grid: list[tuple[str, list[str]]] = []
    for axis in axes:
        key, sep, values = axis.partition("=")
        options = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or "." not in key or not options:
            raise ConfigError(
                f"--grid {axis!r}: expected section.field=value1,value2 (e.g. actor.lr=1e-3,3e-3)"
            )
        if key in (k for k, _ in grid):
            raise ConfigError(f"--grid names {key} twice")
        grid.append((key.strip(), options))
    return grid


def expand_sweep(name: str, seeds: list[int], grid: list[tuple[str, list[str]]]) -> list[SweepRun]:
    """Every run of the sweep: each grid point (product of the axes) with each seed.

    Raises:
        ConfigError: More than :data:`MAX_SWEEP_RUNS` runs.
    """
    points = list(itertools.product(*[[(k, v) for v in values] for k, values in grid]))
    if len(points) * len(seeds) > MAX_SWEEP_RUNS:
        raise ConfigError(
            f"the sweep would start {len(points) * len(seeds)} runs (at most {MAX_SWEEP_RUNS}); "
            "use fewer seeds or grid values"
        )
    runs = []
    for point in points:
        label = "-".join(f"{k.rsplit('.', 1)[-1]}{v}" for k, v in point) or "base"
        safe = _NAME_UNSAFE.sub("_", label)
        for seed in seeds:
            run_name = f"{name}-{safe}-s{seed}" if point else f"{name}-s{seed}"
            overrides = (
                *(f"{k}={v}" for k, v in point),
                f"run.seed={seed}",
                f"run.name={run_name}",
            )
            runs.append(SweepRun(run_name, seed, label, overrides))
    return runs
