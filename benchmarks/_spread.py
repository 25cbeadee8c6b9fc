"""How the benchmarks print several runs of one figure: ``median [min-max]``."""

from __future__ import annotations

import statistics


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """``median [min-max]`` of ``values``, each number written with ``fmt``."""
    return (
        f"{fmt.format(statistics.median(values))} "
        f"[{fmt.format(min(values))}-{fmt.format(max(values))}]"
    )
