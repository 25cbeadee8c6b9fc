"""Parsing of RLinf-style component placement strings (``actor: 0-1``, ``env,rollout: 0``).

The indices are GPUs when a run is placed on GPUs and CPUs otherwise
(:mod:`rl_core.config.cluster_section`); the syntax is the same.
"""

from __future__ import annotations

KNOWN_COMPONENTS = ("env", "rollout", "actor", "reward", "ref")
#: Components ``cluster.gpus_per_worker`` may name.
GPU_COMPONENTS = KNOWN_COMPONENTS
#: Components whose workers reserve GPUs by default in a GPU placement (env workers step
#: simulators on CPUs and take none unless ``cluster.gpus_per_worker.env`` says so).
GPU_TAKERS = ("actor", "rollout", "ref", "reward")


def parse_cpu_set(spec: str | int) -> tuple[int, ...]:
    """Parse ``"0-3"``, ``"0,2"``, ``"1"`` or ``2`` into a sorted tuple of (CPU or GPU) indices.

    Raises:
        ValueError: The spec is malformed (message says what is allowed).
    """
    if isinstance(spec, bool):
        raise ValueError(f"{spec!r} is not an index set")
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError(f"index must be >= 0, got {spec}")
        return (spec,)
    cpus: set[int] = set()
    for part in str(spec).replace(" ", "").split(","):
        if not part:
            raise ValueError(f"empty item in index set {spec!r}")
        try:
            if "-" in part:
                lo_s, hi_s = part.split("-", 1)
                lo, hi = int(lo_s), int(hi_s)
                if lo > hi:
                    raise ValueError
                cpus.update(range(lo, hi + 1))
            else:
                cpus.add(int(part))
        except ValueError:
            raise ValueError(
                f"bad index set {spec!r}: use an index (0), a range (0-3) or a list (0,2)"
            ) from None
    if min(cpus) < 0:
        raise ValueError(f"index must be >= 0 in {spec!r}")
    return tuple(sorted(cpus))


def component_specs(placement: dict[str, str | int]) -> dict[str, str | int]:
    """``{"env,rollout": "0", "actor": "all"}`` → ``{component: its index spec, unparsed}``.

    Raises:
        ValueError: Unknown component, or a component listed twice.
    """
    result: dict[str, str | int] = {}
    for key, spec in placement.items():
        for name in str(key).replace(" ", "").split(","):
            if name not in KNOWN_COMPONENTS:
                raise ValueError(
                    f"unknown component {name!r} in placement; allowed: {', '.join(KNOWN_COMPONENTS)}"
                )
            if name in result:
                raise ValueError(f"component {name!r} is placed twice")
            result[name] = spec
    return result


def parse_component_placement(placement: dict[str, str | int]) -> dict[str, tuple[int, ...]]:
    """Expand ``{"env,rollout": "0", "actor": "0-1"}`` to ``{component: indices}``.

    Raises:
        ValueError: Unknown component, component listed twice, or a malformed index set.
    """
    return {name: parse_cpu_set(spec) for name, spec in component_specs(placement).items()}
