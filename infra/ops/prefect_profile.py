"""The ``PREFECT_API_URL`` of the active Prefect profile, read without importing Prefect.

``prefect config set PREFECT_API_URL=...`` and ``prefect profile use local`` keep the API
URL in a profile rather than in the environment. The CLI reads it here, in a few
milliseconds, before it imports Prefect (which takes over a second): a run then goes to
that API instead of starting a local one. The lookup follows Prefect's: the profiles file
is ``$PREFECT_PROFILES_PATH`` or ``$PREFECT_HOME/profiles.toml`` (``~/.prefect``), the
profile is ``$PREFECT_PROFILE`` or the file's ``active`` entry, and profiles missing from
the user's file come from the defaults shipped with Prefect (``local`` names
``http://127.0.0.1:4200/api``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import urllib.request
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: no profile lookup (PREFECT_API_URL still works)
    tomllib = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)


def _read_toml(path: Path) -> dict[str, Any]:
    if tomllib is None:
        return {}
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _packaged_profiles() -> dict[str, Any]:
    spec = importlib.util.find_spec("prefect")  # locates the package, does not import it
    if spec is None or not spec.submodule_search_locations:
        return {}
    return _read_toml(
        Path(next(iter(spec.submodule_search_locations))) / "settings" / "profiles.toml"
    )


def profiles_path() -> Path:
    """Where Prefect keeps the user's profiles."""
    explicit = os.environ.get("PREFECT_PROFILES_PATH")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("PREFECT_HOME") or "~/.prefect"
    return Path(home).expanduser() / "profiles.toml"


def profile_api_url() -> tuple[str, str] | None:
    """``(profile name, PREFECT_API_URL)`` of the active profile, if it names an API."""
    defaults = _packaged_profiles()
    user = _read_toml(profiles_path())
    name = os.environ.get("PREFECT_PROFILE") or user.get("active") or defaults.get("active")
    if not isinstance(name, str):
        return None
    profile = user.get("profiles", {}).get(name) or defaults.get("profiles", {}).get(name) or {}
    url = profile.get("PREFECT_API_URL") if isinstance(profile, dict) else None
    return (name, url) if isinstance(url, str) and url.strip() else None


def answers(api_url: str, timeout: float = 1.0) -> bool:
    """Whether ``<api_url>/health`` answers 200 within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


def running_profile_api() -> str | None:
    """The active profile's API URL if it answers; a warning (and None) if it does not."""
    found = profile_api_url()
    if found is None:
        return None
    name, url = found
    if answers(url):
        return url
    logger.warning(
        "the active Prefect profile %r names PREFECT_API_URL=%s, which does not answer; "
        "this run starts a local Prefect API of its own",
        name,
        url,
    )
    return None
