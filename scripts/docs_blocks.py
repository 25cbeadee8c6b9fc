"""Marked figure blocks in Markdown files: find them, rewrite their contents.

A block is the text between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->``; the
markers stay, everything between them is replaced. ``scripts/make_docs_figures.py`` fills
them from one run so the numbers in the docs are the numbers of that run.
"""

from __future__ import annotations

import re
from pathlib import Path

REPRODUCE = "python scripts/make_docs_figures.py"


class MissingBlockError(ValueError):
    """A file lacks the opening or closing marker of a figure block."""


def markers(name: str) -> tuple[str, str]:
    """The opening and closing markers of block ``name``."""
    return f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"


def block_names(text: str) -> list[str]:
    """Names of the blocks opened in ``text``, in order."""
    return re.findall(r"<!-- figures:([\w-]+) -->", text)


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the contents of block ``name`` replaced by ``body``.

    Args:
        text: The Markdown text holding the block.
        name: The block's name.
        body: The new contents (a trailing newline is added when missing).

    Raises:
        MissingBlockError: A marker is missing, doubled, or the closing one comes first.
    """
    start, end = markers(name)
    if text.count(start) != 1 or text.count(end) != 1:
        raise MissingBlockError(
            f"block {name!r}: expected exactly one {start!r} and one {end!r} "
            f"(found {text.count(start)} and {text.count(end)})"
        )
    head, rest = text.split(start, 1)
    if end not in rest:
        raise MissingBlockError(f"block {name!r}: {end!r} comes before {start!r}")
    _, tail = rest.split(end, 1)
    body = body if body.endswith("\n") else body + "\n"
    return f"{head}{start}\n{body}{end}{tail}"


def rewrite_file(path: Path, blocks: dict[str, str]) -> bool:
    """Rewrite the named blocks of ``path``; returns whether the file changed.

    Raises:
        MissingBlockError: ``path`` lacks one of the blocks (nothing is written then).
    """
    old = path.read_text()
    new = old
    for name, body in blocks.items():
        try:
            new = replace_block(new, name, body)
        except MissingBlockError as exc:
            raise MissingBlockError(f"{path}: {exc}") from None
    if new != old:
        path.write_text(new)
    return new != old
