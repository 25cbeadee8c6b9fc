"""Lineage of a trained model: a fingerprint of the data it was trained on.

What the data is depends on the kind of training (:attr:`rl_core.kind.Kind.data_fingerprint`):
embodied runs train on their env (its id, type, settings), reasoning runs on their prompt
set (the generator's settings, or the bytes of the prompt files).
"""

from __future__ import annotations

import hashlib
from typing import Any


def data_fingerprint(cfg: Any) -> str:
    """12 hex digits that change when the training data (or env) changes.

    Raises:
        OSError: A prompt file cannot be read.
    """
    from rl_core.kind import kind_of

    digest = hashlib.sha256()
    kind_of(cfg).data_fingerprint(cfg, digest)
    return digest.hexdigest()[:12]
