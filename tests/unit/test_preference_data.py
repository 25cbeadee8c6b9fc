"""Preference pairs of reward-model runs: file rows (bad rows named by file, row, field and
what is allowed), the synthetic arithmetic source, the held-out split and the config."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kinds.reward_model.sections import PreferenceDataConfig
from rl_core.config import ConfigError, load_config
from rl_core.data import ArithmeticTask, DataFileError
from rl_core.data.preferences import (
    PreferencePair,
    arithmetic_pairs,
    digit_error,
    load_preference_file,
    load_preference_pairs,
)

GOOD = {"prompt": "1+1=", "chosen": "2", "rejected": "3"}


def _jsonl(path: Path, rows: list) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_good_rows_load_with_their_location(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "p.jsonl", [GOOD, {**GOOD, "prompt": "2+2=", "extra": 1}])
    pairs, problems = load_preference_file(path)
    assert problems == []
    assert pairs == [
        PreferencePair("1+1=", "2", "3", f"{path}:1"),
        PreferencePair("2+2=", "2", "3", f"{path}:2"),
    ]


def test_a_json_array_file_loads_rows_numbered_from_one(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps([GOOD, {**GOOD, "chosen": 2}]))
    with pytest.raises(DataFileError) as err:
        load_preference_file(path)
    assert f"{path}:row 2: field 'chosen' must be a non-empty string, got int" in str(err.value)
    path.write_text(json.dumps([GOOD]))
    assert load_preference_file(path)[0] == [PreferencePair("1+1=", "2", "3", f"{path}:row 1")]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"prompt": "1+1=", "chosen": "2"},
            "missing field 'rejected': a preference row needs 'prompt', 'chosen' and "
            "'rejected', each a non-empty string (fields present: 'prompt', 'chosen')",
        ),
        ({**GOOD, "rejected": None}, "field 'rejected' must be a non-empty string, got null"),
        ({**GOOD, "prompt": ["a"]}, "field 'prompt' must be a non-empty string, got list"),
        ({**GOOD, "chosen": "  "}, "field 'chosen' is empty; allowed: a non-empty string"),
        (
            {**GOOD, "rejected": "2"},
            "fields 'chosen' and 'rejected' are the same text; a pair needs two different "
            "responses",
        ),
        ("{not json", "invalid JSON"),
        ("[1, 2]", "not a JSON object (got array)"),
    ],
)
def test_a_bad_row_names_file_row_field_and_what_is_allowed(
    tmp_path: Path, row: dict | str, message: str
) -> None:
    path = _jsonl(tmp_path / "prefs.jsonl", [GOOD, GOOD, row])
    with pytest.raises(DataFileError) as err:
        load_preference_file(path)
    text = str(err.value)
    assert text.startswith(f"{path}: bad preference rows (1 of 3 preference rows unusable):")
    assert f"{path}:3: {message}" in text


def test_bad_rows_are_skipped_with_a_warning_when_asked(tmp_path: Path, caplog) -> None:
    path = _jsonl(tmp_path / "p.jsonl", [GOOD, {"prompt": "x"}])
    with caplog.at_level(logging.WARNING):
        pairs, problems = load_preference_file(path, on_bad_row="skip")
    assert len(pairs) == 1 and [p.location for p in problems] == [f"{path}:2"]
    assert "skipped 1 bad preference row(s) of 2" in caplog.text
    only_bad = _jsonl(tmp_path / "bad.jsonl", [{"prompt": "x"}])
    with pytest.raises(DataFileError, match="no usable preference rows"):
        load_preference_file(only_bad, on_bad_row="skip")


def test_missing_files_and_other_extensions_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="no such file"):
        load_preference_file(tmp_path / "none.jsonl")
    with pytest.raises(DataFileError, match=r"unsupported file extension '\.csv'.*\.jsonl, \.json"):
        load_preference_file(tmp_path / "p.csv")


def test_arithmetic_pairs_prefer_the_correct_answer() -> None:
    samples = ArithmeticTask().train_pool()[:500]
    pairs = arithmetic_pairs(samples, max_delta=3, shorter_fraction=0.0, seed=1)
    assert len(pairs) == 500
    for sample, pair in zip(samples, pairs, strict=True):
        assert pair.prompt == sample.prompt and pair.chosen == sample.answer
        delta = int(pair.rejected) - int(sample.answer)
        assert 1 <= abs(delta) <= 3
    deltas = {int(p.rejected) - int(p.chosen) for p in pairs}
    assert deltas == {-3, -2, -1, 1, 2, 3}
    assert arithmetic_pairs(samples, 3, 0.0, seed=1) == pairs  # a function of its seed
    assert arithmetic_pairs(samples, 3, 0.0, seed=2) != pairs


def test_a_share_of_pairs_prefers_the_shorter_correct_answer() -> None:
    samples = ArithmeticTask().train_pool()[:1000]
    pairs = arithmetic_pairs(samples, max_delta=5, shorter_fraction=0.3, seed=1)
    longer = [p for p in pairs if "since" in p.rejected]
    assert 250 < len(longer) < 350
    pair = longer[0]
    assert pair.rejected == f"{pair.chosen}, since {pair.prompt}{pair.chosen}"
    assert all(len(p.chosen) < len(p.rejected) for p in longer)


@pytest.mark.parametrize(
    ("answer", "position", "replacement", "expected"),
    [
        ("42", 0, 0, "12"),  # the tens digit: no leading zero, never the digit itself
        ("42", 1, 0, "40"),
        ("42", 3, 10, "41"),  # positions and replacements wrap round
        ("7", 0, 0, "0"),  # a single digit may become 0
        ("-35", 0, 0, "-15"),  # the sign stays
        ("100", 2, 8, "109"),
    ],
)
def test_a_digit_error_writes_one_digit_wrong(
    answer: str, position: int, replacement: int, expected: str
) -> None:
    assert digit_error(answer, position, replacement) == expected


def test_a_share_of_wrong_answers_has_one_digit_wrong() -> None:
    samples = ArithmeticTask().train_pool()[:1000]
    pairs = arithmetic_pairs(samples, 5, 0.0, seed=1, digit_error_fraction=0.5)
    assert all(int(p.rejected) != int(p.chosen) for p in pairs)
    # a delta of 1-5 is never a multiple of 10; a digit error past the units digit is: about
    # half of the digit errors of two- and three-digit sums (500 pairs have one)
    beyond_units = [p for p in pairs if abs(int(p.rejected) - int(p.chosen)) % 10 == 0]
    assert 180 < len(beyond_units) < 320
    # without digit errors the pairs are those of the earlier settings
    assert arithmetic_pairs(samples, 5, 0.0, seed=1) == arithmetic_pairs(
        samples, 5, 0.0, seed=1, digit_error_fraction=0.0
    )


def test_the_arithmetic_source_holds_out_the_tasks_held_out_problems() -> None:
    train, held = load_preference_pairs(PreferenceDataConfig(eval_size=50))
    heldout_prompts = {s.prompt for s in ArithmeticTask().heldout()}
    assert len(held) == 50 and {p.prompt for p in held} <= heldout_prompts
    assert not {p.prompt for p in train} & heldout_prompts
    again = load_preference_pairs(PreferenceDataConfig(eval_size=50))
    assert again == (train, held)  # the pairs depend on the settings only


def test_files_without_eval_files_hold_out_a_stable_fraction(tmp_path: Path) -> None:
    rows = [{"prompt": f"{i}+0=", "chosen": str(i), "rejected": str(i + 1)} for i in range(400)]
    path = _jsonl(tmp_path / "p.jsonl", rows)
    data = PreferenceDataConfig(source="files", train_files=[str(path)], heldout_fraction=0.25)
    train, held = load_preference_pairs(data)
    assert len(train) + len(held) == 400 and 60 < len(held) < 140
    assert not {p.prompt for p in train} & {p.prompt for p in held}
    evals = _jsonl(tmp_path / "e.jsonl", rows[:3])
    data = PreferenceDataConfig(source="files", train_files=[str(path)], eval_files=[str(evals)])
    train, held = load_preference_pairs(data)
    assert len(train) == 400 and [p.prompt for p in held] == ["0+0=", "1+0=", "2+0="]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.source=web", "data.source = 'web': Input should be 'arithmetic' or 'files'"),
        ("data.max_delta=0", "data.max_delta = 0: Input should be greater than or equal to 1"),
        ("data.shorter_fraction=1.5", "data.shorter_fraction = 1.5: Input should be less"),
        ("data.source=files", "data.source = 'files' needs data.train_files"),
        ("data.pairs_per_batch=3", "data.pairs_per_batch = 3 must divide into actor.num_workers"),
        ("rollout.max_new_tokens=4", "rollout.max_new_tokens: read by reasoning runs only"),
        ("algorithm.loss_type=ppo", "algorithm.loss_type = 'ppo': Input should be 'bradley_terry'"),
    ],
)
def test_bad_config_values_name_the_field_and_what_is_allowed(override: str, message: str) -> None:
    extra = ["actor.num_workers=2"] if "pairs_per_batch" in override else []
    with pytest.raises(ConfigError) as err:
        load_config("rm_arith", [override, *extra])
    assert message in str(err.value)


def test_the_preset_is_a_reward_model_run() -> None:
    cfg = load_config("rm_arith")
    assert cfg.category == "reward_model" and cfg.model.model_type == "hf_reward_model"
