"""The scripted user talking to the policy server over HTTP (tests and ``online_arith``).

Each interaction requests a completion of an arithmetic prompt from ``/v1/completions`` and
posts the verdict (:class:`~rl_core.online.simulated_user.QuestionPlan`) to
``/v1/feedback``, as a client of the endpoint would.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import httpx

from rl_core.online.simulated_user import QuestionPlan, is_correct

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Interaction:
    """One question, its served answer and the verdict posted.

    Attributes:
        request_id: The completion's request id.
        prompt: The question.
        completion: The served answer.
        correct: Whether it was right (the rule).
        accepted: The verdict posted (noise may flip it).
        weight_version: The version that answered.
        variant: ``main`` or ``candidate``.
    """

    request_id: str
    prompt: str
    completion: str
    correct: bool
    accepted: bool
    weight_version: int
    variant: str


class SimulatedUser:
    """Asks the server questions and judges its answers.

    Args:
        url: The server's base URL (``http://127.0.0.1:8000``).
        plan: The questions and verdict noise.
        token: The bearer token (None: none sent).
        model: The served model's name.
        max_tokens: Longest answer asked for (None: the server's default).
        timeout: Seconds per HTTP call.
        retry_for: Seconds to keep retrying a call the server does not answer (a replica
            restarting) before failing.
    """

    def __init__(
        self,
        url: str,
        plan: QuestionPlan,
        token: str | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        timeout: float = 60.0,
        retry_for: float = 180.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.plan = plan
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.model = model
        self.max_tokens = max_tokens
        self.retry_for = retry_for
        self.client = httpx.Client(timeout=timeout, headers=self.headers)

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()

    def _post(self, path: str, body: dict) -> dict:
        """POST, retrying while the server restarts.

        Feedback is idempotent; a completion asked again gets a new request id, and the
        unanswered one is never trained on.
        """
        deadline = time.monotonic() + self.retry_for
        wait = 0.25
        while True:
            try:
                answer = self.client.post(f"{self.url}{path}", json=body)
                problem = None if answer.status_code < 500 else f"status {answer.status_code}"
            except httpx.TransportError as exc:
                problem = str(exc) or type(exc).__name__
            if problem is None:
                break
            if time.monotonic() + wait > deadline:
                raise RuntimeError(
                    f"simulated user: {self.url}{path} did not answer within {self.retry_for:.0f}"
                    f" s ({problem})"
                )
            logger.warning("simulated user: %s failed (%s); retrying", path, problem)
            time.sleep(wait)
            wait = min(wait * 2, 5.0)
        if answer.status_code >= 400:
            raise RuntimeError(
                f"simulated user: {path} answered {answer.status_code}: {answer.text[:500]}"
            )
        return answer.json()

    def interact(self) -> Interaction:
        """Ask one question and post the verdict on the answer."""
        question = self.plan.next()
        body: dict = {"prompt": question.sample.prompt, "seed": question.seed}
        if self.model:
            body["model"] = self.model
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        out = self._post("/v1/completions", body)
        completion = out["choices"][0]["text"]
        accepted = QuestionPlan.verdict(question, completion)
        self._post("/v1/feedback", {"request_id": out["id"], "accepted": accepted})
        return Interaction(
            out["id"],
            question.sample.prompt,
            completion,
            is_correct(completion, question.sample.answer),
            accepted,
            int(out["rlpipe"]["weight_version"]),
            out["rlpipe"]["variant"],
        )

    def run(self, count: int) -> list[Interaction]:
        """``count`` interactions, one after another."""
        return [self.interact() for _ in range(count)]
