"""Fault matrix: every fault kind at every step, checked bit-identical to a fault-free run.

For each preset it trains a reference run without faults, then one run per (fault kind,
step) with ``RLPIPE_FAULTS=KIND:STEP@ITERATION``, all in this process (one Prefect API,
one Ray cluster), and compares the final checkpoints: weights, optimizer state, sampler
and env state, ``env_steps`` and the trainer's update count. ``--driver-kill`` adds, per
step, a CLI run whose driver is SIGKILLed at that step and then relaunched.

Prints a table: fault, step, completed, identical, extra seconds (against the reference).

Usage:
  python benchmarks/chaos.py [--presets ppo_cartpole,async_cartpole,sac_pendulum,reasoning,
                                        async_reasoning,agent,reward_model,metaworld,
                                        maniskill,libero]
                             [--kinds raise,kill,hang]
                             [--steps weight_sync,...] [--driver-kill] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.cluster.runtime_env import apply_base_env  # noqa: E402

apply_base_env()

from _checkpoint_state import differences, final_state  # noqa: E402

from rl_core.reliability import Fault, parse_faults  # noqa: E402
from rl_core.steps import FAULT_STEPS  # noqa: E402

#: Iteration at which each step's fault fires (evaluate/checkpoint: where they are due).
FAULT_ITERATION = {step: 1 for step in FAULT_STEPS}
#: Short runs of each preset: 4 iterations, evaluation and checkpoint every 2.
PRESETS: dict[str, tuple[str, list[str]]] = {
    "ppo_cartpole": (
        "ppo_cartpole",
        [
            "run.max_iterations=4",
            "run.eval_interval=2",
            "run.checkpoint_interval=2",
            "run.stop_at_eval_return=null",
            "eval.num_episodes=4",
            "eval.video=false",
            "tracking.learning_curve=false",
            "tracking.registered_model_name=null",
            "tracking.system_metrics=false",
            *(f"timeouts.{step}=30" for step in FAULT_STEPS),  # hangs end after 30 s
        ],
    ),
    "reasoning": (
        "grpo_arith",
        [
            "run.max_iterations=4",
            "run.eval_interval=2",
            "run.checkpoint_interval=2",
            "run.warm_start=null",
            "model.tiny_init=true",
            "data.prompts_per_batch=4",
            "data.eval_size=8",
            "algorithm.group_size=4",
            "eval.pass_k=1",
            "eval.before_training=false",
            "actor.lr=1e-3",
            "tracking.learning_curve=false",
            "tracking.registered_model_name=null",
            "tracking.system_metrics=false",
            *(f"timeouts.{step}=60" for step in FAULT_STEPS),  # hangs end after 60 s
        ],
    ),
}
#: Meta-World (a MuJoCo simulator whose state goes into checkpoints) with PPO.
PRESETS["metaworld"] = (
    "ppo_metaworld",
    [
        *PRESETS["ppo_cartpole"][1],
        "env.num_envs=4",
        "env.max_episode_steps=40",
        "rollout.num_steps=32",
        "model.hidden_sizes=[32,32]",
    ],
)
#: ManiSkill3 PushCube with PPO: its envs pickle as seeds and actions, replayed on restore.
PRESETS["maniskill"] = (
    "ppo_pushcube",
    [
        *PRESETS["ppo_cartpole"][1],
        "env.num_envs=4",
        "env.max_episode_steps=20",
        "rollout.num_steps=16",
        "model.hidden_sizes=[32,32]",
    ],
)
#: LIBERO (libero_spatial, state) with PPO: its envs pickle as seeds and actions too.
PRESETS["libero"] = (
    "ppo_metaworld",
    [
        *PRESETS["ppo_cartpole"][1],
        "env.env_type=libero",
        "env.num_envs=2",
        "env.max_episode_steps=12",
        "env.manipulation.suite=libero_spatial",
        "env.manipulation.tasks=[0]",
        "env.manipulation.reward=success",
        "rollout.num_steps=8",
        "model.hidden_sizes=[32,32]",
        "eval.num_episodes=2",
        "eval.num_envs=2",
    ],
)
#: SAC on Pendulum: the replay buffer worker's adds, samples and checkpoints under faults.
PRESETS["sac_pendulum"] = (
    "sac_pendulum",
    [*PRESETS["ppo_cartpole"][1], "replay.learning_starts=200"],
)
#: ppo_cartpole in async mode: batches collected one weight version ahead of the trainer.
PRESETS["async_cartpole"] = (
    "ppo_cartpole",
    [*PRESETS["ppo_cartpole"][1], "run.mode=async", "algorithm.max_staleness=1"],
)
#: The reasoning preset in async mode, with partial rollouts (2 tokens per weight version).
PRESETS["async_reasoning"] = (
    "grpo_arith",
    [
        *PRESETS["reasoning"][1],
        "run.mode=async",
        "algorithm.max_staleness=1",
        "rollout.partial_rollout_tokens=2",
    ],
)

#: The reasoning preset with an agent loop: multi-turn trajectories with tool output between
#: the model's turns. A freshly initialised model never writes a real tool call, so the
#: calls come from the test extension ``ext_agent_echo`` (a syntax that makes every turn a
#: call of its ``echo`` tool), loaded by the driver and every worker (:data:`PRESET_ENV`).
PRESETS["agent"] = (
    "grpo_arith",
    [
        *PRESETS["reasoning"][1],
        "agent.loop=tool_loop",
        "agent.parser=every_turn_calls",
        "agent.tools=[echo]",
        "agent.max_turns=3",
        "agent.max_total_tokens=48",
        "rollout.max_new_tokens=4",
    ],
)
#: The reasoning preset rewarded by a (tiny, untrained) reward model on reward-model workers:
#: a ``reward`` fault strikes the first of them (:data:`TINY_REWARD_MODEL`).
PRESETS["reward_model"] = (
    "grpo_arith",
    [*PRESETS["reasoning"][1], "reward.reward_type=reward_model"],
)
#: Presets scored by the tiny reward model built at ``<out>/tiny-rm``.
TINY_REWARD_MODEL = ("reward_model",)
#: Environment a preset needs, set before the run starts (and so before Ray does).
PRESET_ENV: dict[str, dict[str, str]] = {
    "agent": {
        "RLPIPE_EXT_MODULE": "ext_agent_echo",
        "PYTHONPATH": str(ROOT / "tests" / "fixtures" / "ext_modules"),
    },
}


def preset_env(names: list[str]) -> None:
    """Set what the chosen presets need in this process's environment (and ``sys.path``)."""
    for name in names:
        for key, value in PRESET_ENV.get(name, {}).items():
            if key == "PYTHONPATH":
                sys.path.insert(0, value)
                value = os.pathsep.join(p for p in (value, os.environ.get(key, "")) if p)
            os.environ[key] = value


