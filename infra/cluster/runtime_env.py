"""Process-wide settings every rlpipe process (driver or Ray worker) applies at start."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

#: Environment every process gets: one thread per process, no telemetry.
BASE_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # transformers draws a "Loading weights" bar in every process that loads a model
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}

#: Variables forwarded from the driver to every worker when set (extension modules, tracking).
FORWARDED_VARS = (
    "RLPIPE_EXT_MODULE",
    "RLPIPE_KEY_FILE",
    "RLPIPE_ALLOW_LOGICAL_GPUS",
    "MLFLOW_TRACKING_URI",
    "MLFLOW_S3_ENDPOINT_URL",
    "PREFECT_API_URL",
    "PYTHONPATH",
)

#: What a process needs to open a checkpoint store, per URI scheme: credentials and
#: endpoint settings. Only the processes that read or write such a store get them: the
#: driver (its own environment) and the worker groups whose class sets
#: ``opens_checkpoint_store`` (see :func:`store_access_env`).
STORE_ACCESS_VARS: dict[str, tuple[str, ...]] = {
    "s3": (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "AWS_DEFAULT_REGION",
        "AWS_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
    ),
}


def register_store_access_vars(scheme: str, names: tuple[str, ...]) -> None:
    """Name the variables a process needs to open ``<scheme>://`` checkpoint stores.

    Args:
        scheme: URI scheme without ``://`` (case-insensitive), as registered with
            :func:`infra.checkpoint.store.register_store_scheme`.
        names: Environment variables (credentials, endpoints) forwarded to checkpoint
            writers when the run's store has this scheme.
    """
    STORE_ACCESS_VARS[scheme.lower()] = tuple(names)


def all_store_access_vars() -> tuple[str, ...]:
    """Every variable of :data:`STORE_ACCESS_VARS`, whatever the scheme."""
    return tuple(dict.fromkeys(n for names in STORE_ACCESS_VARS.values() for n in names))


def store_access_env(store_uri: str | None) -> dict[str, str]:
    """The variables (set in this process) that opening ``store_uri`` needs.

    Empty for a local path or None (the default store under ``run.output_dir``).
    """
    scheme, sep, _ = (store_uri or "").partition("://")
    names = STORE_ACCESS_VARS.get(scheme.lower(), ()) if sep else ()
    return {name: os.environ[name] for name in names if os.environ.get(name)}


def apply_base_env() -> None:
    """Set :data:`BASE_ENV` defaults in this process (keeps values already set)."""
    for key, value in BASE_ENV.items():
        os.environ.setdefault(key, value)


def worker_env_vars() -> dict[str, str]:
    """Variables to pass to every Ray worker through ``runtime_env`` (no store credentials)."""
    env = {k: os.environ.get(k, v) for k, v in BASE_ENV.items()}
    env.update({k: os.environ[k] for k in FORWARDED_VARS if os.environ.get(k)})
    return env


@contextmanager
def _restored(names: tuple[str, ...]) -> Iterator[None]:
    """Put ``names`` back in this process's environment as they were, after the block."""
    saved = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def without_vars(names: tuple[str, ...]) -> Iterator[None]:
    """Remove ``names`` from this process's environment for the block (restored after).

    For starting processes that must not inherit them, such as a local Ray cluster's
    node processes, whose workers inherit their environment.
    """
    with _restored(names):
        for name in names:
            os.environ.pop(name, None)
        yield


@contextmanager
def with_vars(values: dict[str, str]) -> Iterator[None]:
    """Set ``values`` in this process's environment for the block (restored after).

    For starting processes that must inherit them, such as a local Ray cluster's node
    processes, whose workers inherit their environment.
    """
    with _restored(tuple(values)):
        os.environ.update(values)
        yield


def limit_threads() -> None:
    """One compute thread in this process (torch, BLAS)."""
    apply_base_env()
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set once in this process
        pass
