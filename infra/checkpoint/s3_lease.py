"""Run lease in an ``s3://`` store: the object ``<prefix>/lease.json``.

It is written with S3 conditional requests:

- create: ``PutObject`` with ``If-None-Match: *`` (fails if the object exists);
- renew and take over: ``PutObject`` with ``If-Match: <ETag>`` (fails if it changed);
- release: ``DeleteObject`` with ``If-Match: <ETag>``.

S3 decides which of two concurrent writers wins, so the lease needs an S3 service that
honours these headers (AWS S3; moto 5 does). The age of a lease is measured on the
server's clock (response ``Date`` minus the object's ``LastModified``), so the hosts'
clocks do not matter. Requests are retried on transient errors like the checkpoint store's;
a conditional write retried after it had in fact succeeded is recognised by the lease id.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from infra.checkpoint.lease import LEASE_FILE, LeaseBackend, LeaseError, LeaseSnapshot
from infra.checkpoint.retry import call_with_retries
from infra.checkpoint.s3_store import (
    ATTEMPTS,
    error_code,
    is_transient,
    parse_s3_uri,
    s3_client,
    s3_endpoint,
)

T = TypeVar("T")
#: The object changed (or appeared, or vanished) since we read it: a lost race.
_CONFLICT_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
_UNSUPPORTED_CODES = {"NotImplemented", "501"}


class S3LeaseBackend(LeaseBackend):
    """``lease.json`` under the store ``s3://bucket/prefix``.

    Args:
        store_uri: The run's checkpoint store URI.
    """

    def __init__(self, store_uri: str) -> None:
        self.bucket, prefix = parse_s3_uri(store_uri)
        self.key = f"{prefix}/{LEASE_FILE}" if prefix else LEASE_FILE
        self.uri = f"s3://{self.bucket}/{self.key}"
        self.endpoint = s3_endpoint()
        self.client = s3_client(self.endpoint)

    def read(self) -> LeaseSnapshot | None:  # noqa: D102
        def get() -> dict[str, Any] | None:
            try:
                response = self.client.get_object(Bucket=self.bucket, Key=self.key)
            except ClientError as exc:
                if error_code(exc) in _MISSING_CODES:
                    return None
                raise
            return {**response, "Body": response["Body"].read()}

        response = self._call("GET", get)
        if response is None:
            return None
        try:
            record = json.loads(response["Body"])
            record = record if isinstance(record, dict) else None
        except ValueError:
            record = None
        return LeaseSnapshot(record, response["ETag"], _server_age_s(response))

    def create(self, record: dict[str, Any]) -> str | None:  # noqa: D102
        body = json.dumps(record, indent=2, sort_keys=True).encode()
        return self._put(body, IfNoneMatch="*")

    def replace(self, record: dict[str, Any], version: str) -> str | None:  # noqa: D102
        body = json.dumps(record, indent=2, sort_keys=True).encode()
        return self._put(body, IfMatch=version)

    def delete(self, version: str) -> bool:  # noqa: D102
        def delete() -> bool:
            try:
                self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=version)
            except ClientError as exc:
                if error_code(exc) in _CONFLICT_CODES | _MISSING_CODES:
                    return False
                raise
            return True

        return self._call("DELETE", delete)

    # -- helpers ---------------------------------------------------------------------------
    def _put(self, body: bytes, **condition: str) -> str | None:
        def put() -> str | None:
            try:
                response = self.client.put_object(
                    Bucket=self.bucket,
                    Key=self.key,
                    Body=body,
                    ContentType="application/json",
                    **condition,
                )
            except ClientError as exc:
                if error_code(exc) in _CONFLICT_CODES | _MISSING_CODES:
                    return None
                raise
            return str(response["ETag"])

        return self._call("PUT", put)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """One request with retries; S3 errors become one-line :class:`LeaseError`."""
        try:
            return call_with_retries(
                fn, _retryable, attempts=ATTEMPTS, what=f"S3 {what} {self.uri}"
            )
        except ClientError as exc:
            code = error_code(exc)
            if code in _UNSUPPORTED_CODES:
                raise LeaseError(
                    f"S3 endpoint {self.endpoint or 'AWS'} does not support conditional "
                    f"requests ({what} {self.uri}: {code}); the run lease needs If-None-Match "
                    "and If-Match on PutObject"
                ) from None
            if code == "NoSuchBucket":
                raise LeaseError(
                    f"S3 bucket {self.bucket!r} of run lease {self.uri} does not exist "
                    f"(endpoint {self.endpoint or 'AWS'}); create it first"
                ) from None
            raise LeaseError(f"S3 {what} {self.uri} failed ({code}): {exc}") from None
        except BotoCoreError as exc:
            raise LeaseError(
                f"S3 {what} {self.uri} failed after {ATTEMPTS} attempts (endpoint "
                f"{self.endpoint or 'AWS'}): {exc}"
            ) from None


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, ClientError) and error_code(exc) in _UNSUPPORTED_CODES:
        return False  # 501: retrying will not add the feature
    return is_transient(exc)


def _server_age_s(response: dict[str, Any]) -> float | None:
    """Seconds between the object's last write and this response, both on the server's clock."""
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    modified = response.get("LastModified")
    if not date or modified is None:
        return None
    try:
        return max(0.0, (parsedate_to_datetime(date) - modified).total_seconds())
    except (TypeError, ValueError):
        return None
