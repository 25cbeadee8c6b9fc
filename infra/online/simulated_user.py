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
    """

    def __init__(
        self,
        url: str,
        plan: QuestionPlan,
        token: str | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.plan = plan
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.model = model
        self.max_tokens = max_tokens
        self.client = httpx.Client(timeout=timeout, headers=self.headers)

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()

    def _post(self, path: str, body: dict) -> dict:
        for attempt in range(5):  # a restarting server: retry, feedback is idempotent
            try:
                answer = self.client.post(f"{self.url}{path}", json=body)
            except httpx.TransportError as exc:
                logger.warning("simulated user: %s failed (%s); retrying", path, exc)
                time.sleep(0.5 * (attempt + 1))
                continue
            if answer.status_code >= 500:
                time.sleep(0.5 * (attempt + 1))
                continue
            if answer.status_code >= 400:
                raise RuntimeError(
                    f"simulated user: {path} answered {answer.status_code}: {answer.text[:500]}"
                )
            return answer.json()
        raise RuntimeError(f"simulated user: {self.url}{path} did not answer after 5 tries")

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
