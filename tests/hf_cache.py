"""A local Hugging Face cache for tests: models put where ``hf download`` puts them."""

from __future__ import annotations

import shutil
from pathlib import Path

#: A commit hash for the cached snapshots (any 40 hex digits).
COMMIT = "7ae557604adf67be50417f59c2c2f167def9a775"


def cache_model(cache: Path, model_id: str, source: Path | None, commit: str = COMMIT) -> Path:
    """Put ``source``'s files (none if None) into the cache ``cache`` as
    ``hf download model_id`` does: ``models--<owner>--<name>/snapshots/<commit>/`` with
    ``refs/main`` naming the commit. Returns the snapshot folder."""
    repo = cache / f"models--{model_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    if source is not None:
        for file in source.iterdir():
            shutil.copy(file, snapshot / file.name)
    return snapshot
