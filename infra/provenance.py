"""Where a run's code came from: the git commit of the checkout (for MLflow tags)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git_commit(root: Path = ROOT) -> str | None:
    """The checkout's HEAD commit, with ``-dirty`` if tracked files changed; None without git.

    Args:
        root: A directory inside the checkout.
    """
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = head.stdout.strip()
    return f"{commit}-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else commit


def short_commit(root: Path = ROOT) -> str:
    """:func:`git_commit` in 7 hex digits (``abc1234``, ``abc1234-dirty``; ``unknown``)."""
    commit = git_commit(root)
    if commit is None:
        return "unknown"
    return commit[:7] + ("-dirty" if commit.endswith("-dirty") else "")
