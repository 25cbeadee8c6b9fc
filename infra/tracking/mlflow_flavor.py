"""Make an exported rlpipe model directory an MLflow model as well.

A registered version's folder keeps every rlpipe file (``rlpipe_model.json``, the
weights; rlpipe's own loaders read only these) and gains an ``MLmodel`` file with MLflow's
environment files, so MLflow's loaders work on ``models:/<name>@best``:

- a causal language model (a reasoning policy; a LoRA run's export holds the merged
  model): the ``transformers`` flavor, a ``text-generation`` pipeline
  (:mod:`infra.tracking.flavor_transformers`);
- a control policy over a flat state vector: the ``python_function`` flavor, whose
  ``predict`` returns deterministic actions (:mod:`infra.tracking.flavor_pyfunc`,
  :mod:`infra.tracking.policy_pyfunc`);
- anything else (pixel or vision-language-action policies, reward models): no flavor.

Loading with MLflow's loaders runs MLflow's code (and, for ``python_function``, rlpipe's
loader module): load only from a registry you trust. rlpipe's own loaders keep reading
JSON and safetensors alone.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from infra.checkpoint.export import read_export_meta
from infra.tracking.flavor_files import MLMODEL_FILE
from infra.tracking.flavor_pyfunc import is_flat_state_policy, write_policy_pyfunc
from infra.tracking.flavor_transformers import is_causal_lm_directory, write_transformers_flavor

logger = logging.getLogger(__name__)
#: Version tag: the MLflow flavor the registered folder carries (``none``: rlpipe's only).
FLAVOR_TAG = "mlflow_flavor"
NO_FLAVOR = "none"


def flavor_for(model_dir: Path, meta: dict[str, Any]) -> str:
    """The MLflow flavor an export gets: ``transformers``, ``python_function`` or ``none``."""
    if meta.get("weights_format") == "hf_pretrained" and is_causal_lm_directory(model_dir):
        return "transformers"
    if is_flat_state_policy(meta):
        return "python_function"
    return NO_FLAVOR


def generation_default(run_config: dict[str, Any] | None) -> int | None:
    """The run's ``rollout.max_new_tokens`` (None: the config has none)."""
    rollout = (run_config or {}).get("rollout")
    value = rollout.get("max_new_tokens") if isinstance(rollout, dict) else None
    return int(value) if isinstance(value, int) and value > 0 else None


def add_mlflow_flavor(model_dir: str | Path, run_config: dict[str, Any] | None = None) -> str:
    """Add the MLflow flavor that fits an exported model directory (in place).

    A failure is logged, not raised: the directory stays a complete rlpipe model
    directory, registered without an MLflow flavor.

    Args:
        model_dir: The rlpipe model directory (:func:`infra.checkpoint.export.export_policy`).
        run_config: The run's resolved config (a language model's ``predict`` defaults to
            its ``rollout.max_new_tokens``).

    Returns:
        The flavor written (``transformers``, ``python_function``) or ``none``.
    """
    model_dir = Path(model_dir)
    meta = read_export_meta(model_dir)
    flavor = flavor_for(model_dir, meta)
    if flavor == NO_FLAVOR:
        logger.info(
            "%s: no MLflow flavor for a %s policy (%s weights); rlpipe's loaders read it",
            model_dir.name,
            meta["model_type"],
            meta["weights_format"],
        )
        return NO_FLAVOR
    try:
        if flavor == "transformers":
            write_transformers_flavor(model_dir, meta, generation_default(run_config))
        else:
            write_policy_pyfunc(model_dir, meta)
    except Exception as exc:  # noqa: BLE001 - the rlpipe model is registered all the same
        (model_dir / MLMODEL_FILE).unlink(missing_ok=True)  # no half-written MLflow model
        logger.warning(
            "%s: could not add the MLflow %s flavor (%s: %s); the version is registered as "
            "an rlpipe model directory only",
            model_dir.name,
            flavor,
            type(exc).__name__,
            exc,
        )
        return NO_FLAVOR
    return flavor