class _UnfiredFaults(logging.Handler):
    """Collects the session's "never fired" warnings: a case whose fault did not fire
    proves nothing, so it counts as failed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "never fired" in record.getMessage():
            self.messages.append(record.getMessage())


def run_in_process(preset: str, overrides: list[str], faults: str) -> tuple[bool, float, str]:
    """Train with ``RLPIPE_FAULTS=faults``; returns (completed, seconds, error)."""
    from flows.train import train

    os.environ["RLPIPE_FAULTS"] = faults
    unfired = _UnfiredFaults()
    session_logger = logging.getLogger("infra.driver.session")
    session_logger.addHandler(unfired)
    started = time.perf_counter()
    try:
        train(preset=preset, overrides=overrides)
        if unfired.messages:
            return False, time.perf_counter() - started, unfired.messages[0]
        return True, time.perf_counter() - started, ""
    except Exception as exc:  # noqa: BLE001 - reported in the table
        # the table keeps the message; the traceback says where the run gave up
        logging.getLogger("rlpipe.chaos").exception("the run with faults %s failed", faults)
        return False, time.perf_counter() - started, f"{type(exc).__name__}: {exc}"[:300]
    finally:
        session_logger.removeHandler(unfired)
        os.environ.pop("RLPIPE_FAULTS", None)


def run_driver_kill(preset: str, overrides: list[str], step: str, env: dict[str, str]) -> tuple:
    """Kill the driver at ``step`` (a CLI process), relaunch; returns (completed, seconds, err)."""
    cmd = [sys.executable, str(ROOT / "flows" / "train.py"), "--config", preset, *overrides]
    started = time.perf_counter()
    first = subprocess.run(
        cmd,
        env={**env, "RLPIPE_FAULTS": f"kill_driver:{step}@{FAULT_ITERATION[step]}"},
        capture_output=True,
        text=True,
        start_new_session=True,
    )
    if first.returncode != -9:
        return False, time.perf_counter() - started, f"driver exited {first.returncode}"
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, start_new_session=True)
    seconds = time.perf_counter() - started
    if second.returncode != 0:
        return False, seconds, (second.stdout + second.stderr)[-300:]
    return True, seconds, ""


def main(argv: list[str] | None = None) -> int:
    """Run the matrix and print the table; exit 1 if any case failed or differed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="ppo_cartpole,reasoning")
    parser.add_argument("--kinds", default="raise,kill,hang")
    parser.add_argument("--steps", default=",".join(FAULT_STEPS))
    parser.add_argument(
        "--cases",
        default="",
        help="only these cases (instead of kinds × steps): KIND:STEP or KIND:STEP@N, several "
        "faults in one run joined by '+' (raise:rollout@1+kill:update@2)",
    )
    parser.add_argument("--driver-kill", action="store_true", help="also kill the driver")
    parser.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the first fault-free run (which checks that clean runs agree)",
    )
    parser.add_argument(
        "--hang-timeout",
        type=float,
        default=None,
        help="deadline (s) of the hung step in hang cases (default: the preset's, 30/60 s)",
    )
    parser.add_argument("--out", default=None, help="output folder (default: a temp dir)")
    parser.add_argument("--json", default=None, help="write the rows to this JSON file")
    args = parser.parse_args(argv)
    from flows.cli import console, prefect_api
    from flows.terminal import Terminal

    Terminal(console)  # rlpipe's messages on screen, Prefect's per-task lines off it
    out = Path(args.out or tempfile.mkdtemp(prefix="rlpipe-chaos-")).resolve()
    rows: list[dict[str, Any]] = []
    kinds = [k for k in args.kinds.split(",") if k]
    steps = [s for s in args.steps.split(",") if s]
    preset_env(args.presets.split(","))
    with prefect_api(out):
        for name in args.presets.split(","):
            preset, base = PRESETS[name]
            common = [*base, f"run.output_dir={out / name}", f"model.model_path={out / 'tiny'}"]
            if preset != "grpo_arith":  # only the reasoning presets build a tiny model
                common.pop()
            if name in TINY_REWARD_MODEL:
                from rl_core.models.reward_model import create_tiny_reward_model

                rm_dir = out / "tiny-rm"
                if not (rm_dir / "config.json").is_file():
                    create_tiny_reward_model(rm_dir, out / "tiny")
                common.append(f"reward.model.uri={rm_dir}")
            # Two fault-free runs: the first warms up (imports, Ray workers) and shows that
            # clean runs agree; the second is the reference (state and time).
            for run in ("reference",) if args.no_warmup else ("warmup", "reference"):
                ok, ref_seconds, err = run_in_process(preset, [*common, f"run.name={run}"], "")
                if not ok:
                    raise SystemExit(f"{name}: the fault-free {run} run failed: {err}")
            reference = final_state(out / name / "reference")
            clean = (
                [] if args.no_warmup else differences(reference, final_state(out / name / "warmup"))
            )
            if clean:
                raise SystemExit(f"{name}: two fault-free runs differ in {clean}")
            cases = [c for c in args.cases.split(",") if c] or [
                f"{kind}:{step}" for kind in kinds for step in steps
            ]
            for case in cases:
                faults = case_faults(case)
                deadline = [
                    f"timeouts.{f.step}={args.hang_timeout}"
                    for f in faults
                    if f.kind == "hang" and args.hang_timeout
                ]
                run = case_run_name(case)
                ok, seconds, err = run_in_process(
                    preset, [*common, *deadline, f"run.name={run}"], ",".join(map(str, faults))
                )
                rows.append(_row(name, faults, run, ok, seconds, ref_seconds, err, out, reference))
                _print_row(rows[-1])
            if args.driver_kill:
                env = {**os.environ}
                for step in steps:
                    run = f"kill_driver-{step}"
                    ok, seconds, err = run_driver_kill(
                        preset, [*common, f"run.name={run}"], step, env
                    )
                    faults = [Fault("kill_driver", step, FAULT_ITERATION[step])]
                    rows.append(
                        _row(name, faults, run, ok, seconds, ref_seconds, err, out, reference)
                    )
                    _print_row(rows[-1])
    _print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(r["completed"] and r["identical"] for r in rows) else 1


