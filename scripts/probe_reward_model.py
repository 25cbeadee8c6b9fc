"""How well an arithmetic reward model judges the mistakes a policy actually makes.

A reward model's held-out pairwise accuracy is measured on the pairs it was trained like;
a policy rewarded by it makes its own mistakes. This script prints, for a reward model
directory (an ``rm_arith`` export) on the held-out ``a+b=`` problems:

- its pairwise accuracy when the rejected answer has one digit wrong, by which digit
  (units, tens, hundreds): a policy's usual mistake is a wrong tens digit;
- on ``--samples`` responses per problem sampled from a policy (e.g. the ``sft_arith``
  export, temperature 1, as GRPO samples them): the share of (correct, wrong) response
  pairs of one problem that it ranks the right way round, which is what GRPO's group
  advantages see.

Usage::

    python scripts/probe_reward_model.py --reward-model outputs/rm-arith/model \\
        --policy outputs/sft-arith/model [--problems 100] [--samples 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from rl_core.data.arithmetic import ArithmeticTask  # noqa: E402
from rl_core.data.preferences import digit_error  # noqa: E402
from rl_core.models.reward_model import score_texts  # noqa: E402

DIGITS = {"units": 1, "tens": 2, "hundreds": 3}


def digit_accuracy(reward_model: str, problems: int, seed: int) -> dict[str, tuple[float, int]]:
    """Pairwise accuracy (and pair count) against a wrong units, tens or hundreds digit."""
    rng = np.random.default_rng(seed)
    held = ArithmeticTask().heldout(problems)
    out = {}
    for name, place in DIGITS.items():
        rows = [s for s in held if len(s.answer.lstrip("-")) >= place]
        wrong = [
            digit_error(s.answer, len(s.answer.lstrip("-")) - place, int(rng.integers(0, 1 << 30)))
            for s in rows
        ]
        prompts = [s.prompt for s in rows]
        good = np.array(score_texts(reward_model, prompts, [s.answer for s in rows]))
        bad = np.array(score_texts(reward_model, prompts, wrong))
        out[name] = (float(np.mean(good > bad)) if rows else float("nan"), len(rows))
    return out


def policy_ranking(
    reward_model: str, policy: str, problems: int, samples: int, seed: int
) -> tuple[float, int, float]:
    """Share of same-problem (correct, wrong) sample pairs ranked right, their count, and
    the policy's sampled accuracy."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForCausalLM.from_pretrained(policy).eval()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    right = total = 0
    correct_rows = 0
    for sample in ArithmeticTask().heldout(problems):
        ids = tokenizer(sample.prompt, return_tensors="pt", add_special_tokens=False).input_ids
        with torch.no_grad():
            out = model.generate(
                ids.repeat(samples, 1),
                attention_mask=torch.ones_like(ids).repeat(samples, 1),
                do_sample=True,
                temperature=1.0,
                top_k=0,
                max_new_tokens=5,
                pad_token_id=pad,
            )
        texts = [tokenizer.decode(r, skip_special_tokens=True) for r in out[:, ids.shape[1] :]]
        scores = np.array(score_texts(reward_model, [sample.prompt] * samples, texts))
        correct = np.array([t.strip() == sample.answer for t in texts])
        correct_rows += int(correct.sum())
        good, bad = scores[correct], scores[~correct]
        right += int((good[:, None] > bad[None, :]).sum())
        total += len(good) * len(bad)
    return right / max(total, 1), total, correct_rows / (problems * samples)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reward-model", required=True, help="reward model directory")
    parser.add_argument("--policy", help="causal LM directory whose samples are ranked")
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name, (accuracy, pairs) in digit_accuracy(
        args.reward_model, args.problems * 4, args.seed
    ).items():
        print(f"one wrong {name:8} digit: pairwise accuracy {accuracy:.3f} ({pairs} pairs)")
    if args.policy:
        ranked, pairs, sampled = policy_ranking(
            args.reward_model, args.policy, args.problems, args.samples, args.seed
        )
        print(
            f"policy samples ({sampled:.1%} correct): {ranked:.3f} of {pairs} same-problem "
            "(correct, wrong) pairs ranked right"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
