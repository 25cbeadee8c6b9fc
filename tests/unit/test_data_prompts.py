"""load_prompt_file / load_prompts: JSON Lines and Parquet rows, GSM8K rows, bad-row handling."""

import json
import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rl_core.data import DataFileError, PromptSample, RowProblem, load_prompt_file, load_prompts


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_good_rows_keep_extra_fields_and_source(tmp_path):
    path = write_lines(
        tmp_path / "train.jsonl",
        [
            json.dumps({"prompt": "1+1=", "answer": "2", "level": 1}),
            json.dumps({"prompt": "2*3=", "answer": 6}),
            json.dumps({"prompt": "half", "answer": 0.5, "tags": ["x"]}),
        ],
    )
    samples, problems = load_prompt_file(path)
    assert problems == []
    assert samples == [
        PromptSample("1+1=", "2", {"level": 1}, f"{path}:1"),
        PromptSample("2*3=", "6", {}, f"{path}:2"),
        PromptSample("half", "0.5", {"tags": ["x"]}, f"{path}:3"),
    ]


def test_custom_keys(tmp_path):
    path = write_lines(tmp_path / "q.json", [json.dumps({"q": "Why?", "a": "Because", "id": 7})])
    samples, _ = load_prompt_file(path, prompt_key="q", answer_key="a")
    assert samples == [PromptSample("Why?", "Because", {"id": 7}, f"{path}:1")]


def test_gsm8k_rows_use_final_answer_and_keep_solution(tmp_path):
    solution = "She sells 1,000 + 234 = <<1000+234=1234>>1,234 eggs.\n#### 1,234"
    path = write_lines(
        tmp_path / "gsm8k.jsonl",
        [
            json.dumps({"question": "How many eggs?", "answer": solution}),
            json.dumps({"question": "Q2", "answer": "a #### b #### 72 "}),
        ],
    )
    samples, _ = load_prompt_file(path)
    assert samples[0] == PromptSample("How many eggs?", "1234", {"solution": solution}, f"{path}:1")
    assert samples[1].answer == "72"


def test_gsm8k_answer_without_marker_is_bad_row(tmp_path):
    path = write_lines(
        tmp_path / "gsm8k.jsonl",
        [
            json.dumps({"question": "ok", "answer": "#### 3"}),
            json.dumps({"question": "no final", "answer": "it is 4"}),
        ],
    )
    with pytest.raises(DataFileError) as info:
        load_prompt_file(path)
    assert f"{path}:2: GSM8K answer has no '####' final answer" in str(info.value)


def test_blank_lines_ignored_but_counted(tmp_path):
    path = write_lines(
        tmp_path / "blank.jsonl",
        ["", json.dumps({"prompt": "a", "answer": "1"}), "   ", json.dumps({"prompt": "b"})],
    )
    samples, problems = load_prompt_file(path, on_bad_row="skip")
    assert [s.source for s in samples] == [f"{path}:2"]
    assert [str(p) for p in problems] == [
        f"{path}:4: missing answer column 'answer' (or verl's reward_model.ground_truth)"
    ]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"prompt": "x", "answer": ', "invalid JSON: Expecting value (column 27)"),
        ("[1, 2]", "not a JSON object (got array)"),
        ('"just a string"', "not a JSON object (got str)"),
        ('{"answer": "1"}', "missing prompt column 'prompt'"),
        ('{"prompt": "", "answer": "1"}', "prompt 'prompt' is empty"),
        ('{"prompt": "   ", "answer": "1"}', "prompt 'prompt' is empty"),
        (
            '{"prompt": 5, "answer": "1"}',
            "prompt 'prompt' must be a string or chat messages, got int",
        ),
        ('{"prompt": "x"}', "missing answer column 'answer'"),
        ('{"prompt": "x", "answer": null}', "must be a string or a number, got null"),
        ('{"prompt": "x", "answer": true}', "must be a string or a number, got bool"),
        ('{"prompt": "x", "answer": [1]}', "must be a string or a number, got list"),
        ('{"prompt": "x", "answer": ""}', "answer 'answer' is empty"),
        ('{"question": "x", "answer": 3}', "GSM8K answer must be a string, got int"),
        ('{"prompt": [], "answer": "1"}', "prompt 'prompt' has no chat messages"),
        ('{"prompt": ["hi"], "answer": "1"}', "message 0 must be an object, got str"),
        ('{"prompt": [{"role": "bot", "content": "x"}], "answer": "1"}', "has role 'bot'"),
        ('{"prompt": [{"role": "user", "content": 1}], "answer": "1"}', "content must be a string"),
        ('{"question": "x", "answer": "####  "}', "GSM8K answer is empty after '####'"),
    ],
)
def test_each_bad_row_kind_is_reported_with_location(tmp_path, line, reason):
    path = write_lines(
        tmp_path / "bad.jsonl",
        [
            json.dumps({"prompt": "p1", "answer": "1"}),
            json.dumps({"prompt": "p2", "answer": "2"}),
            line,
        ],
    )
    with pytest.raises(DataFileError) as info:
        load_prompt_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: bad rows (1 of 3 rows unusable)")
    assert f"{path}:3: " in message and reason in message

    samples, problems = load_prompt_file(path, on_bad_row="skip")
    assert [s.prompt for s in samples] == ["p1", "p2"]
    assert len(problems) == 1 and problems[0].location == f"{path}:3"
    assert reason in problems[0].reason


def test_invalid_utf8_line_is_bad_row(tmp_path):
    path = tmp_path / "enc.jsonl"
    path.write_bytes(b'{"prompt": "a", "answer": "1"}\n{"prompt": "\xff", "answer": "1"}\n')
    samples, problems = load_prompt_file(path, on_bad_row="skip")
    assert len(samples) == 1
    assert str(problems[0]).startswith(f"{path}:2: not valid UTF-8")


