"""Tiny LM builder, padding layout, HF generation with log-probs, CausalLMPolicy."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rl_core.llm import SamplingParams, hf_generate, pad_left, pad_right, sequences_from_padded
from rl_core.models.causal_lm import CausalLMPolicy
from rl_core.models.tiny_lm import build_char_tokenizer, create_tiny_lm


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return create_tiny_lm(tmp_path_factory.mktemp("tiny") / "lm", num_hidden_layers=2)


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    return model, AutoTokenizer.from_pretrained(tiny_dir)


def test_tokenizer_is_lossless_and_reloads_identically(tiny):
    _, loaded = tiny
    fresh = build_char_tokenizer()
    text = "12+7=19 \\boxed{3}\n#### 1,234 é"
    ids = loaded(text)["input_ids"]
    assert ids == fresh(text)["input_ids"]
    assert len(ids) == len(text.encode())  # one token per byte
    assert loaded.decode(ids) == text
    assert (loaded.pad_token_id, loaded.eos_token_id, len(loaded)) == (0, 1, 260)


def test_chat_template_is_saved(tmp_path):
    template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
    out = create_tiny_lm(tmp_path / "chat", num_hidden_layers=1, chat_template=template)
    tok = AutoTokenizer.from_pretrained(out)
    text = tok.apply_chat_template([{"role": "user", "content": "1+1="}], tokenize=False)
    assert text == "<user>1+1="


def test_padding_layout_round_trip():
    seqs = [[5, 6, 7], [8], []]
    ids, mask = pad_left(seqs, pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8], [0, 0, 0]]
    assert sequences_from_padded(ids, mask) == seqs
    ids, mask = pad_right(seqs, pad_id=0, length=4)
    assert ids.tolist() == [[5, 6, 7, 0], [8, 0, 0, 0], [0, 0, 0, 0]]
    assert mask.sum(1).tolist() == [3, 1, 0]
    with pytest.raises(ValueError, match="more than 2"):
        pad_left(seqs, pad_id=0, length=2)


def test_generation_is_seeded_and_logprobs_match_a_forward_pass(tiny):
    model, tok = tiny
    prompts = [tok(p)["input_ids"] for p in ("1+2=", "13+27=", "5+5=")]
    sampling = SamplingParams(max_new_tokens=6, temperature=0.7, stop_token_ids=(tok.eos_token_id,))
    first = hf_generate(model, prompts, sampling, tok.pad_token_id, seed=3)
    again = hf_generate(model, prompts, sampling, tok.pad_token_id, seed=3)
    assert first.response_ids == again.response_ids
    assert all(1 <= len(r) <= 6 for r in first.response_ids)
    policy = CausalLMPolicy(model, tok)
    p_ids, p_mask = pad_left(prompts, tok.pad_token_id)
    r_ids, r_mask = pad_right(first.response_ids, tok.pad_token_id)
    with torch.no_grad():
        out = policy.forward(
            "default_forward",
            forward_inputs={
                "prompt_ids": p_ids,
                "prompt_mask": p_mask,
                "response_ids": r_ids,
                "response_mask": r_mask,
            },
            temperature=0.7,
        )
    for row, logprobs in enumerate(first.logprobs):
        recomputed = out["logprobs"][row, : len(logprobs)]
        torch.testing.assert_close(recomputed, torch.tensor(logprobs), atol=1e-5, rtol=0)
    assert out["entropy"].shape == r_ids.shape and bool((out["entropy"] >= 0).all())


def test_stop_token_ends_a_response(tiny):
    model, tok = tiny
    prompts = [tok("7+1=")["input_ids"]]
    # every token id is a stop token: each response stops after its first token
    sampling = SamplingParams(max_new_tokens=5, stop_token_ids=tuple(range(len(tok))))
    out = hf_generate(model, prompts, sampling, tok.pad_token_id, seed=0)
    assert len(out.response_ids[0]) == 1 and out.finished == [True]


def test_greedy_eval_ignores_seed(tiny):
    model, tok = tiny
    policy = CausalLMPolicy(model, tok)
    obs = {"prompt_ids": [tok("4+4=")["input_ids"]]}
    a, _ = policy.predict_action_batch(obs, mode="eval", seed=1)
    b, result = policy.predict_action_batch(obs, mode="eval", seed=2)
    assert a == b
    assert set(result["forward_inputs"]) == {
        "prompt_ids",
        "prompt_mask",
        "response_ids",
        "response_mask",
    }


def test_value_head_gives_per_token_values(tiny):
    model, tok = tiny
    policy = CausalLMPolicy(model, tok, value_head=True)
    ids, mask = pad_left([tok("1+1=")["input_ids"]], 0)
    resp, rmask = pad_right([[53, 1]], 0)
    fi = {"prompt_ids": ids, "prompt_mask": mask, "response_ids": resp, "response_mask": rmask}
    out = policy.forward("default_forward", forward_inputs=fi, compute_values=True)
    assert out["values"].shape == (1, 2)
    with pytest.raises(ValueError, match="no value head"):
        CausalLMPolicy(model, tok).forward(
            "default_forward", forward_inputs=fi, compute_values=True
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"temperature": 0.0}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
    ],
)
def test_bad_sampling_params(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SamplingParams(**kwargs)


@pytest.mark.parametrize("greedy", [False, True])
def test_streamed_logprobs_equal_those_of_every_steps_stored_logits(tiny, greedy):
    """The step-by-step recorder gives exactly the log-probs of HF's stored raw logits, and
    the same tokens (it changes nothing generate samples), with top-k/top-p after it."""
    from rl_core.llm.logprobs import logprobs_from_logits

    model, tok = tiny
    prompts = [tok(p)["input_ids"] for p in ("1+2=", "13+27=", "5+5=", "99+1=")]
    sampling = SamplingParams(
        max_new_tokens=7,
        temperature=0.8,
        top_k=5,
        top_p=0.9,
        greedy=greedy,
        stop_token_ids=(tok.eos_token_id,),
    )
    ours = hf_generate(model, prompts, sampling, tok.pad_token_id, seed=11)
    torch.manual_seed(11)
    ids, mask = pad_left(prompts, tok.pad_token_id)
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=7,
        do_sample=not greedy,
        temperature=None if greedy else 0.8,
        top_k=None if greedy else 5,
        top_p=None if greedy else 0.9,
        eos_token_id=[tok.eos_token_id],
        pad_token_id=tok.pad_token_id,
        output_logits=True,
        return_dict_in_generate=True,
    )
    tokens = out.sequences[:, ids.shape[1] :]
    stored = logprobs_from_logits(torch.stack(out.logits, dim=1), tokens, 1.0 if greedy else 0.8)
    for row, (response, logprobs) in enumerate(zip(ours.response_ids, ours.logprobs, strict=True)):
        assert response == tokens[row, : len(response)].tolist()
        assert torch.equal(torch.tensor(logprobs), stored[row, : len(logprobs)])
