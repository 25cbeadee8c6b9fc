"""Process-wide settings every rlpipe process (driver or Ray worker) applies at start."""

from __future__ import annotations

import os

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
}

#: Variables forwarded from the driver to workers when set (extension modules, tracking).
FORWARDED_VARS = (
    "RLPIPE_EXT_MODULE",
    "RLPIPE_KEY_FILE",
    "MLFLOW_TRACKING_URI",
    "MLFLOW_S3_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "PREFECT_API_URL",
    "PYTHONPATH",
)


def apply_base_env() -> None:
    """Set :data:`BASE_ENV` defaults in this process (keeps values already set)."""
    for key, value in BASE_ENV.items():
        os.environ.setdefault(key, value)


def worker_env_vars() -> dict[str, str]:
    """Variables to pass to Ray workers through ``runtime_env``."""
    env = {k: os.environ.get(k, v) for k, v in BASE_ENV.items()}
    env.update({k: os.environ[k] for k in FORWARDED_VARS if os.environ.get(k)})
    return env


def limit_threads() -> None:
    """One compute thread in this process (torch, BLAS)."""
    apply_base_env()
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set once in this process
        pass
