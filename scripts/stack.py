"""The local stack's CLI (``bash scripts/stack.sh`` runs it; ``rlpipe stack`` is the same)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flows.stack_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
