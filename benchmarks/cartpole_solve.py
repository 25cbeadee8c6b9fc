"""Time to solve from process start: rlpipe's train CLI against Stable-Baselines3.

PPO on CartPole-v1 (the default preset) or SAC on Pendulum-v1 (``--config sac_pendulum``;
``crossq_pendulum`` runs against the same SAC anchor).

For each seed, one after the other:
  * rlpipe: ``python flows/train.py run.seed=S run.output_dir=<temp>`` (the default
    preset, as a user runs it);
  * anchor: Stable-Baselines3 PPO (SAC) with the rl-baselines3-zoo hyperparameters,
    in its own process (one torch thread), evaluated from a callback with rlpipe's protocol
    (same episodes, seeds, greedy actions, interval in env steps, target) and stopped once
    solved (``benchmarks/_sb3_anchor.py``).
Both are timed from just before the subprocess is launched to the end of the evaluation that
reached the target (start-up, imports and evaluations included), and to the process's exit.
Prints a per-seed table (with rlpipe's gradient steps up to the solving evaluation), the
medians and the ratio of medians (targets: rlpipe ≤ 1.5× SB3 PPO, ≤ 1.0× SB3 SAC).

``--stack`` starts a local stack once (``scripts/stack.py up --ray`` in a temporary home) and
the rlpipe runs use its Prefect API and Ray head, as they do while a user keeps the stack up.

``--bare-loop`` instead runs the older comparison: the train flow against a bare loop over
the same workers, first iteration → solved (orchestration only, no start-up).

Usage: python benchmarks/cartpole_solve.py [--seeds 0,1,2,3,4] [--config PRESET]
       [--timeout 900] [--stack] [--bare-loop] [--no-sb3] [overrides...]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import sys
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _solve_protocol import (  # noqa: E402
    SB3_ANCHOR_ENVS,
    EvalProtocol,
    SolveResult,
    from_config,
    median_solved_s,
)
from _solve_runs import run_rlpipe, run_sb3  # noqa: E402
from _stack import local_stack  # noqa: E402

from rl_core.config import load_config  # noqa: E402
from rl_core.config.loader import DEFAULT_PRESET  # noqa: E402
from rl_core.seeding import eval_seeds  # noqa: E402

#: Target of the ratio rlpipe / SB3 per anchor algorithm.
TARGET_RATIOS = {"PPO": 1.5, "SAC": 1.0}
INSTALL_HINT = "install the anchors: bash scripts/setup_bench.sh"


def seconds(result: SolveResult | None) -> str:
    """``solved s  env steps  exit s`` cells of one run."""
    if result is None:
        return f"{'n/a':>9} {'':>9} {'':>7}"
    solved = f"{result.solved_s:9.1f}" if result.solved else f"{'unsolved':>9}"
    steps = f"{result.env_steps:>9}" if result.env_steps is not None else f"{'':>9}"
    return f"{solved} {steps} {result.exit_s:7.1f}"


def median_cell(value: float) -> str:
    """A median's cell (``unsolved`` when the median run did not solve)."""
    return f"{'unsolved':>9}" if math.isinf(value) else f"{value:9.1f}"


def describe(protocol: EvalProtocol, preset: str) -> str:
    """One line naming the protocol both sides use."""
    kind = "greedy" if protocol.deterministic else "sampled"
    return (
        f"{protocol.env_id} ({preset}): {len(protocol.seeds)} {kind} evaluation episodes every "
        f"{protocol.interval_steps} env steps, solved at mean return >= {protocol.target}"
    )


