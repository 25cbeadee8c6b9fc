"""Keep secrets out of everything rlpipe shows: MLflow, Prefect, logs, summaries, errors.

:func:`redact_text` is the one masking function; everything else applies it:

- a key that names a secret (``token``, ``secret``, ``password``, ``api_key``,
  ``access_key``, ``credentials``, ... as a word of the key, e.g. ``hf_token``,
  ``aws_secret_access_key``; not ``max_new_tokens`` or ``pad_token_id``) has its whole
  value replaced by :data:`MASK` (:func:`redact_config`);
- the value of any environment variable whose name names a secret (``AWS_SECRET_ACCESS_KEY``,
  ``HF_TOKEN``, ``MLFLOW_TRACKING_PASSWORD``, ...) is masked wherever it appears in a string;
- ``user:password@`` in a URL becomes ``***@``;
- ``name=value`` and ``name: value`` where the name names a secret: config keys
  (``model.hf_token=...``), variables ending ``_TOKEN``/``_KEY``/``_SECRET``/``PASSWORD``,
  URL query parameters (``?access_token=``, ``&sig=``, ``X-Amz-Signature=``) and
  connection-string fields (``AccountKey=...;``, ``password=...``);
- ``Bearer <token>`` (an ``Authorization`` header) keeps only the word ``Bearer``.

Log records are masked as they are created (:func:`install_log_redaction`), exceptions in
place at the flow boundary (:func:`redact_exception`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
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
#: Environment-style names of secrets: ``HF_TOKEN``, ``STRIPE_KEY``, ``DB_PASSWORD``, ...
_SECRET_ENV_NAME = re.compile(r"^[A-Z0-9_]*(?:_TOKEN|_KEY|_SECRET|PASSWORD|_PASSWD|_PWD)$")
#: Names of connection-string fields and URL query parameters that hold secrets.
_SECRET_FIELDS = frozenset(
    {
        "accountkey",
        "sharedaccesskey",
        "sharedaccesssignature",
        "pwd",
        "sig",
        "signature",
        "x-amz-signature",
        "apikey",
    }
)
#: ``name=`` / ``name:`` (the name optionally quoted, as in JSON or a dict's repr) and the
#: value after it (quoted, or up to a space or delimiter).
_ASSIGNMENT = re.compile(r"""(?P<name>[A-Za-z_][\w.\-]*)(?P<close>["']?)[ \t]*[=:][ \t]*""")
_VALUE = re.compile(r""""[^"]*"|'[^']*'|[^\s&;,'"<>()\[\]{}]+""")
_BEARER = re.compile(r"\b(?P<scheme>Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
#: Environment values shorter than this are not masked (too likely to be ordinary words).
MIN_SECRET_LEN = 6


def is_secret_name(name: str) -> bool:
    """Whether a config key or environment variable name names a secret."""
    return bool(_SECRET_WORD.search(name)) and not _NOT_SECRET.search(name)


def is_secret_field(name: str, in_query: bool = False) -> bool:
    """Whether ``name=value`` in free text holds a secret.

    True for config keys that name a secret (:func:`is_secret_name`), environment-style
    names ending ``_TOKEN``, ``_KEY``, ``_SECRET`` or ``PASSWORD``, connection-string
    fields (``AccountKey``, ``pwd``, ...) and signature parameters (``sig``); a bare
    ``key`` only as a URL query parameter (``?key=...``).
    """
    lowered = name.lower()
    return (
        is_secret_name(name)
        or bool(_SECRET_ENV_NAME.match(name))
        or lowered in _SECRET_FIELDS
        or (in_query and lowered == "key")
    )


@lru_cache(maxsize=4096)
def _is_secret_variable(name: str) -> bool:
    """Whether an environment variable holds a secret (cached: checked on every log record)."""
    return is_secret_name(name) or bool(_SECRET_ENV_NAME.match(name))


def secret_env_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of the environment variables whose names name a secret (longest first)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if len(v) >= MIN_SECRET_LEN and _is_secret_variable(k)}
    return sorted(values, key=len, reverse=True)


def _mask_assignments(text: str) -> str:
    """Mask the values of ``name=value`` pairs whose name holds a secret."""
    parts: list[str] = []
    done = 0
    for match in _ASSIGNMENT.finditer(text):
        if match.start() < done:  # inside a value masked already
            continue
        before = text[match.start() - 1] if match.start() else ""
        if not is_secret_field(match["name"], in_query=bool(before) and before in "?&"):
            continue
        value = _VALUE.match(text, match.end())
        if value is None:
            continue
        quote = value.group(0)[0] if value.group(0)[0] in "'\"" else ""
        parts += [text[done : match.end()], f"{quote}{MASK}{quote}"]
        done = value.end()
    return "".join(parts) + text[done:] if parts else text


def redact_text(text: str, secrets: list[str] | None = None, assignments: bool = True) -> str:
    """``text`` with secrets masked (every rule of the module docstring but secret keys).

    Args:
        text: Any text: a URI, a log message, an error message, an override.
        secrets: Values to mask wherever they appear (default: :func:`secret_env_values`).
        assignments: Also mask ``name=value`` pairs and ``Bearer`` tokens (off for text
            that is not ours and must stay intact, e.g. a tokenizer's chat template).
    """
    for value in secret_env_values() if secrets is None else secrets:
        text = text.replace(value, MASK)
    text = _URL_USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    if not assignments:
        return text
    return _BEARER.sub(rf"\g<scheme> {MASK}", _mask_assignments(text))


def url_without_credentials(url: str) -> str:
    """``url`` without its ``user:password@`` part and with secret parameters masked.

    For links: a browser asks for the login instead of showing a broken ``***@`` host.
    """
    return redact_text(_URL_USERINFO.sub(r"\g<scheme>", url))


def redact_config(tree: Any, secrets: list[str] | None = None, by_key: bool = True) -> Any:
    """A copy of a JSON-like tree with secrets masked (see the module docstring).

    Args:
        tree: Dicts, lists and scalars.
        secrets: Values to mask (default: :func:`secret_env_values`).
        by_key: Also mask the values of keys that name secrets and ``name=value`` pairs in
            strings (off for files that are not ours, e.g. a tokenizer's ``bos_token``).
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
        return redact_text(tree, secrets, assignments=by_key)
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


#: Exception attributes that hold text shown with the exception (``OSError.filename``, ...).
_EXCEPTION_TEXT_ATTRS = ("message", "msg", "filename", "filename2", "strerror")


def redact_exception(exc: BaseException) -> BaseException:
    """Mask secrets in ``exc``'s message, and its causes', in place; returns ``exc``.

    Applied where an exception leaves a flow, so that Prefect's state message, the logged
    traceback and the CLI's error line show the masked text.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(redact_text(a) if isinstance(a, str) else a for a in current.args)
        for attr in _EXCEPTION_TEXT_ATTRS:
            value = getattr(current, attr, None)
            if isinstance(value, str):
                try:
                    setattr(current, attr, redact_text(value))
                except (AttributeError, TypeError):  # read-only on some exception types
                    pass
        current = current.__cause__ or current.__context__
    return exc


@contextmanager
def redacted_errors() -> Iterator[None]:
    """Re-raise any exception of the block with its secrets masked (:func:`redact_exception`)."""
    try:
        yield
    except BaseException as exc:
        redact_exception(exc)
        raise


class RedactingFilter(logging.Filter):
    """A logging filter that masks secrets in a record's message and exception, in place.

    :func:`install_log_redaction` applies it to every record as it is created; it can
    also be attached to a handler. (A filter attached to a logger would miss the records
    of its child loggers, ``rlpipe.train`` under ``rlpipe`` for instance.)
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask ``record``; always keeps it."""
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's to report
            return True
        masked = redact_text(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None:
            redact_exception(record.exc_info[1])
        return True


def install_log_redaction() -> None:
    """Mask secrets in every log record of this process (idempotent).

    Covers rlpipe's loggers and their children, Prefect's run loggers (whose records go to
    the Prefect API and UI) and library loggers alike, whatever handler shows them.
    """
    current = logging.getLogRecordFactory()
    if getattr(current, "redacting", False):
        return
    redacting = RedactingFilter()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = current(*args, **kwargs)
        redacting.filter(record)
        return record

    factory.redacting = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
