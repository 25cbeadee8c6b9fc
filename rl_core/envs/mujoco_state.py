"""Snapshots of a MuJoCo-based env's simulation state, for exact pickling and rewinding.

A snapshot holds MuJoCo's integration state and the env's own attributes (a few kB), not
MuJoCo's model and data (which take ~40 MB to pickle); it is restored into an env of the
same scene.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

#: Attributes of a Meta-World env that are not simulation state.
_NOT_SIM_STATE = ("model", "data", "mujoco_renderer")

#: MuJoCo's integration state and a deep copy of the env's attributes.
SimState = tuple[np.ndarray, dict[str, Any]]


def get_sim_state(sim: Any) -> SimState:
    """A Meta-World env's simulation state: MuJoCo's integration state and its attributes.

    Attributes that are views of MuJoCo's memory (Meta-World reads some body positions
    through them) are left out: they follow the restored MuJoCo state by themselves.

    Args:
        sim: A Meta-World env (``model``, ``data`` and its own attributes).

    Returns:
        A snapshot for :func:`set_sim_state`.
    """
    import mujoco

    kind = mujoco.mjtState.mjSTATE_INTEGRATION
    physics = np.empty(mujoco.mj_stateSize(sim.model, kind))
    mujoco.mj_getState(sim.model, sim.data, physics, kind)
    attrs = {
        k: v for k, v in sim.__dict__.items() if k not in _NOT_SIM_STATE and not _is_mujoco_view(v)
    }
    return physics, copy.deepcopy(attrs)


def set_sim_state(sim: Any, state: SimState) -> None:
    """Give ``sim`` a snapshot of :func:`get_sim_state`.

    Args:
        sim: A Meta-World env of the task and initial state the snapshot was taken in.
        state: The snapshot.
    """
    import mujoco

    physics, attrs = state
    sim.__dict__.update(copy.deepcopy(attrs))
    kind = mujoco.mjtState.mjSTATE_INTEGRATION
    mujoco.mj_setState(sim.model, sim.data, physics, kind)
    mujoco.mj_forward(sim.model, sim.data)  # positions of bodies and sites, contacts
    # mj_forward refines the solver's warm start: put the saved one back (the next step
    # starts from it)
    mujoco.mj_setState(sim.model, sim.data, physics, kind)


def _is_mujoco_view(value: Any) -> bool:
    """Whether ``value`` is a numpy view of MuJoCo's memory (a model or data field)."""
    base = value
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(value, np.ndarray) and base is not value and not isinstance(base, np.ndarray)
