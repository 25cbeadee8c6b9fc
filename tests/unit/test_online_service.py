"""The serving endpoint's logic on the tiny LM: completions stored before they return,
feedback checked and recorded once, tokens, versions and A/B variants."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinds.online.service import OnlineService, ServedModel, ServeError, token_digest
from kinds.online.store import FeedbackStore
from rl_core.models.tiny_lm import create_tiny_lm


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


@pytest.fixture
def service(lm_dir: Path, tmp_path: Path) -> OnlineService:
    store = FeedbackStore(tmp_path / "feedback.db")
    return OnlineService(ServedModel.load(str(lm_dir), 0), store, "tiny", max_new_tokens=6)


def test_a_completion_is_stored_with_its_tokens_logprobs_and_version(
    service: OnlineService,
) -> None:
    out = service.complete({"prompt": "12+7=", "max_tokens": 4, "seed": 3})
    assert out["object"] == "text_completion" and out["model"] == "tiny"
    assert out["id"].startswith("cmpl-") and out["rlpipe"] == {
        "weight_version": 0,
        "variant": "main",
    }
    gen = service.store.generation(out["id"])
    assert gen is not None and gen.prompt == "12+7=" and gen.completion == out["choices"][0]["text"]
    assert len(gen.completion_ids) == len(gen.logprobs) == out["usage"]["completion_tokens"] <= 4
    assert all(lp <= 0.0 for lp in gen.logprobs)
    tokenizer = service.main.tokenizer
    assert gen.prompt_ids == tokenizer("12+7=", add_special_tokens=False)["input_ids"]
    again = service.complete({"prompt": "12+7=", "max_tokens": 4, "seed": 3})
    assert again["choices"][0]["text"] == out["choices"][0]["text"]  # seeded
    assert again["id"] != out["id"]


def test_chat_completions_answer_messages(service: OnlineService) -> None:
    out = service.chat({"messages": [{"role": "user", "content": "3+4="}], "temperature": 0})
    assert out["object"] == "chat.completion"
    assert out["choices"][0]["message"]["role"] == "assistant"
    assert service.store.generation(out["id"]).prompt == "3+4="


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("12+7=", 400, "must be a JSON object"),
        ({"prompt": ""}, 422, "prompt must be a non-empty string"),
        ({"prompt": 5}, 422, "prompt must be"),
        ({"prompt": "1+1=", "model": "gpt"}, 404, "model 'gpt' is not served here"),
        ({"prompt": "1+1=", "max_tokens": 7}, 422, r"max_tokens must be an integer in \[1, 6\]"),
        ({"prompt": "1+1=", "max_tokens": "2"}, 422, "max_tokens"),
        ({"prompt": "1+1=", "temperature": -1}, 422, "temperature"),
        ({"prompt": "1+1=", "seed": -1}, 422, "seed"),
        ({"prompt": "1+1=", "n": 2}, 422, "n must be 1"),
        ({"prompt": "1+1=", "stream": True}, 422, "stream false"),
    ],
)
def test_bad_completion_requests_are_refused(
    service: OnlineService, body: object, status: int, message: str
) -> None:
    with pytest.raises(ServeError, match=message) as caught:
        service.complete(body)
    assert caught.value.status == status
    assert service.store.pending() == 0


def test_feedback_is_recorded_once_and_bad_feedback_never_stored(service: OnlineService) -> None:
    seen: list[int] = []
    service.on_feedback = seen.append
    rid = service.complete({"prompt": "1+1="})["id"]
    assert service.feedback({"request_id": rid, "accepted": True}) == {
        "request_id": rid,
        "recorded": True,
    }
    assert service.feedback({"request_id": rid, "accepted": True})["recorded"] is False
    assert seen == [1]  # the retry does not count again
    bad = [
        ({"request_id": rid, "accepted": False}, 409),
        ({"request_id": "cmpl-" + "f" * 32, "accepted": True}, 404),
        ({"request_id": rid, "score": 2}, 422),
        ({"request_id": rid}, 422),
        (["x"], 400),
    ]
    for body, status in bad:
        with pytest.raises(ServeError) as caught:
            service.feedback(body)
        assert caught.value.status == status, body
    assert service.store.pending() == 1


def test_a_token_is_required_when_set(service: OnlineService) -> None:
    service.token_sha256 = token_digest("s3cret")
    for header in (None, "Bearer wrong", "s3cret", "Basic s3cret"):
        with pytest.raises(ServeError) as caught:
            service.complete({"prompt": "1+1="}, header)
        assert caught.value.status == 401
    assert service.complete({"prompt": "1+1="}, "Bearer s3cret")["id"]
    assert service.health()["status"] == "ok"  # health needs no token


def test_swaps_and_ab_splits_tag_each_response_with_its_version(
    service: OnlineService, lm_dir: Path
) -> None:
    service.swap(ServedModel.load(str(lm_dir), 5))
    assert service.complete({"prompt": "1+1="})["rlpipe"]["weight_version"] == 5
    service.split(ServedModel.load(str(lm_dir), 6), 0.5)
    tags = [service.complete({"prompt": "1+1="})["rlpipe"] for _ in range(6)]
    variants = [(t["variant"], t["weight_version"]) for t in tags]
    assert variants == [("main", 5), ("candidate", 6)] * 3  # an even split, every second one
    assert service.health()["weight_versions"] == {"main": 5, "candidate": 6}
    with pytest.raises(ValueError, match="share"):
        service.split(ServedModel.load(str(lm_dir), 7), 1.0)
