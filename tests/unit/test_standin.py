"""The Qwen2.5-0.5B-Instruct stand-in: its shape, its tokenizer's chat format, and rollouts
that ignore its generation_config's sampling defaults; GSM8K-format data from the build
script."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from rl_core.data import load_prompt_file
from rl_core.llm.generation import SamplingParams, hf_generate
from rl_core.llm.logprobs import logprobs_from_logits
from rl_core.models.standin import create_standin
from scripts.build_standin import TEST_FILE, TRAIN_FILE, gsm8k_rows, write_gsm8k


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_standin(tmp_path_factory.mktemp("standin") / "model")


def test_the_standin_has_qwen2_5_shape_but_tiny_sizes(standin: Path) -> None:
    config = AutoConfig.from_pretrained(standin)
    assert config.model_type == "qwen2" and config.architectures == ["Qwen2ForCausalLM"]
    assert config.rope_parameters["rope_theta"] == 1_000_000.0
    assert config.rms_norm_eps == 1e-6 and config.tie_word_embeddings
    assert config.max_position_embeddings == 32768 and not config.use_sliding_window
    assert (config.num_hidden_layers, config.hidden_size) == (2, 64)
    assert config.num_attention_heads > config.num_key_value_heads  # grouped-query attention
    assert list(standin.glob("*.safetensors")) and not list(standin.glob("*.bin"))


def test_the_standin_tokenizer_speaks_qwen_chatml(standin: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(standin)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.bos_token is None
    messages = [{"role": "system", "content": "Think."}, {"role": "user", "content": "1+2?"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nThink.<|im_end|>\n<|im_start|>user\n1+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    default = tokenizer.apply_chat_template(messages[1:], tokenize=False)
    assert default.startswith(
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
        "assistant.<|im_end|>\n<|im_start|>user\n"
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 3  # one token each
    assert tokenizer.decode(ids) == text


def test_rollouts_ignore_the_models_sampling_defaults(standin: Path) -> None:
    """Qwen2.5-Instruct's generation_config sets a repetition penalty, temperature, top-k
    and top-p; the rollout must sample from the policy at the run's own settings, whose
    log-probs the trainer recomputes."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(standin).eval()
    tokenizer = AutoTokenizer.from_pretrained(standin)
    saved = model.generation_config
    assert saved.repetition_penalty != 1.0 and saved.top_k == 20
    prompts = [tokenizer("aaaa bbbb aaaa", add_special_tokens=False)["input_ids"]] * 3
    for greedy in (False, True):
        sampling = SamplingParams(max_new_tokens=20, greedy=greedy, stop_token_ids=(2,))
        out = hf_generate(model, prompts, sampling, tokenizer.pad_token_id, seed=0)
        for prompt, response, recorded in zip(prompts, out.response_ids, out.logprobs, strict=True):
            ids = torch.tensor([prompt + response])
            with torch.no_grad():
                logits = model(input_ids=ids).logits[:, len(prompt) - 1 : -1]
            expected = logprobs_from_logits(logits.float(), ids[:, len(prompt) :], 1.0)[0]
            assert torch.allclose(torch.tensor(recorded), expected, atol=1e-5)
            if greedy:
                assert logits[0].argmax(-1).tolist() == response
    assert model.generation_config is saved  # exports keep the model's own defaults


def test_generated_gsm8k_rows_load_as_question_and_final_answer(tmp_path: Path) -> None:
    root = write_gsm8k(tmp_path / "gsm8k", train=12, test=4, seed=3)
    samples, problems = load_prompt_file(root / TRAIN_FILE)
    rows = gsm8k_rows(12, seed=3)
    assert not problems and len(samples) == 12
    for sample, row in zip(samples, rows, strict=True):
        assert sample.prompt == row["question"]
        assert "####" in row["answer"] and sample.answer == row["answer"].split("#### ")[-1]
        assert sample.answer.isdigit() and sample.fields["solution"] == row["answer"]
    assert len(load_prompt_file(root / TEST_FILE)[0]) == 4
