"""call_with_retries with the S3 store's transient-error rule: retry 5xx/connection errors,
never a 404 or a denied request."""

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from infra.checkpoint.retry import call_with_retries
from infra.checkpoint.s3_store import is_transient


def client_error(status: int, code: str) -> ClientError:
    response = {
        "Error": {"Code": code, "Message": code},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "GetObject")


class Flaky:
    """Raises the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def retry(fn, attempts=3):
    waits: list[float] = []
    result = call_with_retries(fn, is_transient, attempts=attempts, sleep=waits.append)
    return result, waits


@pytest.mark.parametrize(
    "error",
    [
        client_error(500, "InternalError"),
        client_error(503, "SlowDown"),
        client_error(400, "RequestTimeout"),
        EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
    ],
    ids=["500", "503-slowdown", "request-timeout", "connection"],
)
def test_transient_errors_are_retried(error):
    fn = Flaky(error, error)
    result, waits = retry(fn)
    assert result == "ok" and fn.calls == 3
    assert len(waits) == 2 and 0 < waits[0] <= waits[1] * 2


@pytest.mark.parametrize(
    "error",
    [client_error(404, "NoSuchKey"), client_error(404, "404"), client_error(403, "AccessDenied")],
    ids=["no-such-key", "head-404", "denied"],
)
def test_permanent_errors_are_not_retried(error):
    fn = Flaky(error)
    with pytest.raises(ClientError):
        retry(fn)
    assert fn.calls == 1


def test_gives_up_after_the_last_attempt():
    fn = Flaky(*[client_error(500, "InternalError")] * 5)
    with pytest.raises(ClientError):
        retry(fn, attempts=3)
    assert fn.calls == 3


def test_backoff_grows_and_is_capped():
    waits: list[float] = []
    fn = Flaky(*[client_error(500, "InternalError")] * 6)
    call_with_retries(
        fn, is_transient, attempts=7, base_delay=1.0, max_delay=4.0, sleep=waits.append
    )
    assert len(waits) == 6
    assert 0.5 <= waits[0] <= 1.0 and 2.0 <= waits[2] <= 4.0
    assert all(w <= 4.0 for w in waits)
