"""The packages the GPU bundle carries, as pinned requirement lines.

Starts from the runtime dependencies of ``pyproject.toml`` (not the ``dev`` or ``bench``
extras) and follows their requirements through the distributions installed in the
interpreter that runs this (the project's ``.venv``), evaluating markers for the GPU
machine's Python (3.12, Linux x86_64). Each package is pinned to the version installed here.
Left out, together with what only they need:

* the GPU machine's own CUDA stack (torch, triton, ``nvidia-*``, ``cuda-*``);
* packages the machine's image has (``image_packages.txt``), unless ``pyproject.toml`` pins
  them exactly (``transformers==...``: the project's version replaces the image's); what
  their requested extras add is carried (``httpx[http2]`` → ``h2``);
* the names given with ``--leave-out`` (optional features a GPU run does not use).

Usage: ``.venv/bin/python scripts/gpu_bundle/requirements.py [--leave-out a,b]`` prints one
``name==version`` line per package, sorted, and a summary on stderr; exits 1 when an
installed version misses its ``pyproject.toml`` pin (a stale ``.venv``).
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import sys
from collections import deque
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
#: Marker environment of the GPU machine's interpreter.
TARGET = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}
#: The GPU machine's CUDA build of torch and what comes with it: never carried.
MACHINE_PREFIXES = ("torch", "triton", "nvidia-", "cuda-")


def project_dependencies(pyproject: Path) -> list[Requirement]:
    """The ``[project] dependencies`` of ``pyproject``."""
    import tomllib  # Python 3.11+

    data = tomllib.loads(pyproject.read_text())
    return [Requirement(line) for line in data["project"]["dependencies"]]


def read_names(path: Path) -> set[str]:
    """Canonical package names of a one-a-line list (``#`` comments allowed)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {canonicalize_name(line) for line in lines if line}


def exact_pin(req: Requirement) -> str | None:
    """The version of an ``==`` pin, else None."""
    specs = list(req.specifier)
    return specs[0].version if len(specs) == 1 and specs[0].operator == "==" else None


def applies(req: Requirement, extra: str) -> bool:
    """Whether ``req`` is needed on the target for the given extra (``""``: none)."""
    return req.marker is None or req.marker.evaluate({**TARGET, "extra": extra})


def carried(
    roots: list[Requirement], image: set[str], leave_out: set[str]
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Walk the installed requirement graph from ``roots``.

    Args:
        roots: The project's dependencies.
        image: Canonical names the GPU machine has.
        leave_out: Canonical names not to carry (nor what only they need).

    Returns:
        (``{name: requirement line}``, ``{reason: names left out}``).
    """
    pinned = {canonicalize_name(r.name) for r in roots if exact_pin(r)}
    lines: dict[str, str] = {}
    skipped: dict[str, list[str]] = {"machine": [], "image": [], "leave-out": []}
    seen: set[tuple[str, str]] = set()
    queue = deque(r for r in roots if applies(r, ""))
    while queue:
        req = queue.popleft()
        name = canonicalize_name(req.name)
        extras = sorted(req.extras)
        if all((name, e) in seen for e in ["", *extras]):
            continue
        seen.update((name, e) for e in ["", *extras])
        reason = (
            "machine"
            if name.startswith(MACHINE_PREFIXES)
            else "leave-out"
            if name in leave_out
            else "image"
            if name in image and name not in pinned
            else None
        )
        if reason and name not in skipped[reason]:
            skipped[reason].append(name)
        if reason in ("machine", "leave-out"):
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:  # needed on 3.12 only: let pip pick a version
            print(f"note: {req.name} is not installed here; carried as {req}", file=sys.stderr)
            lines[name] = str(Requirement(f"{req.name}{req.specifier}"))
            continue
        if reason is None:
            lines[name] = f"{name}=={dist.version}"
        for dep in map(Requirement, dist.requires or []):
            needed = any(applies(dep, e) for e in extras)
            if needed and reason == "image" and applies(dep, ""):
                continue  # the image's package comes with its own dependencies
            if needed or (reason is None and applies(dep, "")):
                queue.append(dep)
    return lines, skipped


def stale_pins(roots: list[Requirement]) -> list[str]:
    """The project's dependencies whose installed version misses ``pyproject.toml``'s pin."""
    stale = []
    for req in roots:
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            continue  # not for this Python: pip picks a version for the target
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            stale.append(f"{req.name} {version} (pyproject.toml: {req})")
    return stale


def main(argv: list[str] | None = None) -> int:
    """Print the carried requirements."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    parser.add_argument("--image-packages", type=Path, default=HERE / "image_packages.txt")
    parser.add_argument("--leave-out", default="", help="comma-separated package names")
    args = parser.parse_args(argv)
    leave_out = {canonicalize_name(n) for n in args.leave_out.split(",") if n.strip()}
    roots = project_dependencies(args.pyproject)
    stale = stale_pins(roots)
    if stale:
        print(f"error: installed versions miss the pins: {'; '.join(stale)}", file=sys.stderr)
        return 1
    lines, skipped = carried(roots, read_names(args.image_packages), leave_out)
    for name in sorted(lines):
        print(lines[name])
    print(
        f"carrying {len(lines)} packages; from the machine: {len(skipped['machine'])}, "
        f"from its image: {len(skipped['image'])}, left out: {', '.join(skipped['leave-out'])}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
