"""Standalone model directories: a trained policy without the run that produced it.

Layout of an exported directory::

    rlpipe_model.json     model type and config, env spaces, weight format, source run
    model.safetensors     weights (format "state_dict"), or
    config.json, model.safetensors, tokenizer files ...   (format "hf_pretrained": the
                          directory is also a Hugging Face ``from_pretrained`` directory), or
    the same plus policy_weights.safetensors   (format "hf_backbone": a policy around a
                          Hugging Face backbone, e.g. a VLA; the directory is the backbone's
                          ``from_pretrained`` directory, the file the policy's other weights)

:func:`load_exported_policy` rebuilds the policy through the model registry (importing
``RLPIPE_EXT_MODULE`` first) and loads the weights; it needs neither the env nor the run.
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file

from infra.checkpoint.reader import (
    CheckpointRef,
    read_config,
    read_policy_weights,
    read_spaces,
)
from infra.checkpoint.store import CheckpointError
from rl_core.config import validate_config
from rl_core.envs import EnvSpaces, probe_spaces
from rl_core.envs.spaces import env_spaces_from_dict, env_spaces_to_dict
from rl_core.kind import model_section_class
from rl_core.models import MODELS, BasePolicy, get_model
from rl_core.models.lora import base_fingerprint, load_adapter_state, merged_model, with_lora
from rl_core.registry import Registry

logger = logging.getLogger(__name__)
META_FILE = "rlpipe_model.json"
#: Where the export of a LoRA run keeps the adapter alone (PEFT format), beside the merged
#: model.
ADAPTER_DIR = "adapter"
#: Format "hf_backbone": the policy's weights outside its Hugging Face backbone.
POLICY_WEIGHTS_FILE = "policy_weights.safetensors"
EXPORT_FORMAT_VERSION = 1


class ExportError(RuntimeError):
    """A model directory cannot be written or read."""


@dataclass(frozen=True)
class WeightFormat:
    """How one ``BasePolicy.export_format`` writes and reads its weight files.

    Attributes:
        save: ``save(policy, directory)`` writes the weight files.
        load: ``load(policy, directory)`` loads them into a freshly built policy.
        pretrained_dir: The directory is itself a pretrained-model directory, so a
            ``model.model_path`` in the config is rewritten to point at it.
    """

    save: Callable[[BasePolicy, Path], None]
    load: Callable[[BasePolicy, Path], None]
    pretrained_dir: bool = False


WEIGHT_FORMATS: Registry[WeightFormat] = Registry("model export format")


def register_weight_format(
    name: str,
    save: Callable[[BasePolicy, Path], None],
    load: Callable[[BasePolicy, Path], None],
    pretrained_dir: bool = False,
    force: bool = False,
) -> None:
    """Add a weight format that policies can name in ``export_format`` (see WeightFormat)."""
    WEIGHT_FORMATS.register(name, WeightFormat(save, load, pretrained_dir), force=force)


def _save_state_dict(policy: BasePolicy, directory: Path) -> None:
    state = {k: v.detach().cpu().contiguous() for k, v in policy.state_dict().items()}
    save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})


def _load_state_dict(policy: BasePolicy, directory: Path) -> None:
    policy.load_state_dict(load_file(str(directory / "model.safetensors")), strict=True)


def _save_hf_pretrained(policy: BasePolicy, directory: Path) -> None:
    model = policy.pretrained_model()
    if getattr(policy, "adapter_only", False):  # LoRA: the adapter alone, then merged
        model.save_pretrained(str(directory / ADAPTER_DIR))
        model = merged_model(copy.deepcopy(model))
    model.save_pretrained(str(directory), safe_serialization=True)
    tokenizer = policy.pretrained_tokenizer()
    if tokenizer is not None:
        tokenizer.save_pretrained(str(directory))


def _load_hf_pretrained(policy: BasePolicy, directory: Path) -> None:
    model = policy.pretrained_model()
    loaded = type(model).from_pretrained(str(directory), dtype=model.dtype)
    model.load_state_dict(loaded.state_dict(), strict=True)


def _backbone_prefix(policy: BasePolicy) -> str:
    """The state-dict prefix of ``policy.pretrained_model()`` inside the policy."""
    model = policy.pretrained_model()
    for name, module in policy.named_modules():
        if module is model and name:
            return f"{name}."
    raise ExportError(f"{type(policy).__name__}.pretrained_model() is not one of its submodules")


def _save_hf_backbone(policy: BasePolicy, directory: Path) -> None:
    _save_hf_pretrained(policy, directory)
    prefix = _backbone_prefix(policy)
    own = {
        k: v.detach().cpu().contiguous()
        for k, v in policy.state_dict().items()
        if not k.startswith(prefix)
    }
    save_file(own, str(directory / POLICY_WEIGHTS_FILE), metadata={"format": "pt"})


def _load_hf_backbone(policy: BasePolicy, directory: Path) -> None:
    model = policy.pretrained_model()
    # a policy built from this very directory (load_exported_policy) has its weights already
    loaded_from = getattr(model, "name_or_path", None)
    if not loaded_from or Path(loaded_from).resolve() != directory.resolve():
        _load_hf_pretrained(policy, directory)
    prefix = _backbone_prefix(policy)
    own = load_file(str(directory / POLICY_WEIGHTS_FILE))
    expected = {k for k in policy.state_dict() if not k.startswith(prefix)}
    if set(own) != expected:
        missing, extra = sorted(expected - set(own)), sorted(set(own) - expected)
        raise RuntimeError(
            f"{directory / POLICY_WEIGHTS_FILE} does not fit {type(policy).__name__}: "
            f"missing {missing[:5]}, unexpected {extra[:5]}"
        )
    policy.load_state_dict(own, strict=False)


register_weight_format("state_dict", _save_state_dict, _load_state_dict)
register_weight_format(
    "hf_pretrained", _save_hf_pretrained, _load_hf_pretrained, pretrained_dir=True
)
register_weight_format("hf_backbone", _save_hf_backbone, _load_hf_backbone, pretrained_dir=True)


# -- from a training checkpoint ------------------------------------------------------------
def policy_from_checkpoint(
    ref: CheckpointRef,
) -> tuple[BasePolicy, dict[str, Any], EnvSpaces | None]:
    """Rebuild the trained policy of a checkpoint (weights loaded, eval mode).

    Returns:
        ``(policy, config, spaces)``: the policy, the run's resolved config (dict) and
        the env spaces its builder got.

    Raises:
        CheckpointError: Unreadable files, or weights that do not fit the model.
    """
    config = read_config(ref)
    cfg = validate_config(config, source=f"{ref.location}/config.json")
    spaces_json = read_spaces(ref)
    if spaces_json is not None:
        spaces = env_spaces_from_dict(spaces_json)
    elif cfg.env_section() is None:  # kinds without an env (language models)
        spaces = None
    else:  # checkpoints written before spaces.json existed: ask the env
        spaces = probe_spaces(cfg.env_section())
    policy = get_model(cfg.model, spaces)
    lora = cfg.lora_adapters()
    try:
        if lora is not None:  # the checkpoint holds the adapters alone
            load_adapter_state(with_lora(policy, lora), read_policy_weights(ref))
        else:
            policy.load_state_dict(read_policy_weights(ref), strict=True)
    except (RuntimeError, ValueError) as exc:
        raise CheckpointError(
            f"weights in {ref.location} do not fit model type {cfg.model.model_type!r}: {exc}"
        ) from None
    policy.eval()
    return policy, config, spaces


# -- writing and reading model directories -------------------------------------------------
def export_policy(
    policy: BasePolicy,
    model_config: dict[str, Any],
    spaces: EnvSpaces | None,
    out_dir: str | Path,
    source: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``policy`` as a standalone model directory.

    The directory is assembled next to ``out_dir`` and renamed into place at the end, so
    an interrupted export leaves no half-written model behind.

    Args:
        policy: The policy (weights as they are now).
        model_config: Its ``model`` config section (plain dict).
        spaces: The env spaces its builder took.
        out_dir: Target directory.
        source: Provenance recorded in the metadata (run name, step, checkpoint path).
        overwrite: Replace an existing non-empty ``out_dir`` (otherwise refused).

    Returns:
        The directory written.

    Raises:
        ExportError: ``out_dir`` exists and is not empty (without ``overwrite``).
    """
    out = Path(out_dir).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise ExportError(f"{out} already exists and is not empty; pass --overwrite to replace it")
    weights_format = type(policy).export_format
    writer = WEIGHT_FORMATS.get(weights_format)
    model_config = dict(model_config)
    if writer.pretrained_dir and "model_path" in model_config:
        model_config["model_path"] = "."  # the directory itself is the pretrained model
    meta = {
        "format": EXPORT_FORMAT_VERSION,
        "model_type": model_config["model_type"],
        "category": MODELS.get(model_config["model_type"]).category,
        "weights_format": weights_format,
        "policy_class": f"{type(policy).__module__}.{type(policy).__qualname__}",
        "model": model_config,
        "spaces": env_spaces_to_dict(spaces) if spaces is not None else None,
        "source": source or {},
        "weights": "full",
    }
    if getattr(policy, "adapter_only", False):
        meta.update(lora_export_meta(policy))
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        writer.save(policy, staging)
        (staging / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            staging.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("exported %s policy to %s", meta["model_type"], out)
    return out


def lora_export_meta(policy: BasePolicy) -> dict[str, Any]:
    """What the export of a LoRA policy records.

    The top-level weights are merged, the adapter alone is in :data:`ADAPTER_DIR`, and the
    base model it fits is named by its path and fingerprint.
    """
    peft_cfg = policy.pretrained_model().peft_config["default"]
    base = str(peft_cfg.base_model_name_or_path or "")
    targets = peft_cfg.target_modules
    return {
        "weights": "merged",
        "adapter": {
            "dir": ADAPTER_DIR,
            "format": "peft",
            "rank": int(peft_cfg.r),
            "alpha": float(peft_cfg.lora_alpha),
            "target_modules": sorted(targets) if isinstance(targets, set) else targets,
        },
        "base_model": {
            "model_path": base,
            "fingerprint": base_fingerprint(base) if base and Path(base).is_dir() else None,
        },
    }


def read_export_meta(directory: str | Path) -> dict[str, Any]:
    """The metadata of an exported model directory.

    Raises:
        ExportError: Not an exported directory, or unreadable/unsupported metadata.
    """
    path = Path(directory) / META_FILE
    if not path.is_file():
        raise ExportError(
            f"{directory} is not an rlpipe model directory (no {META_FILE}); create one with "
            "python -m infra.checkpoint.convert"
        )
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ExportError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != EXPORT_FORMAT_VERSION:
        raise ExportError(
            f"{path} has format {meta.get('format') if isinstance(meta, dict) else None!r}; "
            f"this rlpipe reads {EXPORT_FORMAT_VERSION}"
        )
    return meta


def is_finished_export(directory: str | Path) -> bool:
    """Whether ``directory`` holds the export of a run that finished (``source.finished``).

    A directory that is missing, unreadable or written before exports recorded it counts
    as not finished.
    """
    try:
        meta = read_export_meta(directory)
    except ExportError:
        return False
    return bool((meta.get("source") or {}).get("finished"))


def load_exported_policy(directory: str | Path) -> tuple[BasePolicy, dict[str, Any]]:
    """Rebuild a policy from an exported model directory (eval mode).

    Imports the ``RLPIPE_EXT_MODULE`` modules first, so custom model types resolve.

    Returns:
        ``(policy, meta)`` with ``meta`` the directory's metadata.

    Raises:
        ExportError: Bad directory or metadata.
        rl_core.registry.RegistryError: The model type is not registered.
    """
    from infra.extensions import load_extension_modules

    load_extension_modules()
    directory = Path(directory).resolve()
    meta = read_export_meta(directory)
    model_config = dict(meta["model"])
    if model_config.get("model_path") == ".":
        model_config["model_path"] = str(directory)
    try:
        model_cfg = model_section_class(model_config.get("model_type", "")).model_validate(
            model_config
        )
        spaces = env_spaces_from_dict(meta["spaces"]) if meta["spaces"] is not None else None
    except (ValueError, KeyError) as exc:
        raise ExportError(f"{directory / META_FILE}: {exc}") from None
    policy = get_model(model_cfg, spaces)
    WEIGHT_FORMATS.get(meta["weights_format"]).load(policy, directory)
    policy.eval()
    return policy, meta