def test_bom_on_first_line_is_ignored(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"prompt": "a", "answer": "1"}\n')
    assert load_prompt_file(path)[0][0].prompt == "a"


def test_skip_logs_warning_with_count_and_first_problems(tmp_path, caplog):
    good = [json.dumps({"prompt": f"p{i}", "answer": str(i)}) for i in range(3)]
    path = write_lines(tmp_path / "mixed.jsonl", good + ["nope"] * 5)
    with caplog.at_level(logging.WARNING, logger="rl_core.data.prompts"):
        samples, problems = load_prompt_file(path, on_bad_row="skip")
    assert len(samples) == 3 and len(problems) == 5
    assert all(isinstance(p, RowProblem) for p in problems)
    assert [p.location for p in problems] == [f"{path}:{n}" for n in range(4, 9)]
    text = caplog.text
    assert "skipped 5 bad row(s) of 8" in text
    assert f"{path}:4: invalid JSON" in text and f"{path}:8" not in text


def test_error_lists_ten_problems_and_the_rest_counted(tmp_path):
    path = write_lines(
        tmp_path / "many.jsonl", [json.dumps({"prompt": "ok", "answer": "1"})] + ["{"] * 13
    )
    with pytest.raises(DataFileError) as info:
        load_prompt_file(path)
    message = str(info.value)
    assert "13 of 14 rows unusable" in message
    assert f"{path}:11: invalid JSON" in message and f"{path}:12:" not in message
    assert message.rstrip().endswith("... and 3 more")


def test_all_bad_rows_fail_even_with_skip(tmp_path):
    path = write_lines(tmp_path / "allbad.jsonl", ['{"prompt": "x"}', "{"])
    with pytest.raises(DataFileError, match="no usable rows") as info:
        load_prompt_file(path, on_bad_row="skip")
    assert f"{path}:2: invalid JSON" in str(info.value)


def test_empty_file_fails(tmp_path):
    path = write_lines(tmp_path / "empty.jsonl", ["", "  "])
    with pytest.raises(DataFileError, match="no rows"):
        load_prompt_file(path, on_bad_row="skip")


def test_missing_file(tmp_path):
    path = tmp_path / "absent.jsonl"
    with pytest.raises(DataFileError, match="no such file") as info:
        load_prompt_file(path)
    assert str(path) in str(info.value)


def test_unsupported_extension_lists_supported(tmp_path):
    path = write_lines(tmp_path / "data.csv", ["prompt,answer"])
    with pytest.raises(DataFileError) as info:
        load_prompt_file(path)
    message = str(info.value)
    assert "unsupported file extension '.csv'" in message
    assert ".jsonl" in message and ".json" in message and ".parquet" in message


def test_invalid_on_bad_row(tmp_path):
    path = write_lines(tmp_path / "a.jsonl", [json.dumps({"prompt": "a", "answer": "1"})])
    with pytest.raises(ValueError, match="on_bad_row"):
        load_prompt_file(path, on_bad_row="ignore")


def test_parquet_good_and_bad_rows(tmp_path):
    path = tmp_path / "data.parquet"
    table = pa.table(
        {
            "prompt": ["a", None, "c", ""],
            "answer": ["1", "2", None, "4"],
            "difficulty": [1, 2, 3, 4],
        }
    )
    pq.write_table(table, path)
    samples, problems = load_prompt_file(path, on_bad_row="skip")
    assert samples == [PromptSample("a", "1", {"difficulty": 1}, f"{path}:row 1")]
    assert [str(p) for p in problems] == [
        f"{path}:row 2: prompt 'prompt' must be a string or chat messages, got null",
        f"{path}:row 3: answer 'answer' must be a string or a number, got null",
        f"{path}:row 4: prompt 'prompt' is empty",
    ]
    with pytest.raises(DataFileError, match=r"row 2: prompt"):
        load_prompt_file(path)


def test_parquet_gsm8k(tmp_path):
    path = tmp_path / "gsm8k.parquet"
    pq.write_table(pa.table({"question": ["Q?"], "answer": ["work\n#### 72"]}), path)
    samples, _ = load_prompt_file(path)
    assert samples == [PromptSample("Q?", "72", {"solution": "work\n#### 72"}, f"{path}:row 1")]


def test_unreadable_parquet(tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"not a parquet file at all")
    with pytest.raises(DataFileError, match="cannot read Parquet file") as info:
        load_prompt_file(path)
    assert str(path) in str(info.value)


def test_load_prompts_concatenates_in_order(tmp_path):
    first = write_lines(tmp_path / "a.jsonl", [json.dumps({"prompt": "a", "answer": "1"})])
    second = tmp_path / "b.parquet"
    pq.write_table(pa.table({"prompt": ["b", "c"], "answer": [2, 3]}), second)
    samples = load_prompts([str(first), str(second)])
    assert [(s.prompt, s.answer) for s in samples] == [("a", "1"), ("b", "2"), ("c", "3")]
    assert [s.prompt for s in load_prompts(str(first))] == ["a"]


def test_load_prompts_passes_options_per_file(tmp_path):
    good = write_lines(tmp_path / "a.jsonl", [json.dumps({"prompt": "a", "answer": "1"})])
    mixed = write_lines(tmp_path / "b.jsonl", [json.dumps({"prompt": "b", "answer": "2"}), "{"])
    with pytest.raises(DataFileError, match="b.jsonl:2"):
        load_prompts([str(good), str(mixed)])
    assert [s.prompt for s in load_prompts([good, mixed], on_bad_row="skip")] == ["a", "b"]
    with pytest.raises(ValueError, match="no prompt files"):
        load_prompts([])
