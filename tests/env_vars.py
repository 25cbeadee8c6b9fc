"""Unset environment variables for one test, whatever the code under test sets later."""

from __future__ import annotations

import pytest


def unset(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Remove ``names`` from the environment until the test ends.

    ``monkeypatch.delenv`` of a variable that is not set records nothing to undo, so a
    variable the code under test then sets would leak into later tests (a ``RAY_ADDRESS``
    left behind makes the next ``ray.init`` wait for a cluster that is not there). Setting
    it first makes monkeypatch put back the original state: unset.
    """
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
