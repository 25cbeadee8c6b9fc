"""Finding the packages that add kinds of training: the ``rlpipe.kinds`` entry points.

A kind package (rlpipe's own ``embodied``, ``reasoning``, ``online`` and ``reward_model``
as much as a user's) declares itself in its distribution's metadata::

    [project.entry-points."rlpipe.kinds"]
    my_kind = "my_package.my_kind"

Importing that module registers the kind (:func:`rl_core.kind.register_kind`) and the
implementations it brings (rollout engines, trainer backends, sandboxes). Nothing in
``rl_core`` names those modules: they are read from the installed metadata and, in a source
checkout, from the checkout's own ``pyproject.toml`` (so a kind added there is found before
the package is installed again).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import sys
import threading
import tomllib
from pathlib import Path

logger = logging.getLogger(__name__)

#: The entry-point group of kind packages.
ENTRY_POINT_GROUP = "rlpipe.kinds"
_SOURCE_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
_lock = threading.RLock()
_loaded = False


class KindPackageError(ImportError):
    """A declared kind package could not be imported."""


def declared_kind_packages() -> dict[str, str]:
    """Entry-point name → module of every declared kind package.

    The installed distributions' entry points, then the source checkout's ``pyproject.toml``
    (when this ``rl_core`` runs from one), which wins for a name both declare.
    """
    declared = {
        point.name: point.value
        for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    }
    declared.update(source_checkout_kind_packages())
    return declared


def source_checkout_kind_packages() -> dict[str, str]:
    """The kind packages the source checkout's ``pyproject.toml`` declares (rlpipe's own).

    Empty when this ``rl_core`` is not run from a source checkout of rlpipe.
    """
    if not _SOURCE_PYPROJECT.is_file():
        return {}
    try:
        project = tomllib.loads(_SOURCE_PYPROJECT.read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        logger.warning(
            "%s: not read (%s); kind packages come from installed metadata only",
            _SOURCE_PYPROJECT,
            exc,
        )
        return {}
    if project.get("name") != "rlpipe":
        return {}
    points = project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    return {str(name): str(value) for name, value in points.items()}


def load_kind_packages() -> None:
    """Import every declared kind package once (idempotent, thread-safe).

    Called while this thread is importing a kind package (a kind package registers its
    kind and implementations as it loads, and those registries call here), it returns at
    once: the packages load at the next lookup, when no half-imported package can be
    imported again through another. Another thread's import in progress is waited for.

    Raises:
        KindPackageError: A declared module is missing or failed to import; the message
            names the entry point and the module.
    """
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        declared = sorted(declared_kind_packages().items())
        modules = [(name, value, value.partition(":")[0].strip()) for name, value in declared]
        if any(_importing_here(module) for _, _, module in modules):
            return
        for name, value, module in modules:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise KindPackageError(
                    f"kind package {name!r} (entry point {ENTRY_POINT_GROUP!r} = {value!r}) "
                    f"could not be imported: {exc}"
                ) from exc
            logger.debug("loaded kind package %s (%s)", name, module)
        _loaded = True


def _initializing(module: str) -> bool:
    spec = getattr(sys.modules.get(module), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def _importing_here(module: str) -> bool:
    """Whether this thread is importing ``module`` now (another thread's import is awaited)."""
    if not _initializing(module):
        return False
    importlib.import_module(module)  # blocks while another thread imports it
    return _initializing(module)  # still: this thread's own import, further up the stack
