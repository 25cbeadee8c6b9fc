"""Keep secrets out of MLflow: params, config artifacts and model metadata are redacted.

Three rules, applied to every config tree before it is logged:

- a key that names a secret (``token``, ``secret``, ``password``, ``api_key``,
  ``access_key``, ``credentials``, ... as a word of the key, e.g. ``hf_token``,
  ``aws_secret_access_key``; not ``max_new_tokens`` or ``pad_token_id``) has its whole
  value replaced by :data:`MASK`;
- the value of any environment variable whose name names a secret (``AWS_SECRET_ACCESS_KEY``,
  ``HF_TOKEN``, ``MLFLOW_TRACKING_PASSWORD``, ...) is masked wherever it appears in a string;
- ``user:password@`` in a URL becomes ``***@``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

MASK = "***"
_SECRET_WORD = re.compile(
    r"(?:^|[_\-.])(?:token|secret|password|passwd|passphrase|credentials?|api_?key"
    r"|access_?key|secret_?key|private_?key|auth)(?:$|[_\-.])",
    re.IGNORECASE,
)
_NOT_SECRET = re.compile(r"token_ids?$", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/@\s]+@")
#: Environment values shorter than this are not masked (too likely to be ordinary words).
MIN_SECRET_LEN = 6


def is_secret_name(name: str) -> bool:
    """Whether a config key or environment variable name names a secret."""
    return bool(_SECRET_WORD.search(name)) and not _NOT_SECRET.search(name)


def secret_env_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of the environment variables whose names name a secret (longest first)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """Mask secret environment values and URL credentials in ``text``."""
    for value in secret_env_values() if secrets is None else secrets:
        text = text.replace(value, MASK)
    return _URL_USERINFO.sub(rf"\g<scheme>{MASK}@", text)


def redact_config(tree: Any, secrets: list[str] | None = None, by_key: bool = True) -> Any:
    """A copy of a JSON-like tree with secrets masked (see the module docstring).

    Args:
        tree: Dicts, lists and scalars.
        secrets: Values to mask (default: :func:`secret_env_values`).
        by_key: Also mask the values of keys that name secrets (off for files whose keys
            are not ours, e.g. a tokenizer's ``bos_token``).
    """
    secrets = secret_env_values() if secrets is None else secrets
    if isinstance(tree, dict):
        return {
            key: MASK
            if by_key and is_secret_name(str(key))
            else redact_config(value, secrets, by_key)
            for key, value in tree.items()
        }
    if isinstance(tree, (list, tuple)):
        return [redact_config(item, secrets, by_key) for item in tree]
    if isinstance(tree, str):
        return redact_text(tree, secrets)
    return tree


def redacted_json_files(
    directory: str | os.PathLike,
    config_files: tuple[str, ...] = ("config.json",),
    max_bytes: int = 1 << 20,
) -> dict[str, str]:
    """JSON files under ``directory`` that hold secrets, as ``{relative path: masked text}``.

    Every JSON file has secret values masked; files named in ``config_files`` (relative
    paths: rlpipe configs, such as a checkpoint's ``config.json``) also have the values of
    secret-named keys masked. Files that are not JSON, larger than ``max_bytes`` or with
    nothing to mask are left out (they can be uploaded as they are).
    """
    root = Path(directory)
    secrets = secret_env_values()
    out: dict[str, str] = {}
    for path in root.rglob("*.json"):
        if not path.is_file() or path.stat().st_size > max_bytes:
            continue
        try:
            data = json.loads(path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        rel = path.relative_to(root).as_posix()
        masked = redact_config(data, secrets, by_key=rel in config_files)
        if masked != data:
            out[rel] = json.dumps(masked, indent=2) + "\n"
    return out
