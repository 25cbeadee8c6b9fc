"""The ``python_function`` MLflow flavor of an exported control policy.

Written with ``mlflow.pyfunc.save_model(loader_module=...)``: the ``MLmodel`` file names
:mod:`infra.tracking.policy_pyfunc` as the loader and holds no pickled object (no
``python_model``, no ``code_paths``); the loader rebuilds the policy from the directory's
``rlpipe_model.json`` and safetensors weights. The signature and input example come from
the policy itself: a few states sampled from its observation space and its deterministic
actions for them.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from infra.tracking.flavor_files import (
    MLMODEL_FILE,
    directory_size,
    merge_into,
    pinned_requirements,
)

logger = logging.getLogger(__name__)
FLAVOR = "python_function"
LOADER_MODULE = "infra.tracking.policy_pyfunc"
#: Rows of the saved input example.
EXAMPLE_ROWS = 2
_REQUIREMENTS = ("torch", "numpy", "safetensors", "gymnasium", "pydantic", "pyyaml")


def is_flat_state_policy(meta: dict[str, Any]) -> bool:
    """Whether an export is a policy over a flat state vector (a 1-D ``Box``).

    Such policies read the ``states`` observation key alone; weights in a Hugging Face
    backbone (``hf_backbone``, ``hf_pretrained``) are left to other flavors.
    """
    spaces = meta.get("spaces") or {}
    obs = spaces.get("observation_space") or {}
    return (
        meta.get("weights_format") == "state_dict"
        and obs.get("type") == "Box"
        and len(obs.get("shape") or ()) == 1
    )


def example_states(meta: dict[str, Any], rows: int = EXAMPLE_ROWS) -> np.ndarray:
    """``rows`` states sampled (seed 0) from the export's observation space, float32."""
    from rl_core.envs.spaces import env_spaces_from_dict

    space = env_spaces_from_dict(meta["spaces"]).observation_space
    space.seed(0)
    return np.stack([space.sample() for _ in range(rows)]).astype(np.float32)


def write_policy_pyfunc(model_dir: Path, meta: dict[str, Any]) -> None:
    """Add the ``python_function`` flavor (loader :data:`LOADER_MODULE`) to ``model_dir``.

    Args:
        model_dir: The rlpipe model directory of a flat-state policy
            (:func:`is_flat_state_policy`).
        meta: Its ``rlpipe_model.json``.
    """
    import mlflow.pyfunc
    from mlflow.models import Model, infer_signature

    from infra.tracking.policy_pyfunc import _load_pyfunc

    states = example_states(meta)
    actions = _load_pyfunc(str(model_dir)).predict(states)  # the loader MLflow will run
    with tempfile.TemporaryDirectory(prefix=".mlflow-", dir=model_dir.parent) as tmp:
        staging = Path(tmp) / "model"
        mlflow.pyfunc.save_model(
            str(staging),
            loader_module=LOADER_MODULE,
            signature=infer_signature(states, actions),
            input_example=states,
            pip_requirements=pinned_requirements(*_REQUIREMENTS),
            metadata={"rlpipe_model_type": meta["model_type"]},
        )
        merge_into(staging, model_dir)
    mlmodel = Model.load(str(model_dir / MLMODEL_FILE))
    mlmodel.model_size_bytes = directory_size(model_dir)
    mlmodel.save(str(model_dir / MLMODEL_FILE))
    logger.info("added the MLflow %s flavor (%s) to %s", FLAVOR, LOADER_MODULE, model_dir)
