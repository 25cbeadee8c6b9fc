"""Checkpoint store on S3 or an S3-compatible server: ``s3://bucket/prefix``.

Same layout and commit protocol as the local store: every file of a checkpoint is PUT
first, ``COMPLETE`` after them and ``latest.json`` last. An S3 PUT replaces an object
atomically (readers see the old or the new manifest, never a mix), so a checkpoint is
visible only once all its files are stored.

Endpoint: ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``, else
``MLFLOW_S3_ENDPOINT_URL`` (so one variable serves checkpoints and MLflow artifacts), else
AWS. Credentials come from boto3's usual chain (environment, profile, instance role),
never from the config. Requests are retried by botocore (``standard`` mode) and, on
transient errors (connection errors, 5xx, throttling), again by
:func:`~infra.checkpoint.retry.call_with_retries`; a missing object, a missing bucket or
denied access fail at once with a :class:`CheckpointError` naming the URI.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    CredentialRetrievalError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    PartialCredentialsError,
)

from infra.checkpoint.retry import call_with_retries
from infra.checkpoint.store import MANIFEST, CheckpointError, CheckpointStore, check_relpath

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Endpoint variables, first set wins.
ENDPOINT_VARS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "MLFLOW_S3_ENDPOINT_URL")
#: Calls per request by our wrapper (each of them retried by botocore as well).
ATTEMPTS = 3
BOTO_CONFIG = {
    "retries": {"mode": "standard", "max_attempts": 4},
    "connect_timeout": 10,
    "read_timeout": 120,
}
_TRANSIENT_CODES = {
    "InternalError",
    "RequestTimeout",
    "RequestTimeoutException",
    "ServiceUnavailable",
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
}
_NOT_FOUND_CODES = {"404", "NoSuchKey", "NotFound"}
_DENIED_CODES = {
    "403",
    "AccessDenied",
    "AllAccessDisabled",
    "ExpiredToken",
    "InvalidAccessKeyId",
    "InvalidToken",
    "SignatureDoesNotMatch",
}
_CREDENTIAL_ERRORS = (NoCredentialsError, PartialCredentialsError, CredentialRetrievalError)

_clients: dict[tuple[str | None, ...], Any] = {}
_clients_lock = threading.Lock()


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split ``s3://bucket/some/prefix`` into ``("bucket", "some/prefix")``.

    Raises:
        CheckpointError: Not an ``s3://`` URI, or no bucket in it.
    """
    if not uri.lower().startswith("s3://"):
        raise CheckpointError(f"{uri!r} is not an s3:// URI")
    bucket, _, prefix = uri[5:].partition("/")
    if not bucket:
        raise CheckpointError(f"{uri!r} names no bucket (expected s3://bucket/prefix)")
    return bucket, prefix.strip("/")


def s3_endpoint() -> str | None:
    """The S3 endpoint URL from the environment (None: AWS)."""
    return next((os.environ[v] for v in ENDPOINT_VARS if os.environ.get(v)), None)


