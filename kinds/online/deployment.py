"""The serving endpoint as a Ray Serve application (FastAPI routes on :class:`OnlineService`).

Routes: ``POST /v1/completions``, ``POST /v1/chat/completions``, ``POST /v1/feedback``,
``GET /v1/models`` (all with ``Authorization: Bearer <token>`` when a token is set) and
``GET /health``. Errors come back as OpenAI-style ``{"error": {"message", "type"}}`` bodies
with a 4xx status that says what was wrong.

New weights reach the replicas through a small JSON file, the weights file
(:func:`update_weights` replaces it atomically): before each request a replica compares the
file's modification time with the one it loaded and, when it changed, loads the new
version and swaps it in between requests. No request is dropped, each response is tagged
with the version that produced it, and a replica that Ray Serve restarts serves the newest
version at once. (The file and the model directories must be readable by every replica: on
a multi-node cluster, put them on shared storage.)
"""

# No ``from __future__ import annotations`` here: Ray Serve rebuilds the routes' signatures
# for FastAPI, which must see ``Request`` itself, not the string "Request" (else every
# request is refused with 422).
import asyncio
import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from ray import serve

from infra.cluster.runtime_env import store_access_env
from kinds.online.events import ReadyEvents
from kinds.online.section import LOOPBACK_HOSTS
from kinds.online.service import OnlineService, ServedModel, ServeError
from kinds.online.store import FeedbackStore
from kinds.online.store_mirror import StoreMirror

logger = logging.getLogger(__name__)
#: CPUs each replica reserves (it generates on the CPU); a GPU placement leaves them free.
REPLICA_CPUS = 1.0
app = FastAPI(title="rlpipe policy server", docs_url=None, redoc_url=None)


@dataclass(frozen=True)
class ServerSettings:
    """What a replica needs to start (no secret: the token travels as its SHA-256).

    Attributes:
        model_name: The name clients pass as ``model``.
        store: The feedback store's database file.
        weights_file: The weights file (:class:`Weights` as JSON) the replicas serve.
        token_sha256: SHA-256 hex digest of the bearer token (None: no token).
        max_new_tokens: Default and largest ``max_tokens``.
        temperature: Default sampling temperature.
        threshold: Feedback records per training batch: each time the unclaimed ones reach a
            multiple of it, the replica emits the Prefect event ``rlpipe.feedback.ready``.
        resource_id: The event's resource id (``rlpipe.online.<run name>``).
        trainer: Who trains on the feedback: ``run`` or ``external`` (the event's
            ``rlpipe.online.trainer`` label).
        trigger: The parameters of the train flow run the event should start (its payload).
        mirror: Where the store's records are also written (``online.mirror``), or None.
    """

    model_name: str
    store: str
    weights_file: str
    token_sha256: str | None = None
    max_new_tokens: int = 32
    temperature: float = 1.0
    threshold: int = 0
    resource_id: str = "rlpipe.online"
    trainer: str = "run"
    trigger: dict[str, Any] = field(default_factory=dict)
    mirror: str | None = None


@dataclass(frozen=True)
class Weights:
    """The versions a deployment serves (the weights file's content).

    Attributes:
        version: The main weight version.
        model_dir: Its model directory.
        candidate_version: The A/B candidate's version (None: no split).
        candidate_dir: Its model directory.
        candidate_share: Share of requests the candidate serves.
    """

    version: int
    model_dir: str
    candidate_version: int | None = None
    candidate_dir: str | None = None
    candidate_share: float = 0.0


# (Defined before PolicyServer: Ray Serve ships the class with the globals it sees then.)
def file_stamp(path: str | Path) -> tuple[int, int, int]:
    """What changes whenever the weights file is replaced: inode, modification time, size."""
    info = Path(path).stat()
    return info.st_ino, info.st_mtime_ns, info.st_size


def read_weights(path: str | Path) -> Weights:
    """The :class:`Weights` of a weights file."""
    return Weights(**json.loads(Path(path).read_text()))


