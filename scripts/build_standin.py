"""Build a local stand-in for a real-model preset: a small model and GSM8K-format data.

Usage: ``python scripts/build_standin.py OUT_DIR [--like qwen2.5-0.5b-instruct]
[--train N] [--test N] [--seed N]``.

Writes, without downloading anything:

* ``OUT_DIR/model``: a Qwen2 model shaped like Qwen2.5-0.5B-Instruct but tiny (2 layers of
  width 64, random weights) whose tokenizer has Qwen's special tokens and chat template
  (:mod:`rl_core.models.standin`);
* ``OUT_DIR/gsm8k/main/train-00000-of-00001.parquet`` and ``test-00000-of-00001.parquet``:
  generated grade-school word problems in the rows and file layout of the hub's
  ``openai/gsm8k`` (``question``; ``answer`` with the worked solution, ``<<...>>``
  calculator annotations and the final ``#### N``).

Then ``grpo_gsm8k_qwen05b`` runs on a CPU against them (the command is printed at the end;
a random model scores about 0, so this shows that the run works, not what it learns).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rl_core.models.standin import STANDINS, create_standin  # noqa: E402

#: Where the hub's openai/gsm8k keeps the "main" configuration's splits.
TRAIN_FILE = "main/train-00000-of-00001.parquet"
TEST_FILE = "main/test-00000-of-00001.parquet"
NAMES = ("Natalia", "Weng", "Betty", "Julie", "James", "Albert", "Ken", "Alexis", "Tina", "Mark")


def _number(n: int) -> str:
    """A number as GSM8K's solutions often write it: with thousands separators."""
    return f"{n:,}"


def _sold(rng: random.Random) -> tuple[str, str, int]:
    name, a = rng.choice(NAMES), rng.randint(12, 90)
    half = a // 2
    total = a + half
    question = (
        f"{name} sold clips to {a} friends in April, and then sold half as many clips in "
        f"May. How many clips did {name} sell altogether in April and May?"
    )
    steps = (
        f"{name} sold {a}/2 = <<{a}/2={half}>>{half} clips in May.\n"
        f"{name} sold {a}+{half} = <<{a}+{half}={total}>>{total} clips altogether."
    )
    return question, steps, total


def _earned(rng: random.Random) -> tuple[str, str, int]:
    name, rate, hours = rng.choice(NAMES), rng.randint(8, 40), rng.randint(2, 12)
    total = rate * hours
    question = (
        f"{name} earns ${rate} an hour. Yesterday, {name} worked {hours} hours. How much did "
        f"{name} earn?"
    )
    steps = f"{name} earned {rate} * {hours} = $<<{rate}*{hours}={total}>>{total}."
    return question, steps, total


def _saved(rng: random.Random) -> tuple[str, str, int]:
    name, weekly, weeks = rng.choice(NAMES), rng.randint(15, 120), rng.randint(10, 52)
    spent = rng.randint(1, weekly * weeks // 2)
    saved, left = weekly * weeks, weekly * weeks - spent
    question = (
        f"{name} saves ${weekly} every week for {weeks} weeks. Then {name} spends ${spent} on "
        f"a new bike. How many dollars does {name} have left?"
    )
    steps = (
        f"{name} saves {weekly} * {weeks} = $<<{weekly}*{weeks}={saved}>>{saved}.\n"
        f"After the bike, {name} has {saved} - {spent} = $<<{saved}-{spent}={left}>>{left} left."
    )
    return question, steps, left


def _boxes(rng: random.Random) -> tuple[str, str, int]:
    boxes, per_box, broken = rng.randint(20, 300), rng.randint(6, 48), rng.randint(0, 30)
    total = boxes * per_box
    good = total - broken
    question = (
        f"A store receives {boxes} boxes of eggs with {per_box} eggs in each box. {broken} eggs "
        "are broken. How many eggs are not broken?"
    )
    steps = (
        f"The store receives {boxes} * {per_box} = <<{boxes}*{per_box}={total}>>{_number(total)} "
        f"eggs.\n{_number(total)} - {broken} = <<{total}-{broken}={good}>>{_number(good)} eggs "
        "are not broken."
    )
    return question, steps, good


PROBLEMS: tuple[Callable[[random.Random], tuple[str, str, int]], ...] = (
    _sold,
    _earned,
    _saved,
    _boxes,
)


def gsm8k_rows(count: int, seed: int) -> list[dict[str, str]]:
    """``count`` generated problems as GSM8K rows: ``{"question", "answer"}``.

    ``answer`` is the worked solution (numbers of 1,000 or more with thousands separators)
    ending in ``#### N``.
    """
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        question, steps, result = rng.choice(PROBLEMS)(rng)
        rows.append({"question": question, "answer": f"{steps}\n#### {result}"})
    return rows


def write_gsm8k(out_dir: str | Path, train: int = 64, test: int = 16, seed: int = 0) -> Path:
    """Write generated train and test splits in the hub's layout under ``out_dir``.

    Returns:
        ``out_dir`` (holding ``main/train-00000-of-00001.parquet`` and the test file).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(out_dir)
    for name, count, split_seed in ((TRAIN_FILE, train, seed), (TEST_FILE, test, seed + 1)):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(gsm8k_rows(count, split_seed)), path)
    return root


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--like", default="qwen2.5-0.5b-instruct", choices=sorted(STANDINS))
    parser.add_argument("--train", type=int, default=64, help="training problems (64)")
    parser.add_argument("--test", type=int, default=16, help="held-out problems (16)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = Path(args.out_dir)
    model = create_standin(out / "model", like=args.like, seed=args.seed)
    data = write_gsm8k(out / "gsm8k", train=args.train, test=args.test, seed=args.seed)
    print(f"wrote a stand-in for {STANDINS[args.like].hub_id} to {model}")
    print(f"wrote {args.train} training and {args.test} held-out GSM8K-format problems to {data}")
    print("run the preset on this CPU against them:")
    print(
        "  python flows/train.py --config grpo_gsm8k_qwen05b --run-name standin-gsm8k "
        f"cluster.device=cpu model.model_path={model} "
        f"data.train_files=[{data / TRAIN_FILE}] data.eval_files=[{data / TEST_FILE}] "
        "data.prompts_per_batch=2 algorithm.group_size=4 rollout.max_new_tokens=16 "
        "run.max_iterations=2 run.eval_interval=2"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
