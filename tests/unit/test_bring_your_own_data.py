"""Bring your own data: Hugging Face datasets (``data.source: hf``), verl's Parquet rows,
chat-message prompts, over-long prompts, and source options checked like other fields."""

from __future__ import annotations

from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rl_core.config import load_config
from rl_core.config.loader import ConfigError
from rl_core.data.prompts import DataFileError, PromptSample, load_prompt_file
from rl_core.llm.prompting import PromptError, fit_prompts, load_task_samples, prompt_text

GSM8K_ROWS = [
    {"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "A box holds 2 rows of 6 eggs. How many eggs?", "answer": "2*6=12\n#### 12"},
    {"question": "What is 10 - 3?", "answer": "#### 7"},
]


def verl_row(question: str, answer: str, index: int) -> dict:
    """A row as verl's examples/data_preprocess/gsm8k.py writes it."""
    return {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": f"{question} Let's think step by step."}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {"split": "train", "index": index, "question": question},
    }


def data_config(*overrides: str):
    return load_config("grpo_arith", list(overrides)).data


@pytest.fixture(scope="module")
def saved_dataset(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gsm8k_like")
    train = datasets.Dataset.from_list(GSM8K_ROWS * 4)
    test = datasets.Dataset.from_list(
        [{"problem": "What is 2 + 2?", "solution": 4, "level": "easy"}]
    )
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(str(folder))
    return folder


def test_a_saved_dataset_dict_its_splits_and_rows_named_by_location(saved_dataset):
    data = data_config("data.source=hf", f"data.options={{path: {saved_dataset}}}")
    train, held = load_task_samples(data)
    assert len(train) == 12 and train[0].answer == "7" and train[1].answer == "12"
    assert train[0].source == f"{saved_dataset}[train] row 1"
    assert held == []
    # the test split has other columns, which the default keys do not name
    with_test = data_config(
        "data.source=hf", f"data.options={{path: {saved_dataset}, eval_split: test}}"
    )
    with pytest.raises(DataFileError, match=r"\[test\] row 1: missing prompt column 'prompt'"):
        load_task_samples(with_test)


def test_a_split_slice_and_extra_columns_reach_the_fields(saved_dataset):
    folder = saved_dataset.parent / "problems"
    rows = [{"problem": f"{i} + 1 = ?", "solution": i + 1, "level": "easy"} for i in range(10)]
    datasets.Dataset.from_list(rows).save_to_disk(str(folder))
    data = data_config(
        "data.source=hf",
        f"data.options={{path: {folder}, split: 'train[:80%]', eval_split: 'train[80%:]'}}",
        "data.prompt_key=problem",
        "data.answer_key=solution",
    )
    train, held = load_task_samples(data)
    assert [s.answer for s in train] == [str(i + 1) for i in range(8)]
    assert [s.answer for s in held] == ["9", "10"]
    assert held[0].fields == {"level": "easy"}


def test_data_files_through_a_datasets_builder(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"prompt": "1+1=", "answer": "2"}\n{"prompt": "2+2=", "answer": 4}\n')
    data = data_config("data.source=hf", f"data.options={{path: json, data_files: [{path}]}}")
    train, held = load_task_samples(data)
    assert [(s.prompt, s.answer) for s in train] == [("1+1=", "2"), ("2+2=", "4")]
    assert held == []


def test_a_missing_split_and_a_missing_dataset_are_named(saved_dataset, tmp_path):
    data = data_config("data.source=hf", f"data.options={{path: {saved_dataset}, split: dev}}")
    with pytest.raises(DataFileError, match="no split 'dev'; it has: train, test"):
        load_task_samples(data)
    missing = data_config("data.source=hf", f"data.options={{path: {tmp_path / 'nope'}}}")
    with pytest.raises(DataFileError, match="cannot load split 'train' of dataset"):
        load_task_samples(missing)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.source=hf"], r"data.options.path.*Field required.*options: path, name"),
        (["data.source=hf", "data.options={path: x, splt: a}"], r"data.options.splt.*Extra"),
        (["data.options={path: x}"], "'arithmetic' takes no options"),
    ],
)
def test_source_options_are_checked_with_the_config(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config("grpo_arith", overrides)


def test_verl_parquet_rows_are_read_as_they_are(tmp_path):
    path = tmp_path / "train.parquet"
    rows = [
        verl_row(r["question"], r["answer"].rsplit("#### ", 1)[1], i)
        for i, r in enumerate(GSM8K_ROWS)
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    samples, problems = load_prompt_file(path)
    assert problems == []
    first = samples[0]
    assert first.answer == "7"
    assert first.messages == (
        {
            "role": "user",
            "content": "Tom has 3 apples and buys 4. How many? Let's think step by step.",
        },
    )
    assert first.prompt == first.messages[0]["content"]
    assert first.fields["data_source"] == "openai/gsm8k"
    assert first.fields["extra_info"]["index"] == 0
    assert first.fields["reward_model"]["ground_truth"] == "7"


class ChatTokenizer:
    """A tokenizer with a chat template: enough for prompt rendering and lengths."""

    chat_template = "role-tagged"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert not tokenize and add_generation_prompt
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def __call__(self, text, add_special_tokens):
        return {"input_ids": list(range(len(text.split())))}


def test_chat_messages_are_rendered_with_the_chat_template_and_system_prompt():
    data = data_config("data.system_prompt=Be brief.")
    sample = PromptSample(
        "2+2?", "4", messages=({"role": "user", "content": "2+2?"},), source="t:1"
    )
    assert prompt_text(sample, data, ChatTokenizer()) == "<system>Be brief.<user>2+2?<assistant>"
    plain = ChatTokenizer()
    plain.chat_template = None
    assert prompt_text(sample, data, plain) == "Be brief.\n2+2?"


def test_over_long_prompts_stop_the_run_or_are_left_out_and_counted(caplog):
    samples = [
        PromptSample("short one", "1", source="a:1"),
        PromptSample("w " * 50, "2", source="a:2"),
    ]
    strict = data_config("data.max_prompt_length=8", "data.apply_chat_template=false")
    with pytest.raises(PromptError, match="prompt of a:2 has 50 tokens.*filter_overlong_prompts"):
        fit_prompts(samples, strict, ChatTokenizer())
    lenient = data_config(
        "data.max_prompt_length=8",
        "data.apply_chat_template=false",
        "data.filter_overlong_prompts=true",
    )
    kept, ids = fit_prompts(samples, lenient, ChatTokenizer())
    assert [s.source for s in kept] == ["a:1"] and len(ids) == 1
    assert "left out 1 of 2 prompts longer than data.max_prompt_length = 8" in caplog.text
    with pytest.raises(PromptError, match="all 1 prompts are longer"):
        fit_prompts(samples[1:], lenient, ChatTokenizer())
