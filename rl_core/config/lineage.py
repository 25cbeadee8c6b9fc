"""Lineage of a trained model: a fingerprint of the data it was trained on.

Embodied runs train on their env (its id, type, settings); reasoning runs on their prompt
set: the generator's settings, or the bytes of the prompt files (streamed, so large files
are fine).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def _file_digest(path: str, digest: Any) -> None:
    digest.update(Path(path).name.encode())
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)


def data_fingerprint(cfg: Any) -> str:
    """12 hex digits that change when the training data (or env) changes.

    Raises:
        OSError: A prompt file cannot be read.
    """
    digest = hashlib.sha256()
    if cfg.category == "reasoning" and cfg.data.source == "files":
        for path in [*cfg.data.train_files, *cfg.data.eval_files]:
            _file_digest(path, digest)
    elif cfg.category == "reasoning":
        data = cfg.data.model_dump(mode="json", exclude={"on_bad_row", "prompts_per_batch"})
        digest.update(json.dumps(data, sort_keys=True).encode())
    else:
        env = cfg.env.model_dump(mode="json", include={"env_type", "env_id", "kwargs"})
        digest.update(json.dumps(env, sort_keys=True).encode())
    return digest.hexdigest()[:12]
