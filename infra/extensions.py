"""Importing user extension modules named by ``RLPIPE_EXT_MODULE`` (driver and workers)."""

from __future__ import annotations

import importlib
import logging
import os

logger = logging.getLogger(__name__)
ENV_VAR = "RLPIPE_EXT_MODULE"
_loaded: set[str] = set()


class ExtensionError(ImportError):
    """An extension module failed to import or to register."""


def load_extension_modules(spec: str | None = None) -> list[str]:
    """Import each comma-separated module of ``RLPIPE_EXT_MODULE`` and call its ``register()``.

    Args:
        spec: Module list; defaults to the environment variable.

    Returns:
        The modules newly loaded in this process.

    Raises:
        ExtensionError: A module failed to import or its ``register()`` raised; the message
            names the module and the original error.
    """
    spec = os.environ.get(ENV_VAR, "") if spec is None else spec
    loaded = []
    for name in (m.strip() for m in spec.split(",")):
        if not name or name in _loaded:
            continue
        try:
            module = importlib.import_module(name)
            register = getattr(module, "register", None)
            if callable(register):
                register()
        except Exception as exc:
            raise ExtensionError(
                f"{ENV_VAR} module {name!r} failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        _loaded.add(name)
        loaded.append(name)
        logger.info("loaded extension module %s", name)
    return loaded
