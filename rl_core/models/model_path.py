"""What ``model.model_path`` names: a local model directory, or a Hugging Face hub id.

A hub id (``Qwen/Qwen2.5-0.5B-Instruct``) is accepted where no local path of that name
exists, as ``from_pretrained`` does. The driver replaces it by the model's folder in the
local Hugging Face cache before any worker starts (:mod:`infra.hub_models`); nothing here
reads the cache or the network.
"""

from __future__ import annotations

import re
from pathlib import Path

#: ``owner/name`` as the hub spells repository ids (letters, digits, ``-``, ``_``, ``.``).
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def hub_model_id(path: str | None) -> str | None:
    """``path`` if it reads as a hub id (``owner/name``) and names no local file or folder.

    A local path always wins: ``outputs/tiny-lm`` is a folder once it exists.
    """
    if not path or not HUB_ID.match(path) or ".." in path or "--" in path:
        return None
    return None if Path(path).expanduser().exists() else path


def local_model_problem(path: str) -> str | None:
    """Why ``path`` is no usable ``model_path`` for the config checks (None: it is).

    A local Hugging Face model directory (with ``config.json``) and a hub id are usable; a
    hub id is looked up in the local cache later, before any worker starts.
    """
    if hub_model_id(path) or (Path(path) / "config.json").is_file():
        return None
    return (
        f"model.model_path = {path!r} is not a local Hugging Face model directory (no "
        "config.json) nor a Hugging Face hub id (owner/name)"
    )