def main() -> None:
    """Run every seed both ways and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated run.seed values")
    parser.add_argument("--config", default=None, help=f"preset (default: {DEFAULT_PRESET})")
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds per run (then unsolved)"
    )
    parser.add_argument("--stack", action="store_true", help="rlpipe uses a running local stack")
    parser.add_argument("--bare-loop", action="store_true", help="the older comparison")
    parser.add_argument("--no-sb3", action="store_true", help="rlpipe runs only (no anchor)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    preset = args.config or DEFAULT_PRESET
    if args.bare_loop:
        from _bare_loop_solve import compare

        for seed in seeds:
            compare(preset, [*args.overrides, f"run.seed={seed}"])
        return
    with_sb3 = importlib.util.find_spec("stable_baselines3") is not None and not args.no_sb3
    if not with_sb3 and not args.no_sb3:
        print(f"stable_baselines3 is not importable: {INSTALL_HINT}")
    with local_stack() if args.stack else nullcontext() as home:
        rows = run_seeds(seeds, preset, args, with_sb3, home)
    env_id = load_config(preset, args.overrides).env.env_id
    summarize(rows, with_sb3, env_id, anchor_wanted=not args.no_sb3)


def run_seeds(
    seeds: list[int], preset: str, args: argparse.Namespace, with_sb3: bool, home: Path | None
) -> list[tuple[int, SolveResult, SolveResult | None]]:
    """Each seed: rlpipe, then SB3; prints its row as it goes."""
    rows: list[tuple[int, SolveResult, SolveResult | None]] = []
    for seed in seeds:
        cfg = load_config(preset, [*args.overrides, f"run.seed={seed}"])
        protocol = from_config(cfg, eval_seeds(seed, cfg.eval.num_episodes))
        if not rows:
            print(describe(protocol, preset))
            print("seconds from process launch to the solving evaluation, env steps, exit")
            if home is not None:
                print("rlpipe runs use a running local stack (its Prefect API and Ray head)")
            print(
                f"{'seed':>4} | {'rlpipe':>9} {'steps':>9} {'exit':>7} | {'SB3':>9} {'steps':>9} {'exit':>7}"
            )
        ours = run_rlpipe(seed, args.config, args.overrides, protocol.target, args.timeout, home)
        theirs = None
        if with_sb3 and protocol.env_id in SB3_ANCHOR_ENVS:
            theirs = run_sb3(seed, protocol, args.timeout)
        rows.append((seed, ours, theirs))
        grads = ours.notes.get("gradient_steps")
        extra = f" | rlpipe gradient steps {grads:.0f}" if grads else ""
        print(f"{seed:>4} | {seconds(ours)} | {seconds(theirs)}{extra}", flush=True)
    return rows


def summarize(
    rows: list[tuple[int, SolveResult, SolveResult | None]],
    with_sb3: bool,
    env_id: str,
    anchor_wanted: bool = True,
) -> None:
    """Medians over seeds (an unsolved run counts as infinitely slow) and their ratio."""
    target = TARGET_RATIOS.get(SB3_ANCHOR_ENVS.get(env_id, ""), 1.0)
    ours = [r[1] for r in rows]
    theirs = [r[2] for r in rows if r[2] is not None]
    med_ours = median_solved_s(ours)
    line = f"{'med':>4} | {median_cell(med_ours)}"
    if theirs:
        line += f" {'':>9} {'':>7} | {median_cell(median_solved_s(theirs))}"
    print(line)
    after = [r.notes["after_eval_s"] for r in ours if r.solved and "after_eval_s" in r.notes]
    if after:
        print(
            "rlpipe's stamp is the MLflow timestamp of the solving eval/return_mean; it also "
            f"covers that iteration's video and checkpoint (median {statistics.median(after):.1f} s)"
        )
    if not theirs and not with_sb3 and not anchor_wanted:
        return
    if not theirs:
        envs = ", ".join(SB3_ANCHOR_ENVS)
        print(f"no SB3 anchor: {INSTALL_HINT if not with_sb3 else f'it has {envs} only'}")
        return
    med_theirs = median_solved_s(theirs)
    if math.isinf(med_ours) or math.isinf(med_theirs):
        print(
            f"ratio of medians rlpipe / SB3: n/a, a median run did not solve (target <= {target}x)"
        )
        return
    ratio = med_ours / med_theirs
    print(f"ratio of medians rlpipe / SB3: {ratio:.2f}x (target <= {target}x)")


if __name__ == "__main__":
    main()
