"""Where the model of ``reward.model`` comes from, made local and checked before workers start.

* ``uri: models:/<name>@<alias>`` (or ``/<version>``, ``/latest``): downloaded from the
  tracking server's registry into ``<output_dir>/<run>/reward_model``, the way
  ``run.init_from`` downloads a starting model (:mod:`infra.driver.init_from`).
* ``uri: <directory>``: an rlpipe export (``rlpipe_model.json``) or a Hugging Face model
  directory, used where it is.
* ``preset: <reward_model preset>``: that run's export ``<output_dir>/<its run name>/model``
  (``flows/train.py`` trains it first when missing).

:func:`check_model_source` reads the directory and checks that it holds what ``kind``
needs: a classifier needs a reward model (``hf_reward_model``), a judge a causal LM.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from infra.checkpoint.export import ExportError, read_export_meta
from infra.checkpoint.init_from import InitFromError
from rl_core.config import RLPipeConfig
from rl_core.config.naming import MODEL_URI

logger = logging.getLogger(__name__)
#: Folder of a run where a registered reward model is downloaded.
REWARD_MODEL_DIR = "reward_model"
#: The rlpipe model type each kind of model reward needs (an export names its type).
MODEL_TYPES = {"classifier": "hf_reward_model", "judge": "hf_causal_lm"}


class ModelRewardSourceError(InitFromError):
    """``reward.model`` names no usable model (missing, unreadable, another kind of model)."""


def preset_model_dir(output_dir: str | Path, run_name: str) -> Path:
    """The export of a reward-model run: ``<output_dir>/<run name>/model``."""
    return Path(output_dir) / run_name / "model"


def with_model_uri(cfg: RLPipeConfig, uri: str) -> RLPipeConfig:
    """``cfg`` with ``reward.model.uri`` set to ``uri`` (and no ``preset``)."""
    model = cfg.reward.model.model_copy(update={"uri": uri, "preset": None})
    reward = cfg.reward.model_copy(update={"model": model})
    return cfg.model_copy(update={"reward": reward})


def resolve_model_source(cfg: RLPipeConfig, tracking_uri: str) -> RLPipeConfig:
    """Make ``reward.model.uri`` a checked local directory (no-op without a model reward).

    Args:
        cfg: The run's config (``reward.model.preset`` already replaced by its export).
        tracking_uri: Tracking and registry URI that ``models:/`` URIs are read from.

    Raises:
        ModelRewardSourceError: No such registered model or version, or a directory that
            does not hold the model ``reward.model.kind`` needs.
    """
    section = cfg.reward_model_section()
    if section is None or not section.uri:
        return cfg
    uri = section.uri
    if MODEL_URI.match(uri):
        from mlflow.exceptions import MlflowException

        from infra.tracking.model_registry import download_registered_model

        target = Path(cfg.run.output_dir) / cfg.run.name / REWARD_MODEL_DIR
        shutil.rmtree(target, ignore_errors=True)  # a download of an earlier start
        try:
            local = download_registered_model(uri, tracking_uri, target)
        except MlflowException as exc:
            raise ModelRewardSourceError(f"reward.model.uri={uri}: {exc.message}") from None
        logger.info("reward model %s downloaded to %s", uri, local)
        cfg = with_model_uri(cfg, str(Path(local).resolve()))
    elif not Path(uri).is_absolute():
        cfg = with_model_uri(cfg, str(Path(uri).expanduser().resolve()))
    check_model_source(cfg.reward.model)
    return cfg


def check_model_source(section: Any) -> str:
    """Check that the local ``section.uri`` holds the model ``section.kind`` needs.

    A registered model (``models:/``) is not checked here: it is downloaded (and checked)
    by :func:`resolve_model_source`.

    Returns:
        The model's type (``hf_reward_model``, ``hf_causal_lm``) or ``registered``.

    Raises:
        ModelRewardSourceError: No such directory, no model in it, or another kind of model.
    """
    uri, kind = section.uri, section.kind
    if MODEL_URI.match(uri):
        return "registered"
    want = MODEL_TYPES[kind]
    directory = Path(uri).expanduser()
    field = f"reward.model.uri={uri}"
    if not (directory / "config.json").is_file():
        raise ModelRewardSourceError(
            f"{field}: no model directory there (no config.json); allowed: a registered "
            "model models:/<name>@<alias> or /<version>, an exported model directory, or a "
            f"Hugging Face directory of a {want} model"
        )
    try:
        meta = read_export_meta(directory)
        found = (meta.get("model") or {}).get("model_type")
    except ExportError:  # a plain Hugging Face directory: its architecture says what it is
        found = _hf_model_type(directory / "config.json")
    if found != want:
        raise ModelRewardSourceError(
            f"{field} holds a {found!r} model but reward.model.kind={kind!r} needs a "
            f"{want!r} model (classifier: a reward model, e.g. an rm_arith export; judge: a "
            "causal LM)"
        )
    return found


def _hf_model_type(config_file: Path) -> str | None:
    try:
        architectures = json.loads(config_file.read_text()).get("architectures") or []
    except (OSError, ValueError):
        return None
    for name in architectures:
        if name.endswith("ForSequenceClassification"):
            return MODEL_TYPES["classifier"]
        if name.endswith("ForCausalLM"):
            return MODEL_TYPES["judge"]
    return None
