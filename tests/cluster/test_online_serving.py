"""The policy server on Ray Serve (127.0.0.1): OpenAI-compatible completions stored before
they return, feedback refused or recorded once over HTTP, new weights swapped in without a
dropped request."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from infra.processes import free_port
from kinds.online.deployment import ServerSettings, Weights, start_policy_server, update_weights
from kinds.online.service import token_digest
from kinds.online.simulated_user import SimulatedUser
from kinds.online.store import FeedbackStore
from rl_core.data.arithmetic import ArithmeticTask
from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.online.simulated_user import QuestionPlan

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server(
    ray_local: None, tiny_lm_one_layer: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, ServerSettings]]:
    from ray import serve

    folder = tmp_path_factory.mktemp("online")
    settings = ServerSettings(
        "tiny",
        str(folder / "feedback.db"),
        str(folder / "current.json"),
        token_digest(TOKEN),
        max_new_tokens=4,
    )
    url = start_policy_server(settings, Weights(0, tiny_lm_one_layer), port=free_port())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    yield url, settings
    serve.shutdown()


def test_completions_need_the_token_and_are_stored_before_they_return(server) -> None:
    url, settings = server
    body = {"model": "tiny", "prompt": "12+7=", "max_tokens": 3}
    refused = httpx.post(f"{url}/v1/completions", json=body, timeout=30)
    assert refused.status_code == 401 and "bearer token" in refused.json()["error"]["message"]
    out = httpx.post(f"{url}/v1/completions", json=body, headers=AUTH, timeout=30)
    assert out.status_code == 200, out.text
    answer = out.json()
    gen = FeedbackStore(settings.store).generation(answer["id"])
    assert gen is not None and gen.completion == answer["choices"][0]["text"]
    assert answer["rlpipe"]["weight_version"] == 0
    chat = httpx.post(
        f"{url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "3+4="}]},
        headers=AUTH,
        timeout=30,
    )
    assert chat.status_code == 200 and chat.json()["object"] == "chat.completion"
    models = httpx.get(f"{url}/v1/models", headers=AUTH, timeout=30).json()
    assert [m["id"] for m in models["data"]] == ["tiny"]


def test_feedback_over_http_is_validated_and_idempotent(server) -> None:
    url, settings = server
    rid = httpx.post(
        f"{url}/v1/completions", json={"prompt": "1+1="}, headers=AUTH, timeout=30
    ).json()["id"]
    post = lambda body: httpx.post(  # noqa: E731
        f"{url}/v1/feedback", content=body, headers={**AUTH, "content-type": "application/json"}
    )
    ok = post(json.dumps({"request_id": rid, "accepted": True}))
    assert ok.status_code == 200 and ok.json() == {"request_id": rid, "recorded": True}
    assert post(json.dumps({"request_id": rid, "accepted": True})).json()["recorded"] is False
    refusals = {
        "{not json": 400,
        json.dumps({"request_id": rid, "accepted": False}): 409,
        json.dumps({"request_id": "cmpl-" + "e" * 32, "accepted": True}): 404,
        json.dumps({"request_id": rid, "score": "high"}): 422,
        json.dumps({"request_id": rid, "accepted": True, "score": 1}): 422,
    }
    for body, status in refusals.items():
        answer = post(body)
        assert answer.status_code == status, (body, answer.text)
        assert answer.json()["error"]["message"]
    store = FeedbackStore(settings.store)
    assert store.pending() == 1


def test_the_simulated_user_asks_and_judges_through_the_endpoint(server) -> None:
    url, settings = server
    before = FeedbackStore(settings.store).pending()
    plan = QuestionPlan(ArithmeticTask().heldout(20), noise=0.0, seed=0)
    user = SimulatedUser(url, plan, token=TOKEN, model="tiny")
    talks = user.run(5)
    user.close()
    assert len({t.request_id for t in talks}) == 5
    assert all(t.accepted == t.correct for t in talks)  # no noise: the rule's verdict
    store = FeedbackStore(settings.store)
    assert store.pending() == before + 5
    assert all(store.generation(t.request_id).completion == t.completion for t in talks)


def test_new_weights_are_swapped_in_without_a_dropped_request(server, tmp_path: Path) -> None:
    url, settings = server
    second = create_tiny_lm(tmp_path / "v1", seed=1, num_hidden_layers=1)
    answers: list[httpx.Response] = []

    def keep_asking() -> None:
        with httpx.Client(timeout=60) as client:
            for _ in range(30):
                answers.append(
                    client.post(f"{url}/v1/completions", json={"prompt": "5+5="}, headers=AUTH)
                )

    asker = threading.Thread(target=keep_asking)
    asker.start()
    update_weights(Weights(1, str(second)), settings.weights_file)
    asker.join()
    assert [a.status_code for a in answers] == [200] * 30
    versions = [a.json()["rlpipe"]["weight_version"] for a in answers]
    assert versions == sorted(versions)  # never back to the old version
    assert httpx.get(f"{url}/health", timeout=5).json()["weight_versions"] == {"main": 1}
    after = httpx.post(f"{url}/v1/completions", json={"prompt": "5+5="}, headers=AUTH, timeout=30)
    assert after.json()["rlpipe"]["weight_version"] == 1
