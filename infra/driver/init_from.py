"""``run.init_from`` in the driver: point the config at the model a new run starts from.

See :mod:`infra.checkpoint.init_from`, which also loads the weights in the trainer.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from infra.checkpoint.export import WEIGHT_FORMATS, ExportError, read_export_meta
from infra.checkpoint.init_from import InitFromError
from rl_core.config import RLPipeConfig
from rl_core.config.naming import MODEL_URI

logger = logging.getLogger(__name__)
#: Folder of a run where the model of ``run.init_from`` is downloaded.
INIT_MODEL_DIR = "init_model"


def apply_init_from(cfg: RLPipeConfig, tracking_uri: str) -> RLPipeConfig:
    """Point ``cfg`` at the weights ``run.init_from`` names (no-op when it is unset).

    Args:
        cfg: The run's config.
        tracking_uri: Tracking and registry URI that ``models:/`` URIs are read from.

    Returns:
        ``cfg`` with ``model.model_path`` (a pretrained directory) and/or
        ``model.init_weights`` (a control policy's weights) set to the model's local folder.

    Raises:
        InitFromError: No such model or version, not an exported model, or a model type
            other than ``model.model_type``.
    """
    source = cfg.run.init_from
    if not source:
        return cfg
    directory = _local_model_dir(source, Path(cfg.run.output_dir) / cfg.run.name, tracking_uri)
    try:
        meta = read_export_meta(directory)
        weights = WEIGHT_FORMATS.get(meta["weights_format"])
    except (ExportError, KeyError) as exc:
        raise InitFromError(f"run.init_from={source}: {exc}") from None
    exported = (meta.get("model") or {}).get("model_type")
    if exported != cfg.model.model_type:
        raise InitFromError(
            f"run.init_from={source} holds a {exported!r} model but model.model_type is "
            f"{cfg.model.model_type!r}: start from a model of the same type"
        )
    # a pretrained directory is the model itself (model_path); a policy that also has weights
    # of its own beside it (a VLA's "hf_backbone") loads those through init_weights
    fields = ["model_path"] if weights.pretrained_dir else []
    if not weights.pretrained_dir or "init_weights" in type(cfg.model).model_fields:
        fields.append("init_weights")
    origin = (meta.get("source") or {}).get("run_name")
    logger.info(
        "starting from %s (%s%s)",
        source,
        directory,
        f", trained by run {origin}" if origin else "",
    )
    model = cfg.model.model_copy(update=dict.fromkeys(fields, str(directory)))
    return cfg.model_copy(update={"model": model})


def _local_model_dir(source: str, run_dir: Path, tracking_uri: str) -> Path:
    if not MODEL_URI.match(source):
        directory = Path(source).expanduser().resolve()
        if not directory.is_dir():
            raise InitFromError(f"run.init_from={source}: no such folder")
        return directory
    from mlflow.exceptions import MlflowException

    from infra.tracking.model_registry import download_registered_model

    target = run_dir / INIT_MODEL_DIR
    shutil.rmtree(target, ignore_errors=True)  # a download of an earlier start
    try:
        return download_registered_model(source, tracking_uri, target)
    except MlflowException as exc:
        raise InitFromError(f"run.init_from={source}: {exc.message}") from None
