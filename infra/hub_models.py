"""Hugging Face hub ids in ``model.model_path``: made a local folder before any worker starts.

``model.model_path: Qwen/Qwen2.5-0.5B-Instruct`` names the model the way
``from_pretrained`` does. The driver looks it up in the local Hugging Face cache
(``HF_HUB_CACHE``, by default ``~/.cache/huggingface/hub``: where ``hf download`` and
``from_pretrained`` put models) and gives the workers that snapshot's folder. Nothing is
downloaded unless ``model.hub_download`` is true; then only the config, tokenizer and
``*.safetensors`` files are fetched: no pickled weights, no code. Models load with
``trust_remote_code`` as configured (false unless set) and from safetensors only.

A run on several nodes needs the folder on every node (the same cache on a shared file
system, or the same download on each).
"""

from __future__ import annotations

import logging
from pathlib import Path

from rl_core.config import ConfigError
from rl_core.config.llm_sections import HuggingFaceModelConfig
from rl_core.models.model_path import hub_model_id

logger = logging.getLogger(__name__)

#: What ``model.hub_download`` fetches: config, tokenizer and safetensors weights.
HUB_FILES = ["*.json", "*.safetensors", "*.txt", "*.jinja", "*.model", "*.tiktoken"]


class HubModelError(ConfigError):
    """``model.model_path`` names a hub model that is not (completely) in the local cache."""


def resolve_model_path(model_cfg: HuggingFaceModelConfig) -> str | None:
    """The local folder of ``model_cfg.model_path`` when it is a hub id (else None).

    Args:
        model_cfg: A ``model`` section with ``model_path`` and ``hub_download``.

    Raises:
        HubModelError: The model is not in the local cache (and ``hub_download`` is off),
            or its snapshot lacks ``config.json`` or safetensors weights, or the download
            failed.
    """
    model_id = hub_model_id(model_cfg.model_path)
    if model_id is None:
        return None
    download = model_cfg.hub_download
    folder = _cached_snapshot(model_id)
    problem = _snapshot_problem(folder) if folder else "not in the local Hugging Face cache"
    if problem and download:
        folder = _download(model_id)
        problem = _snapshot_problem(folder)
    if problem:
        raise HubModelError(_explain(model_id, problem, download))
    logger.info(
        "model.model_path %s: the local Hugging Face cache's snapshot %s (%s)",
        model_id,
        Path(folder).name,
        folder,
    )
    return str(folder)


def check_model_path(model_cfg: HuggingFaceModelConfig) -> None:
    """Refuse, before any server or worker starts, a hub id the run cannot load.

    With ``model.hub_download`` the run downloads what is missing later (in the flow), so
    nothing is checked here.

    Raises:
        HubModelError: See :func:`resolve_model_path`.
    """
    if model_cfg.tiny_init or model_cfg.hub_download:
        return
    resolve_model_path(model_cfg)


def _cached_snapshot(model_id: str) -> Path | None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(model_id, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError):
        return None


def _download(model_id: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    logger.info(
        "model.hub_download: downloading %s (%s) into the Hugging Face cache",
        model_id,
        ", ".join(HUB_FILES),
    )
    try:
        return Path(snapshot_download(model_id, allow_patterns=HUB_FILES))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
        raise HubModelError(
            f"model.model_path = {model_id!r}: the download from the Hugging Face hub failed: {exc}"
        ) from None


def _snapshot_problem(folder: Path) -> str | None:
    if not (folder / "config.json").is_file():
        return f"has no config.json in its cached snapshot {folder}"
    if not any(folder.glob("*.safetensors")):
        pickled = sorted(p.name for p in folder.glob("*.bin"))
        found = f" (only pickled weights: {', '.join(pickled)})" if pickled else ""
        return (
            f"has no *.safetensors weights in its cached snapshot {folder}{found}; rlpipe "
            "loads safetensors only"
        )
    return None


def _explain(model_id: str, problem: str, download: bool) -> str:
    from huggingface_hub.constants import HF_HUB_CACHE

    where = f"model.model_path = {model_id!r} names no local folder, and the hub model"
    if problem.startswith("not "):
        problem = f"is {problem} ({HF_HUB_CACHE})"
    if download:
        return f"{where} {problem} after the download"
    return (
        f"{where} {problem}; download it first with `hf download {model_id}`, or let the "
        "run download it (config, tokenizer and safetensors files only) with "
        "model.hub_download=true, or set model.model_path to a local model directory"
    )
