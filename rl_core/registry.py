"""A small, case-insensitive name → object registry used for every pluggable concept.

A registry knows nothing of the modules that fill it except their names: the modules that
register built-in entries import the registry, and the registry imports them (by name, on
first use) so that its built-ins are present before any lookup or user registration.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)

EXT_MODULE_HINT = (
    "If it is defined in your own package, set RLPIPE_EXT_MODULE to the module that "
    "registers it so the driver and every Ray worker import it."
)


class RegistryError(KeyError):
    """Raised for unknown names or conflicting registrations."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly.
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """Maps lower-cased names to registered objects.

    Every operation but :meth:`unregister` first imports those of ``builtin_modules`` not
    imported yet, so built-ins are always present before a user's registration:
    ``register_advantage("gae", mine, force=True)`` then replaces the built-in for good
    instead of being overwritten (or rejected) when the built-ins load later. A module still
    being imported counts as imported, so the built-in modules may register while they load.

    Args:
        kind: Human-readable name of what is registered (used in error messages),
            e.g. ``"advantage estimator"``.
        builtin_modules: Import path(s) of the module(s) whose import registers the built-in
            entries; empty when the module defining the registry fills it itself. A package
            whose ``__init__`` imports every registering submodule is the safe choice when
            those submodules import one another.
        load: Called (idempotently) before the built-in modules are imported, for entries
            registered by code outside ``rl_core``: e.g.
            :func:`rl_core.kind_packages.load_kind_packages`, which imports the kind packages
            that register the cluster code's implementations.
    """

    def __init__(
        self,
        kind: str,
        builtin_modules: str | Sequence[str] = (),
        load: Callable[[], None] | None = None,
    ) -> None:
        self.kind = kind
        self._load = load
        if isinstance(builtin_modules, str):
            builtin_modules = (builtin_modules,)
        self.builtin_modules: tuple[str, ...] = tuple(builtin_modules)
        self._entries: dict[str, T] = {}

    def load_builtins(self) -> None:
        """Import the modules that register the built-in entries (idempotent, cheap).

        A module another thread is still importing is waited for (``import_module`` takes
        its import lock), so a thread never sees the registry half-filled; the thread
        importing it gets it back at once (the lock is re-entrant), so built-in modules may
        register while they load.
        """
        if self._load is not None:
            self._load()
        for module in self.builtin_modules:
            loaded = sys.modules.get(module)
            spec = getattr(loaded, "__spec__", None)
            if loaded is None or getattr(spec, "_initializing", False):
                importlib.import_module(module)

    @staticmethod
    def normalize(name: str) -> str:
        """Return the canonical (lower-case, stripped) form of ``name``."""
        if not isinstance(name, str) or not name.strip():
            raise RegistryError(f"a registered name must be a non-empty string, got {name!r}")
        return name.strip().lower()

    def register(self, name: str, obj: T, *, force: bool = False) -> T:
        """Register ``obj`` under ``name``.

        Args:
            name: Name (case-insensitive).
            obj: The object to register.
            force: Replace an existing entry instead of raising.

        Returns:
            ``obj`` unchanged, so this can back a decorator.

        Raises:
            RegistryError: ``name`` is taken and ``force`` is False.
        """
        self.load_builtins()
        key = self.normalize(name)
        if key in self._entries and not force and self._entries[key] != obj:
            existing = self._entries[key]
            raise RegistryError(
                f"{self.kind} {key!r} is already registered as {_describe(existing)}; "
                "pass force=True to replace it"
            )
        if key in self._entries and self._entries[key] != obj:
            logger.info("%s %r: replacing %s", self.kind, key, _describe(self._entries[key]))
        self._entries[key] = obj
        return obj

    def decorator(self, name: str, *, force: bool = False) -> Callable[[T], T]:
        """Return a decorator registering the decorated object under ``name``."""

        def wrap(obj: T) -> T:
            return self.register(name, obj, force=force)

        return wrap

    def get(self, name: str) -> T:
        """Look up ``name``.

        Raises:
            RegistryError: The name is unknown; the message lists the known names.
        """
        self.load_builtins()
        key = self.normalize(name)
        try:
            return self._entries[key]
        except KeyError:
            raise RegistryError(
                f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or '(none)'}. "
                + EXT_MODULE_HINT
            ) from None

    def __contains__(self, name: object) -> bool:
        self.load_builtins()
        return isinstance(name, str) and name.strip().lower() in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self, *, in_registration_order: bool = False) -> list[str]:
        """Registered names, sorted (or in the order they were first registered)."""
        self.load_builtins()
        return list(self._entries) if in_registration_order else sorted(self._entries)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (no error if absent); mainly for tests."""
        self._entries.pop(self.normalize(name), None)


def _describe(obj: object) -> str:
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(qualname, str) and (callable(obj) or isinstance(obj, type)):
        return f"{getattr(obj, '__module__', '?')}.{qualname}"
    return repr(obj)
