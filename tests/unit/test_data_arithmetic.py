"""ArithmeticTask (fixed held-out split, answers, validation), write_jsonl and PromptSampler."""

import hashlib
import json
import logging

import pytest

from rl_core.data import ArithmeticTask, PromptSampler, load_prompt_file, write_jsonl


def keys(samples):
    return [(s.fields["a"], s.fields["op"], s.fields["b"]) for s in samples]


def test_split_is_disjoint_and_covers_universe():
    task = ArithmeticTask(max_operand=20, ops=("+", "-", "*"), heldout_fraction=0.2)
    heldout, train = keys(task.heldout()), keys(task.train_pool())
    assert not set(heldout) & set(train)
    assert len(set(heldout)) == len(heldout) and len(set(train)) == len(train)
    universe = {(a, op, b) for op in "+-*" for a in range(21) for b in range(21)}
    assert set(heldout) | set(train) == universe


def test_split_identical_across_instances_and_matches_sha256_rule():
    first = ArithmeticTask(ops=("+", "*"))
    second = ArithmeticTask(ops=("*", "+"))
    assert first.heldout() == second.heldout()
    assert first.train_pool() == second.train_pool()
    for a, op, b in keys(first.heldout()[:50]):
        digest = int(hashlib.sha256(f"{a}{op}{b}".encode()).hexdigest(), 16)
        assert digest % 10_000 < 1000


def test_heldout_of_smaller_universe_is_subset():
    small = set(keys(ArithmeticTask(max_operand=30).heldout()))
    large = set(keys(ArithmeticTask(max_operand=99).heldout()))
    assert small <= large
    assert small == {(a, op, b) for a, op, b in large if a <= 30 and b <= 30}


@pytest.mark.parametrize("fraction", [0.05, 0.1, 0.3])
def test_heldout_fraction_close_to_target(fraction):
    task = ArithmeticTask(max_operand=99, heldout_fraction=fraction)
    share = len(task.heldout()) / 100**2
    assert abs(share - fraction) <= 0.02


def test_heldout_order_is_fixed_and_prefix_stable():
    task = ArithmeticTask(ops=("+", "-"))
    everything = task.heldout()
    assert task.heldout(10) == everything[:10]
    assert task.heldout(0) == []
    assert keys(everything) != sorted(keys(everything))  # shuffled, not the sorted order
    train = keys(task.train_pool())
    assert train == sorted(train, key=lambda k: (k[1], k[0], k[2]))
    with pytest.raises(ValueError, match="heldout"):
        task.heldout(len(everything) + 1)
    with pytest.raises(ValueError, match="heldout"):
        task.heldout(-1)


def test_answers_correct_for_all_ops():
    task = ArithmeticTask(max_operand=12, ops=("+", "-", "*"))
    samples = task.train_pool() + task.heldout()
    expected = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
    for sample in samples:
        a, op, b = sample.fields["a"], sample.fields["op"], sample.fields["b"]
        assert sample.prompt == f"{a}{op}{b}="
        assert sample.answer == str(expected[op](a, b))
    assert any(s.answer.startswith("-") for s in samples)
    assert {s.source for s in task.heldout()} == {"arithmetic:heldout"}
    assert {s.source for s in task.train_pool()} == {"arithmetic:train"}


def test_prompt_format():
    task = ArithmeticTask(max_operand=5, prompt_format="What is {a} {op} {b}? ")
    sample = task.train_pool()[0]
    assert sample.prompt == f"What is {sample.fields['a']} + {sample.fields['b']}? "


def test_sample_train_deterministic_with_replacement_and_from_pool():
    task = ArithmeticTask(max_operand=9)
    pool = set(keys(task.train_pool()))
    first = task.sample_train(500, seed=3)
    assert first == task.sample_train(500, seed=3)
    assert first != task.sample_train(500, seed=4)
    assert set(keys(first)) <= pool
    assert len(set(keys(first))) < 500  # 500 draws from a pool of about 90: repeats
    assert task.sample_train(0, seed=3) == []
    with pytest.raises(ValueError, match="n must be"):
        task.sample_train(-1, seed=0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_operand": 0}, "max_operand"),
        ({"max_operand": 2.5}, "max_operand"),
        ({"ops": ()}, r"ops.*allowed"),
        ({"ops": ("+", "/")}, r"ops.*'/'.*allowed"),
        ({"ops": ("+", "+")}, "duplicates"),
        ({"ops": "+"}, "ops"),
        ({"heldout_fraction": 0.0}, "heldout_fraction"),
        ({"heldout_fraction": 1.0}, "heldout_fraction"),
        ({"prompt_format": "{x}+{y}"}, "prompt_format"),
    ],
)
def test_invalid_task_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ArithmeticTask(**kwargs)


