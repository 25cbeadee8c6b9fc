"""A pickle that creates a file when it is loaded: the stand-in for code in a checkpoint."""

from __future__ import annotations

import pickle
from pathlib import Path


class CreatesFile:
    """Unpickling this object writes ``marker`` (what any code in a pickle could do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = Path(marker)

    def __reduce__(self) -> tuple:
        return (Path.write_text, (self.marker, "code from a checkpoint ran"))


def poisoned_pickle(marker: Path) -> bytes:
    """Pickle bytes that create ``marker`` when loaded."""
    return pickle.dumps(CreatesFile(marker), protocol=2)