def is_transient(exc: BaseException) -> bool:
    """Whether an S3 error may pass when retried (connection, 5xx, throttling)."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        return status >= 500 or status == 429 or error.get("Code") in _TRANSIENT_CODES
    return isinstance(exc, (ConnectionError, HTTPClientError, IncompleteReadError))


def error_code(exc: ClientError) -> str:
    """The S3 error code of a client error (``"404"`` for a bare HEAD miss)."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def s3_client(endpoint: str | None = None) -> Any:
    """A boto3 S3 client for ``endpoint`` (cached: clients are thread-safe and slow to make)."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    key = (
        endpoint,
        region,
        os.environ.get("AWS_PROFILE"),
        os.environ.get("AWS_ACCESS_KEY_ID"),
        os.environ.get("AWS_SESSION_TOKEN"),
    )
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            options: dict[str, Any] = dict(BOTO_CONFIG)
            if endpoint:  # S3-compatible servers (MinIO, moto...) want path-style URLs
                options["s3"] = {"addressing_style": "path"}
            client = boto3.session.Session().client(
                "s3", endpoint_url=endpoint, region_name=region, config=Config(**options)
            )
            _clients[key] = client
    return client


class S3CheckpointStore(CheckpointStore):
    """Checkpoint store under ``s3://bucket/prefix``.

    Args:
        uri: ``s3://bucket`` or ``s3://bucket/prefix``.
    """

    def __init__(self, uri: str) -> None:
        self.bucket, self.prefix = parse_s3_uri(uri)
        self.uri = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.endpoint = s3_endpoint()
        self.client = s3_client(self.endpoint)
        self._bucket_checked = False

    # -- CheckpointStore -----------------------------------------------------------------
    def write_bytes(self, relpath: str, data: bytes) -> None:  # noqa: D102
        key = self._key(relpath)
        self._call(
            "PUT",
            relpath,
            lambda: self.client.put_object(Bucket=self.bucket, Key=key, Body=data),
        )

    def read_bytes(self, relpath: str) -> bytes:  # noqa: D102
        key = self._key(relpath)
        return self._call(
            "GET",
            relpath,
            lambda: self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read(),
        )

    def exists(self, relpath: str) -> bool:  # noqa: D102
        key = self._key(relpath)
        try:
            self._call(
                "HEAD", relpath, lambda: self.client.head_object(Bucket=self.bucket, Key=key)
            )
        except _Missing:
            self._check_bucket()  # a HEAD miss does not say whether the bucket exists
            return False
        return True

    def _replace_manifest(self, data: bytes) -> None:
        self.write_bytes(MANIFEST, data)  # a PUT replaces the object atomically

    def local_path(self, relpath: str) -> Path | None:  # noqa: D102
        return None

    def list_files(self, folder: str) -> list[str]:  # noqa: D102
        start = self._key(folder.rstrip("/") + "/")
        root = len(self.prefix) + 1 if self.prefix else 0

        def listing() -> list[str]:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=start
            )
            return [obj["Key"][root:] for page in pages for obj in page.get("Contents", [])]

        return sorted(self._call("LIST", folder, listing))

    def checkpoint_steps(self) -> list[int]:  # noqa: D102
        start = self._key("step_").removesuffix("step_")

        def listing() -> list[str]:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=start + "step_", Delimiter="/"
            )
            return [p["Prefix"] for page in pages for p in page.get("CommonPrefixes", [])]

        names = [prefix[len(start) :].rstrip("/") for prefix in self._call("LIST", "", listing)]
        digits = (name.removeprefix("step_") for name in names)
        return sorted(int(d) for d in digits if d.isdigit())

    def delete_folder(self, folder: str) -> None:  # noqa: D102
        keys = [self._key(relpath) for relpath in self.list_files(folder)]
        for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            batch = {"Objects": [{"Key": key} for key in keys[i : i + 1000]], "Quiet": True}
            self._call(
                "DELETE",
                folder,
                lambda batch=batch: self.client.delete_objects(Bucket=self.bucket, Delete=batch),
            )

    # -- helpers -------------------------------------------------------------------------
    def _key(self, relpath: str) -> str:
        """The object key of ``relpath`` (checked by :func:`check_relpath`)."""
        check_relpath(relpath)
        return f"{self.prefix}/{relpath}" if self.prefix else relpath

    def _check_bucket(self) -> None:
        """Raise :class:`CheckpointError` if the bucket does not exist (checked once)."""
        if self._bucket_checked:
            return
        try:
            self._call("HEAD bucket", "", lambda: self.client.head_bucket(Bucket=self.bucket))
        except _Missing:
            raise self._no_bucket() from None
        self._bucket_checked = True

    def _no_bucket(self) -> CheckpointError:
        where = self.endpoint or "AWS"
        return CheckpointError(
            f"S3 bucket {self.bucket!r} of checkpoint store {self.uri} does not exist "
            f"(endpoint {where}); create it first"
        )

    def _call(self, what: str, relpath: str, fn: Callable[[], T]) -> T:
        """Run one request with retries; translate S3 errors to :class:`CheckpointError`."""
        target = f"{self.uri}/{relpath}" if relpath else self.uri
        try:
            return call_with_retries(
                fn, is_transient, attempts=ATTEMPTS, what=f"S3 {what} {target}"
            )
        except ClientError as exc:
            code = error_code(exc)
            if code == "NoSuchBucket":
                raise self._no_bucket() from None
            if code in _NOT_FOUND_CODES:
                raise _Missing(f"checkpoint file {target} is missing") from None
            if code in _DENIED_CODES:
                raise CheckpointError(
                    f"S3 {what} {target} denied ({code}): check the AWS credentials and the "
                    "bucket's permissions"
                ) from None
            raise CheckpointError(f"S3 {what} {target} failed ({code}): {exc}") from exc
        except _CREDENTIAL_ERRORS as exc:
            raise CheckpointError(
                f"no usable AWS credentials for {target} ({exc}); set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE / an instance role) in the environment"
            ) from None
        except BotoCoreError as exc:
            raise CheckpointError(
                f"S3 {what} {target} failed after {ATTEMPTS} attempts (endpoint "
                f"{self.endpoint or 'AWS'}): {exc}"
            ) from exc


class _Missing(CheckpointError):
    """An object (or, for HEAD bucket, the bucket) does not exist."""
