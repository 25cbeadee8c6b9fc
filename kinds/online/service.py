"""What the serving endpoint does, apart from HTTP: complete, record, take feedback.

:class:`OnlineService` holds the served policy (one Hugging Face causal LM per weight
version; two under an A/B split) and the :class:`~kinds.online.store.FeedbackStore`. Each
method takes a request's decoded JSON body and its ``Authorization`` header and returns the
response body, or raises :class:`ServeError` with the HTTP status and a message that names
the field. The Ray Serve deployment (:mod:`kinds.online.deployment`) maps routes onto it.

A completion is stored (prompt and completion token ids, serve-time log-probs, weight
version) before its response is returned; feedback is validated, then stored, before it is
acknowledged. Neither blocks on the trainer.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kinds.online.store import FeedbackStore, Generation
from rl_core.llm import SamplingParams, hf_generate
from rl_core.online import FeedbackError, parse_feedback
from rl_core.online.ab_test import ShareSplit

logger = logging.getLogger(__name__)
MAX_PROMPT_CHARS = 32_000


class ServeError(Exception):
    """A request the endpoint refuses.

    Attributes:
        status: HTTP status (400, 401, 404, 409, 422, 503).
        message: What was wrong, naming the field.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def body(self) -> dict[str, Any]:
        """The OpenAI-style error body."""
        kind = {401: "authentication_error", 404: "not_found_error", 409: "conflict_error"}
        return {
            "error": {
                "message": self.message,
                "type": kind.get(self.status, "invalid_request_error"),
            }
        }