def test_ops_list_is_normalised_to_tuple():
    task = ArithmeticTask(ops=["-", "+"])
    assert task.ops == ("-", "+")
    assert hash(task) == hash(ArithmeticTask(ops=("-", "+")))


def test_write_jsonl_round_trip(tmp_path):
    task = ArithmeticTask(max_operand=9, ops=("+", "-"))
    samples = task.heldout(5) + task.sample_train(5, seed=0)
    path = write_jsonl(samples, tmp_path / "sub" / "arith.jsonl")
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {"prompt", "answer", "a", "op", "b"}
    loaded, problems = load_prompt_file(path)
    assert problems == []
    assert [(s.prompt, s.answer, s.fields) for s in loaded] == [
        (s.prompt, s.answer, s.fields) for s in samples
    ]


# PromptSampler


def draw(sampler, n):
    return [sampler.next_indices() for _ in range(n)]


def test_sampler_epochs_cover_everything_and_span_boundaries():
    sampler = PromptSampler(num_samples=10, batch_size=4, seed=1)
    batches = draw(sampler, 5)  # 20 indices = exactly 2 epochs
    flat = [i for batch in batches for i in batch]
    assert all(len(batch) == 4 for batch in batches)
    assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:]) == list(range(10))
    assert flat[:10] != flat[10:]  # a new permutation per epoch
    assert sampler.state_dict() == {"epoch": 2, "position": 0, "seed": 1, "consumed": 20}


def test_sampler_deterministic_and_unshuffled_order():
    assert draw(PromptSampler(7, 3, seed=5), 6) == draw(PromptSampler(7, 3, seed=5), 6)
    assert draw(PromptSampler(7, 3, seed=5), 6) != draw(PromptSampler(7, 3, seed=6), 6)
    assert draw(PromptSampler(4, 3, seed=0, shuffle=False), 3) == [[0, 1, 2], [3, 0, 1], [2, 3, 0]]
    assert PromptSampler(2, 5, seed=0, shuffle=False).next_indices() == [0, 1, 0, 1, 0]


@pytest.mark.parametrize("shuffle", [True, False])
def test_sampler_resume_matches_uninterrupted(shuffle):
    reference = PromptSampler(num_samples=11, batch_size=4, seed=7, shuffle=shuffle)
    expected = draw(reference, 7)

    interrupted = PromptSampler(num_samples=11, batch_size=4, seed=7, shuffle=shuffle)
    assert draw(interrupted, 3) == expected[:3]
    state = json.loads(json.dumps(interrupted.state_dict()))
    assert all(type(v) is int for v in state.values())

    resumed = PromptSampler(num_samples=11, batch_size=4, seed=7, shuffle=shuffle)
    resumed.load_state_dict(state)
    assert draw(resumed, 4) == expected[3:]
    assert resumed.state_dict() == reference.state_dict()


def test_sampler_resume_adopts_saved_seed(caplog):
    saved = PromptSampler(9, 2, seed=3)
    draw(saved, 2)
    state = saved.state_dict()
    other = PromptSampler(9, 2, seed=4)
    with caplog.at_level(logging.WARNING, logger="rl_core.data.sampler"):
        other.load_state_dict(state)
    assert "seed 3" in caplog.text
    assert draw(other, 3) == draw(saved, 3)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0, 4, 0), "num_samples"),
        ((5, 0, 0), "batch_size"),
        ((5, 2, -1), "seed"),
        ((5.0, 2, 0), "num_samples"),
    ],
)
def test_sampler_invalid_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        PromptSampler(*args)


@pytest.mark.parametrize(
    "state",
    [
        {"epoch": 0, "position": 0, "seed": 0},
        {"epoch": 0, "position": "1", "seed": 0, "consumed": 1},
        {"epoch": 0, "position": 12, "seed": 0, "consumed": 12},
        {"epoch": 1, "position": 2, "seed": 0, "consumed": 5},
    ],
)
def test_sampler_rejects_bad_state(state):
    with pytest.raises(ValueError, match="sampler state"):
        PromptSampler(10, 3, seed=0).load_state_dict(state)