def case_faults(case: str) -> list[Fault]:
    """The faults of a ``--cases`` entry: ``KIND:STEP`` (at the step's default iteration) or
    ``KIND:STEP@N``, several joined by ``+`` for one run (checked like ``RLPIPE_FAULTS``)."""
    entries = []
    for part in case.split("+"):
        kind_step, _, iteration = part.partition("@")
        step = kind_step.partition(":")[2]
        entries.append(f"{kind_step}@{iteration or FAULT_ITERATION.get(step, 1)}")
    return list(parse_faults(",".join(entries)).faults)


def case_run_name(case: str) -> str:
    """Run name of a ``--cases`` entry: ``raise:update`` → ``raise-update``; ``+`` → ``_``."""
    return case.replace(":", "-").replace("@", "-at").replace("+", "_")


def _row(preset, faults, run, ok, seconds, ref_seconds, err, out, reference) -> dict[str, Any]:
    diff = differences(reference, final_state(out / preset / run)) if ok else ["(no result)"]
    return {
        "preset": preset,
        "fault": ",".join(map(str, faults)),
        "kind": "+".join(f.kind for f in faults),
        "step": "+".join(f.step for f in faults),
        "completed": ok,
        "identical": ok and not diff,
        "differs": diff[:5],
        "extra_seconds": round(seconds - ref_seconds, 1),
        "error": err,
    }


def _print_row(row: dict[str, Any]) -> None:
    print(
        f"{row['preset']:<13} {row['fault']:<26} completed={row['completed']} "
        f"identical={row['identical']} extra={row['extra_seconds']:+.1f}s "
        f"{row['error'] or ''}{' differs: ' + ', '.join(row['differs']) if row['differs'] else ''}",
        flush=True,
    )


def _print_table(rows: list[dict[str, Any]]) -> None:
    print("\n| preset | fault | step | completed | identical | extra seconds |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['preset']} | {r['kind']} | {r['step']} | {'yes' if r['completed'] else 'NO'} | "
            f"{'yes' if r['identical'] else 'NO'} | {r['extra_seconds']:+.1f} |"
        )


if __name__ == "__main__":
    sys.exit(main())
