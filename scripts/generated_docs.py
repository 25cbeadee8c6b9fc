"""Shared command line of the scripts that generate a docs page from the code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def write_or_check(
    argv: list[str] | None, description: str, output: Path, text: str, source: str, regen: str
) -> int:
    """Write ``text`` to ``output``, or with ``--check`` report whether it is up to date.

    Args:
        argv: Command-line arguments (None: ``sys.argv``).
        description: The script's one-line description (``--help``).
        output: The generated page.
        text: Its expected content.
        source: What the page is generated from (named when it is stale).
        regen: The command that regenerates it.

    Returns:
        The exit code: 0, or 1 when ``--check`` finds the page out of date.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 if the file differs from the {source}"
    )
    args = parser.parse_args(argv)
    root = output.parents[1]
    current = output.read_text() if output.exists() else None
    if args.check:
        if current != text:
            print(
                f"{output.relative_to(root)} is out of date with the {source}; "
                f"regenerate it with: {regen}",
                file=sys.stderr,
            )
            return 1
        print(f"{output.relative_to(root)} is up to date")
        return 0
    if current != text:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
        print(f"wrote {output.relative_to(root)}")
    else:
        print(f"{output.relative_to(root)} already up to date")
    return 0