def write_weights(path: str | Path, weights: Weights) -> None:
    """Replace the weights file atomically (a replica never reads half of it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(weights)))
    os.replace(tmp, path)


async def _body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw) if raw else None
    except json.JSONDecodeError as exc:
        raise ServeError(400, f"the body is not JSON: {exc.msg} at position {exc.pos}") from None


@serve.deployment(name="policy", max_ongoing_requests=64)
@serve.ingress(app)
class PolicyServer:
    """One replica of the policy server.

    Args:
        settings: :class:`ServerSettings` as a dict.
    """

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = ServerSettings(**settings)
        self.service: OnlineService | None = None
        self._loaded: tuple[int, int, int] | None = None
        self._reload_lock = threading.Lock()
        self._refresh()

    def _refresh(self) -> None:
        """Load the weights file's versions when it changed since the last load."""
        path = Path(self.settings.weights_file)
        if file_stamp(path) == self._loaded:
            return
        with self._reload_lock:
            stamp = file_stamp(path)
            if stamp != self._loaded:
                self._load(read_weights(path))
                self._loaded = stamp

    def _load(self, weights: Weights) -> None:
        main = ServedModel.load(weights.model_dir, weights.version)
        if self.service is None:
            s = self.settings
            self.service = OnlineService(
                main,
                FeedbackStore(s.store, StoreMirror(s.mirror) if s.mirror else None),
                s.model_name,
                token_sha256=s.token_sha256,
                max_new_tokens=s.max_new_tokens,
                temperature=s.temperature,
                on_feedback=(
                    ReadyEvents(s.threshold, s.resource_id, trainer=s.trainer, trigger=s.trigger)
                    if s.threshold
                    else None
                ),
            )
        else:
            self.service.swap(main)
        candidate = (
            ServedModel.load(weights.candidate_dir, weights.candidate_version)
            if weights.candidate_dir is not None and weights.candidate_version is not None
            else None
        )
        self.service.split(candidate, weights.candidate_share if candidate else 0.0)

    async def _answer(self, method: str, request: Request, with_body: bool = True) -> Any:
        """Call the service's ``method`` off the event loop; a refusal as its error body."""
        try:
            await asyncio.to_thread(self._refresh)
            header = request.headers.get("authorization")
            call = getattr(self.service, method)
            if not with_body:
                return call(header)
            return await asyncio.to_thread(call, await _body(request), header)
        except ServeError as exc:
            return JSONResponse(exc.body(), status_code=exc.status)

    @app.post("/v1/completions")
    async def completions(self, request: Request) -> Any:
        """OpenAI-compatible text completion."""
        return await self._answer("complete", request)

    @app.post("/v1/chat/completions")
    async def chat_completions(self, request: Request) -> Any:
        """OpenAI-compatible chat completion."""
        return await self._answer("chat", request)

    @app.post("/v1/feedback")
    async def feedback(self, request: Request) -> Any:
        """Feedback on a served completion."""
        return await self._answer("feedback", request)

    @app.get("/v1/models")
    async def models(self, request: Request) -> Any:
        """The served model."""
        return await self._answer("models", request, with_body=False)

    @app.get("/health")
    async def health(self) -> Any:
        """Liveness, the versions served and the answering replica's process id (no token)."""
        await asyncio.to_thread(self._refresh)
        return {**self.service.health(), "replica_pid": os.getpid()}


def start_policy_server(
    settings: ServerSettings,
    weights: Weights,
    host: str = "127.0.0.1",
    port: int = 8000,
    app_name: str = "rlpipe-policy",
    num_replicas: int = 1,
) -> str:
    """Deploy the policy server on the connected Ray cluster; returns its base URL.

    Raises:
        ValueError: A bind address beyond loopback without a token.
    """
    if host not in LOOPBACK_HOSTS and settings.token_sha256 is None:
        raise ValueError(
            f"online.host = {host!r} exposes the endpoint beyond this machine: set a bearer "
            "token (online.token_env) or bind 127.0.0.1"
        )
    write_weights(settings.weights_file, weights)
    serve.start(http_options={"host": host, "port": port})
    # no access-log line per request in the run's output (Serve's log files keep them)
    options: dict[str, Any] = {
        "num_replicas": num_replicas,
        "logging_config": {"enable_access_log": False},
    }
    actor_options: dict[str, Any] = {"num_cpus": REPLICA_CPUS}
    access = store_access_env(settings.mirror)  # (the mirror's credentials, if any)
    if access:
        actor_options["runtime_env"] = {"env_vars": access}
    options["ray_actor_options"] = actor_options
    deployment = PolicyServer.options(**options)
    serve.run(deployment.bind(asdict(settings)), name=app_name, route_prefix="/")
    return f"http://{host}:{port}"


def update_weights(weights: Weights, weights_file: str | Path) -> None:
    """Serve new weights: each replica loads them before its next request."""
    previous = file_stamp(weights_file) if Path(weights_file).exists() else None
    write_weights(weights_file, weights)
    while file_stamp(weights_file) == previous:  # a coarse clock and a reused inode
        time.sleep(0.01)
        write_weights(weights_file, weights)