@dataclass
class ServedModel:
    """One weight version of the policy, loaded for generation.

    Attributes:
        version: The weight version (the training iteration that produced it).
        model: The causal LM (eval mode).
        tokenizer: Its tokenizer.
    """

    version: int
    model: Any
    tokenizer: Any

    @classmethod
    def load(cls, model_dir: str, version: int) -> ServedModel:
        """Load an exported model directory (no remote code runs)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(model_dir, trust_remote_code=False)
        tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=False)
        return cls(version, model.eval(), tokenizer)


def token_digest(token: str | None) -> str | None:
    """The SHA-256 hex digest of a bearer token (None for None)."""
    return None if token is None else hashlib.sha256(token.encode()).hexdigest()


def new_request_id() -> str:
    """A fresh request id: ``cmpl-`` and 32 hexadecimal digits."""
    return f"cmpl-{uuid.uuid4().hex}"


class OnlineService:
    """The served policy, its store and the endpoint's checks.

    Args:
        model: The main version.
        store: Where generations and feedback go.
        model_name: The name clients pass as ``model`` (and ``/v1/models`` lists).
        token_sha256: SHA-256 hex digest (:func:`token_digest`) of the bearer token every
            ``/v1`` request must carry (None: no check; the deployment refuses to bind
            beyond loopback without one). The token itself is never kept.
        max_new_tokens: Default and largest ``max_tokens``.
        temperature: Default sampling temperature.
        on_feedback: Called with the number of unclaimed records after each new feedback
            (the deployment emits the threshold event from it).
    """

    def __init__(
        self,
        model: ServedModel,
        store: FeedbackStore,
        model_name: str,
        token_sha256: str | None = None,
        max_new_tokens: int = 32,
        temperature: float = 1.0,
        on_feedback: Callable[[int], None] | None = None,
    ) -> None:
        self.main = model
        self.candidate: ServedModel | None = None
        self._split: ShareSplit | None = None  # which requests the candidate answers
        self.store = store
        self.model_name = model_name
        self.token_sha256 = token_sha256
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.on_feedback = on_feedback
        self._lock = threading.Lock()  # one generation at a time; swaps wait for it

    # -- versions -------------------------------------------------------------------------
    def swap(self, model: ServedModel) -> None:
        """Serve ``model`` as the main version from the next request on.

        In-flight requests finish with, and are tagged with, the version they started with.
        """
        with self._lock:
            self.main = model
        logger.info("serving weight version %d", model.version)

    def split(self, candidate: ServedModel | None, share: float) -> None:
        """Serve ``candidate`` to ``share`` of the requests (A/B), or stop (None)."""
        splitter = ShareSplit(share) if candidate is not None else None
        with self._lock:
            self.candidate, self._split = candidate, splitter

    def _pick(self) -> tuple[ServedModel, str]:
        if self.candidate is None or self._split is None:
            return self.main, "main"
        return (
            (self.candidate, "candidate")
            if self._split.next_is_candidate()
            else (self.main, "main")
        )

    # -- checks ---------------------------------------------------------------------------
    def authorize(self, header: str | None) -> None:
        """Check the bearer token (401 when it is missing or wrong)."""
        if self.token_sha256 is None:
            return
        scheme, _, given = (header or "").partition(" ")
        digest = token_digest(given.strip()) or ""
        if scheme.lower() != "bearer" or not hmac.compare_digest(digest, self.token_sha256):
            raise ServeError(401, "missing or wrong bearer token (Authorization: Bearer <token>)")

    def _options(self, body: Any) -> tuple[int, float, int | None]:
        if not isinstance(body, dict):
            raise ServeError(400, f"the body must be a JSON object, got {type(body).__name__}")
        model = body.get("model", self.model_name)
        if model != self.model_name:
            raise ServeError(
                404, f"model {model!r} is not served here; allowed: {self.model_name!r}"
            )
        if body.get("n", 1) != 1 or body.get("stream", False):
            raise ServeError(422, "n must be 1 and stream false (one completion per request)")
        max_tokens = body.get("max_tokens", self.max_new_tokens)
        if (
            isinstance(max_tokens, bool)
            or not isinstance(max_tokens, int)
            or not 1 <= max_tokens <= self.max_new_tokens
        ):
            raise ServeError(
                422,
                f"max_tokens must be an integer in [1, {self.max_new_tokens}], got {max_tokens!r}",
            )
        temperature = body.get("temperature", self.temperature)
        if (
            isinstance(temperature, bool)
            or not isinstance(temperature, int | float)
            or not (math.isfinite(temperature) and 0.0 <= temperature <= 2.0)
        ):
            raise ServeError(422, f"temperature must be a number in [0, 2], got {temperature!r}")
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ServeError(422, f"seed must be a non-negative integer, got {seed!r}")
        return max_tokens, float(temperature), seed

    # -- endpoints ------------------------------------------------------------------------
    def complete(self, body: Any, authorization: str | None = None) -> dict[str, Any]:
        """``POST /v1/completions``: one completion of ``prompt`` (a string)."""
        self.authorize(authorization)
        max_tokens, temperature, seed = self._options(body)
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt or len(prompt) > MAX_PROMPT_CHARS:
            raise ServeError(
                422, f"prompt must be a non-empty string of at most {MAX_PROMPT_CHARS} characters"
            )
        gen = self._generate(prompt, max_tokens, temperature, seed)
        return self._response(gen, "text_completion", {"text": gen.completion})

    def chat(self, body: Any, authorization: str | None = None) -> dict[str, Any]:
        """``POST /v1/chat/completions``: the assistant's reply to ``messages``."""
        self.authorize(authorization)
        max_tokens, temperature, seed = self._options(body)
        messages = body.get("messages")
        if (
            not isinstance(messages, list)
            or not messages
            or not all(
                isinstance(m, dict)
                and isinstance(m.get("content"), str)
                and m.get("role") in ("system", "user", "assistant")
                for m in messages
            )
        ):
            raise ServeError(
                422,
                "messages must be a non-empty list of {role: system|user|assistant, content: string}",
            )
        prompt = chat_prompt(self.main.tokenizer, messages)
        gen = self._generate(prompt, max_tokens, temperature, seed)
        reply = {"message": {"role": "assistant", "content": gen.completion}}
        return self._response(gen, "chat.completion", reply)

    def feedback(self, body: Any, authorization: str | None = None) -> dict[str, Any]:
        """``POST /v1/feedback``: record a verdict on a served completion (idempotent)."""
        self.authorize(authorization)
        try:
            recorded = self.store.record_feedback(parse_feedback(body))
        except FeedbackError as exc:
            raise ServeError(exc.status, str(exc)) from None
        if recorded and self.on_feedback is not None:
            self.on_feedback(self.store.pending())
        return {"request_id": body["request_id"], "recorded": recorded}

    def models(self, authorization: str | None = None) -> dict[str, Any]:
        """``GET /v1/models``."""
        self.authorize(authorization)
        entry = {"id": self.model_name, "object": "model", "owned_by": "rlpipe"}
        return {"object": "list", "data": [entry]}

    def health(self) -> dict[str, Any]:
        """``GET /health`` (no token): the versions served."""
        versions = {"main": self.main.version}
        if self.candidate is not None:
            versions["candidate"] = self.candidate.version
        return {
            "status": "ok",
            "weight_versions": versions,
            "pending_feedback": self.store.pending(),
        }

    # -- generation -----------------------------------------------------------------------
    def _generate(
        self, prompt: str, max_tokens: int, temperature: float, seed: int | None
    ) -> Generation:
        request_id = new_request_id()
        with self._lock:
            served, variant = self._pick()
            tokenizer = served.tokenizer
            prompt_ids = list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
            if not prompt_ids:
                raise ServeError(422, "prompt has no tokens")
            eos = tokenizer.eos_token_id
            sampling = SamplingParams(
                max_new_tokens=max_tokens,
                temperature=max(temperature, 1e-5),
                greedy=temperature == 0.0,
                stop_token_ids=(eos,) if eos is not None else (),
            )
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
            with torch.no_grad():
                out = hf_generate(served.model, [prompt_ids], sampling, int(pad), seed)
        ids, logprobs = list(out.response_ids[0]), [float(x) for x in out.logprobs[0]]
        gen = Generation(
            request_id=request_id,
            weight_version=served.version,
            variant=variant,
            prompt=prompt,
            completion=tokenizer.decode(ids, skip_special_tokens=True),
            prompt_ids=prompt_ids,
            completion_ids=ids,
            logprobs=logprobs,
            finished=bool(out.finished[0]),
        )
        self.store.record_generation(gen)  # on disk before the response leaves
        return gen

    def _response(self, gen: Generation, kind: str, choice: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": gen.request_id,
            "object": kind,
            "created": int(gen.created if gen.created else time.time()),
            "model": self.model_name,
            "choices": [
                {"index": 0, **choice, "finish_reason": "stop" if gen.finished else "length"}
            ],
            "usage": {
                "prompt_tokens": len(gen.prompt_ids),
                "completion_tokens": len(gen.completion_ids),
                "total_tokens": len(gen.prompt_ids) + len(gen.completion_ids),
            },
            "rlpipe": {"weight_version": gen.weight_version, "variant": gen.variant},
        }


def chat_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The prompt text of chat ``messages``.

    The tokenizer's chat template when it has one, else each message's content on its own
    line.
    """
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n".join(m["content"] for m in messages)
