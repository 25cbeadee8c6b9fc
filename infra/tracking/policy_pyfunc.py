"""The ``mlflow.pyfunc`` loader of registered control policies (``loader_module``).

A registered control policy (an rlpipe model directory of a policy over a flat state
vector) carries an ``MLmodel`` file whose ``python_function`` flavor names this module as
its ``loader_module``, with no ``data`` entry: MLflow calls :func:`_load_pyfunc` with the
model directory itself, which rebuilds the policy with
:func:`infra.checkpoint.export.load_exported_policy` (JSON metadata and safetensors
weights; nothing is unpickled and no code is read from the model directory). rlpipe must
be importable where the model is loaded.

``predict(observations)`` takes a batch of flat states and returns the policy's
deterministic actions (``mode="eval"``):

- input: a numpy array ``[batch, obs_dim]`` (one state ``[obs_dim]`` is a batch of one)
  or a pandas DataFrame with ``obs_dim`` columns, one row per state;
- output: a numpy array, ``[batch]`` of ints for a discrete action space, ``[batch,
  action_dim]`` of floats for a continuous one.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)


def observations_array(model_input: Any, obs_dim: int) -> np.ndarray:
    """Observations as a float32 array ``[batch, obs_dim]``.

    Args:
        model_input: A numpy array ``[batch, obs_dim]`` or ``[obs_dim]``, a pandas
            DataFrame with ``obs_dim`` columns, or nested lists of numbers.
        obs_dim: The policy's state dimension.

    Raises:
        ValueError: The input does not hold states of ``obs_dim`` numbers.
    """
    values = model_input.to_numpy() if hasattr(model_input, "to_numpy") else model_input
    states = np.asarray(values, dtype=np.float32)
    if states.ndim == 1:
        states = states[None, :]
    if states.ndim != 2 or states.shape[1] != obs_dim:
        raise ValueError(
            f"observations of shape {tuple(states.shape)}; this policy takes "
            f"[batch, {obs_dim}] (one flat state of {obs_dim} numbers per row)"
        )
    return states


class PolicyPredictor:
    """A control policy behind MLflow's ``predict`` (deterministic actions).

    Args:
        policy: The policy (a ``BasePolicy`` reading ``states``), in eval mode.
        obs_dim: Its state dimension.
    """

    def __init__(self, policy: Any, obs_dim: int) -> None:
        self.policy = policy
        self.obs_dim = obs_dim

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> np.ndarray:
        """The policy's deterministic actions for a batch of states.

        Args:
            model_input: States (see :func:`observations_array`).
            params: Unused (the model takes no parameters).

        Returns:
            Actions ``[batch]`` (discrete) or ``[batch, action_dim]`` (continuous).
        """
        import torch

        states = observations_array(model_input, self.obs_dim)
        with torch.no_grad():
            actions, _ = self.policy.predict_action_batch(
                {"states": states}, mode="eval", compute_values=False
            )
        return np.asarray(actions)


def _load_pyfunc(path: str) -> PolicyPredictor:
    """MLflow's entry point: rebuild the policy of the model directory ``path``."""
    from infra.checkpoint.export import load_exported_policy

    policy, meta = load_exported_policy(Path(path))
    obs_dim = int(meta["spaces"]["observation_space"]["shape"][0])
    logger.info("loaded %s policy from %s for mlflow.pyfunc", meta["model_type"], path)
    return PolicyPredictor(policy, obs_dim)
