"""Every relative link of the README and the docs reaches a file, and every ``#anchor`` a
heading of that file (GitHub's heading ids)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def heading_ids(text: str) -> set[str]:
    """GitHub's ids of the headings of ``text`` (repeats get ``-1``, ``-2``...)."""
    ids: set[str] = set()
    counts: dict[str, int] = {}
    for title in _HEADING.findall(_FENCE.sub("", text)):
        title = re.sub(r"`([^`]*)`", r"\1", title)
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        ids.add(slug if n == 0 else f"{slug}-{n}")
    ids |= set(re.findall(r'<a (?:id|name)="([^"]+)"', text))
    return ids


def test_relative_links_and_anchors_resolve() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    problems, links = [], 0
    for page in pages:
        text = _FENCE.sub("", page.read_text())
        for target in _LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:...
                continue
            links += 1
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                problems.append(f"{page.name}: {target}: no file {path}")
            elif anchor and file.suffix == ".md" and anchor not in heading_ids(file.read_text()):
                problems.append(f"{page.name}: {target}: no heading #{anchor} in {file.name}")
    assert not problems, "\n".join(problems)
    assert links > 200  # (a pattern that found nothing would pass)


def test_heading_ids_follow_github() -> None:
    text = "# A `code` title: with punctuation!\n## Repeat\n## Repeat\n```\n# not a heading\n```\n"
    assert heading_ids(text) == {"a-code-title-with-punctuation", "repeat", "repeat-1"}
