"""Manipulation figures: render cost, experts, pipelining, PPO against Stable-Baselines3, SFT → GRPO.

Parts (``--parts render,experts,pipeline,ppo,recipe``; all by default):

* ``render``: milliseconds per step of one env of ``--ppo-preset``'s simulator on one core
  (Meta-World: 64×64 and 128×128, with and without ``fast_render``; ManiSkill3 and LIBERO,
  ``--ppo-preset grpo_vla_libero``: 64×64 and 128×128) against a state-only step (the bare loop: the simulator alone). Median of
  ``--repeats`` runs with the spread. ManiSkill's first camera image in a process (its
  renderer's start-up) is taken before the clock starts.
* ``experts``: success rate and seconds of the ManiSkill3 scripted experts over 20 seeds.
* ``pipeline``: env steps/s of ``ppo_metaworld``'s rollout step with 1 and 2 pipeline
  stages (``rollout.pipeline_stages``), on real Ray workers, median over iterations 1-5.
* ``ppo``: ``--ppo-preset`` (``ppo_metaworld`` or ``ppo_pushcube``, the train CLI) against
  Stable-Baselines3 PPO on the same env (rlpipe's env factory, the same episode length,
  hyper-parameters and env-step budget): the greedy success rate on the same held-out
  initial states, evaluated every ``run.eval_interval`` iterations' worth of env steps, and
  the wall time. With ``--target R`` both stop at the first evaluation with a success rate
  of at least ``R`` and the env steps to get there are printed.
* ``recipe``: ``grpo_vla_metaworld`` (demonstrations, behaviour cloning, then GRPO) with an
  evaluation before RL, once per seed (``--jobs`` of them at once): ``eval/success_rate``
  of the cloned policy, and the best and last after RL, from the run's MLflow store; the
  medians over seeds with their range.

Usage: python benchmarks/manipulation.py [--parts render,pipeline] [--repeats 3]
       [--seeds 0,1,2] [--jobs 2] [--ppo-preset ppo_metaworld|ppo_pushcube|grpo_vla_libero (render only)] [--target 0.9] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from rl_core.config import load_config  # noqa: E402


def spread(values: list[float]) -> str:
    """``median (min-max)`` of ``values``."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


#: Render cases per simulator: (obs_mode, image size, fast_render or None where N/A).
RENDER_CASES = {
    "metaworld": [
        ("state", 64, True),
        ("rgb", 64, True),
        ("rgb", 64, False),
        ("rgb", 128, True),
        ("rgb", 128, False),
    ],
    "maniskill": [("state", 64, None), ("rgb", 64, None), ("rgb", 128, None)],
    "libero": [("state", 64, None), ("rgb", 64, None), ("rgb", 128, None)],
}


def render_cost(preset: str, repeats: int, steps: int = 200) -> None:
    """Milliseconds per step of one env: state only, and with camera frames."""
    import numpy as np

    from rl_core.envs.registry import make_single_env

    env_type = load_config(preset).env.env_type
    keep_renderer = None
    if env_type == "maniskill":  # the renderer's start-up, once per process: timed apart
        start = time.perf_counter()
        keep_renderer = make_single_env(load_config(preset, ["env.manipulation.obs_mode=rgb"]).env)
        keep_renderer.reset(seed=0)
        print(f"first camera env of the process: {time.perf_counter() - start:.1f} s")
    print(f"{preset} ({env_type}), {steps} random steps per run")
    print("| observation | image | fast_render | ms per step (median, min-max) | vs state |")
    print("| --- | --- | --- | --- | --- |")
    base = None
    for mode, size, fast in RENDER_CASES[env_type]:
        overrides = [f"env.manipulation.obs_mode={mode}", f"env.manipulation.image_size={size}"]
        if fast is not None:
            overrides.append(f"env.manipulation.fast_render={str(fast).lower()}")
        cfg = load_config(preset, overrides).env
        times = []
        for r in range(repeats):
            env = make_single_env(cfg)
            env.reset(seed=r)
            rng = np.random.default_rng(r)
            shape = env.action_space.shape
            start = time.perf_counter()
            for _ in range(steps):
                env.step(rng.uniform(-1, 1, shape).astype(np.float32))
            times.append((time.perf_counter() - start) / steps * 1000)
            env.close()
        median = statistics.median(times)
        base = base or median
        image = "-" if mode == "state" else f"{size}x{size}"
        shown = "-" if fast is None else fast
        print(f"| {mode} | {image} | {shown} | {spread(times)} | {median / base:.1f}x |")
    if keep_renderer is not None:
        keep_renderer.close()


def expert_success(episodes: int = 20) -> None:
    """Success rate and seconds of the ManiSkill3 scripted experts (state observations)."""
    from rl_core.envs.maniskill_env import ManiSkillEnv
    from rl_core.envs.maniskill_experts import EXPERT_TASKS, expert_actions

    print(f"ManiSkill3 scripted experts, seeds 0-{episodes - 1}")
    print("| task | successes | seconds |")
    print("| --- | --- | --- |")
    for task in EXPERT_TASKS:
        env = ManiSkillEnv(task)
        start, wins = time.perf_counter(), 0
        for seed in range(episodes):
            env.reset(seed=seed)
            success = False
            for _ in range(env.max_episode_steps):
                _, _, terminated, truncated, info = env.step(expert_actions(env)[0])
                success = success or bool(info["success"])
                if terminated or truncated:
                    break
            wins += success
        print(f"| {task} | {wins}/{episodes} | {time.perf_counter() - start:.1f} |")
        env.close()


def pipeline_speed(repeats: int) -> None:
    """Rollout env steps/s with 1 and 2 pipeline stages (real Ray workers)."""
    from infra.cluster.ray_cluster import connect, shutdown
    from infra.driver.runtimes import make_runtime, run_iteration_in_process

    connect(num_cpus=2)
    print("| pipeline_stages | rollout env steps/s (median, min-max) |")
    print("| --- | --- |")
    try:
        for stages in (1, 2):
            cfg = load_config(
                "ppo_metaworld",
                [
                    f"rollout.pipeline_stages={stages}",
                    "tracking.enabled=false",
                    "run.eval_interval=1000",
                ],
            )
            runtime = make_runtime(cfg)
            speeds = []
            for it in range(1 + 5 * repeats):
                result = run_iteration_in_process(runtime, it)
                if it:  # the first iteration warms the workers up
                    speeds.append(result["rollout"].metrics["rollout/steps_per_second"])
            runtime.shutdown()
            print(f"| {stages} | {spread(speeds)} |")
    finally:
        shutdown()


def rlpipe_train(preset: str, out: Path, *overrides: str) -> tuple[float, Path]:
    """Run the train CLI; its wall time and output folder."""
    start = time.perf_counter()
    cmd = [sys.executable, str(ROOT / "flows" / "train.py"), "--config", preset]
    cmd += [f"run.output_dir={out}", "tracking.learning_curve=false", *overrides]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{preset} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return time.perf_counter() - start, out


def metric_history(out: Path, run_name: str, key: str) -> list[tuple[int, float]]:
    """``key``'s (step, value) history of the run ``run_name`` in ``out``'s MLflow store."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    ids = [e.experiment_id for e in client.search_experiments()]
    (run,) = client.search_runs(ids, filter_string=f"attributes.run_name = '{run_name}'")
    history = client.get_metric_history(run.info.run_id, key)
    return sorted((m.step, m.value) for m in history)


def steps_per_iteration(preset: str) -> int:
    """Env steps of one iteration of ``preset``."""
    cfg = load_config(preset)
    return cfg.env.num_envs * cfg.rollout.num_steps


def ppo_against_sb3(preset: str, seeds: list[int], out: Path, target: float | None) -> None:
    """``preset`` (rlpipe PPO) against SB3 PPO on the same env and env-step budget."""
    cfg = load_config(preset)
    per_iteration = steps_per_iteration(preset)
    budget = cfg.run.max_iterations * per_iteration
    stop = [f"run.stop_at_eval_success={target}"] if target is not None else []
    rows = []
    for seed in seeds:
        seconds, folder = rlpipe_train(
            preset, out / f"rlpipe-{preset}-{seed}", f"run.seed={seed}", *stop
        )
        history = metric_history(folder, cfg.run.name, "eval/success_rate")
        reached = [step for step, value in history if target is not None and value >= target]
        rlpipe_steps = (reached[0] + 1) * per_iteration if reached else None
        sb3 = subprocess.run(
            [sys.executable, __file__, "--sb3-run", preset, str(seed), str(budget), str(target)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        line = [x for x in sb3.stdout.splitlines() if x.startswith("SB3 ")]
        if not line:
            raise RuntimeError(sb3.stdout[-2000:] + sb3.stderr[-2000:])
        theirs = json.loads(line[-1][4:])
        rows.append(
            (
                seed,
                seconds,
                history[-1][1],
                rlpipe_steps,
                theirs["seconds"],
                theirs["success"],
                theirs["steps_to_target"],
            )
        )
    print(f"{preset}: env-step budget {budget:,} (iterations x envs x steps), target {target}")
    print(
        "| seed | rlpipe s | rlpipe success | rlpipe steps to target | SB3 s | SB3 success | SB3 steps to target |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for seed, rs, rsucc, rsteps, ss, ssucc, ssteps in rows:
        print(
            f"| {seed} | {rs:.0f} | {rsucc:.2f} | {rsteps or '-'} | {ss:.0f} | {ssucc:.2f} | {ssteps or '-'} |"
        )
    ratio = statistics.median(r[1] for r in rows) / statistics.median(r[4] for r in rows)
    print(f"median wall time rlpipe / SB3: {ratio:.2f}")


def greedy_success(model: object, env: object, seeds: list[int]) -> float:
    """Success rate of ``model``'s greedy actions over one episode per seed."""
    import numpy as np

    successes = []
    for s in seeds:
        obs, _ = env.reset(seed=int(s))
        done, success = False, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(np.asarray(action, np.float32))
            success = success or bool(info.get("success"))
            done = terminated or truncated
        successes.append(float(success))
    return float(np.mean(successes))


def sb3_run(preset: str, seed: int, budget: int, target: float | None) -> None:
    """SB3 PPO on ``preset``'s env (run in its own process); prints ``SB3 {json}``.

    Evaluates greedily on the run's evaluation seeds every ``run.eval_interval``
    iterations' worth of env steps, as rlpipe does, and stops at ``target``.
    """
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    from rl_core.envs.registry import make_single_env
    from rl_core.seeding import eval_seeds

    torch.set_num_threads(1)
    cfg = load_config(preset, [f"run.seed={seed}"])
    start = time.perf_counter()
    envs = DummyVecEnv([lambda: make_single_env(cfg.env) for _ in range(cfg.env.num_envs)])
    envs.seed(seed)
    eval_env = make_single_env(cfg.env)
    seeds = list(eval_seeds(cfg.run.seed, cfg.eval.num_episodes))
    every = cfg.run.eval_interval * steps_per_iteration(preset)
    found: dict[str, float] = {}

    class EvalEvery(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % every:
                return True
            found["success"] = greedy_success(self.model, eval_env, seeds)
            if target is not None and found["success"] >= target:
                found.setdefault("steps_to_target", self.num_timesteps)
                return False
            return True

    model = PPO(
        "MlpPolicy",
        envs,
        n_steps=cfg.rollout.num_steps,
        batch_size=cfg.env.num_envs * cfg.rollout.num_steps // cfg.actor.num_minibatches,
        n_epochs=cfg.actor.update_epochs,
        learning_rate=cfg.actor.lr,
        gamma=cfg.algorithm.gamma,
        gae_lambda=cfg.algorithm.gae_lambda,
        policy_kwargs={
            "net_arch": list(cfg.model.hidden_sizes),
            "log_std_init": cfg.model.init_log_std,
        },
        seed=seed,
        verbose=0,
    )
    model.learn(total_timesteps=budget, callback=EvalEvery())
    if "steps_to_target" not in found:
        found["success"] = greedy_success(model, eval_env, seeds)
    result = {"seconds": time.perf_counter() - start, **found}
    result.setdefault("steps_to_target", None)
    print("SB3 " + json.dumps(result))


def recipe(out: Path, seeds: list[int], jobs: int = 1) -> None:
    """grpo_vla_metaworld from zero for each seed, with an evaluation before RL.

    ``jobs`` seeds run at once (each its own train CLI); their wall times then share the
    cores and are not comparable with a run alone.
    """

    def one(seed: int) -> tuple[int, float, list, list]:
        seconds, folder = rlpipe_train(
            "grpo_vla_metaworld",
            out / f"recipe-{seed}",
            f"run.seed={seed}",
            "eval.before_training=true",
        )
        sft = metric_history(folder, "sft-vla-metaworld", "eval/success_rate")
        rl = metric_history(folder, "grpo-vla-metaworld", "eval/success_rate")
        return seed, seconds, sft, rl

    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        runs = list(pool.map(one, seeds))
    print(f"grpo_vla_metaworld recipe (demos, SFT, GRPO), {jobs} at a time")
    print("| seed | wall s | SFT last | cloned (before RL) | after RL | best | gain |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    gains, befores, afters = [], [], []
    for seed, seconds, sft, rl in runs:
        before, after = rl[0][1], rl[-1][1]
        best = max(v for _, v in rl[1:])  # (the first evaluation is before RL)
        befores.append(before)
        afters.append(after)
        gains.append(after - before)
        print(
            f"| {seed} | {seconds:.0f} | {sft[-1][1]:.2f} | {before:.2f} | {after:.2f} | "
            f"{best:.2f} | {after - before:+.2f} |"
        )
    for seed, _, _, rl in runs:
        print(f"seed {seed}, GRPO success rate by step (the first: before RL): {rl}")
    print(f"median: cloned {spread(befores)} -> after RL {spread(afters)}; gain {spread(gains)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="render,experts,pipeline,ppo,recipe")
    parser.add_argument("--ppo-preset", default="ppo_metaworld")
    parser.add_argument("--target", type=float, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--jobs", type=int, default=1, help="recipe: seeds run at once")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--sb3-run", nargs=4, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sb3_run:
        preset, seed, budget, target = args.sb3_run
        sb3_run(preset, int(seed), int(budget), None if target == "None" else float(target))
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="rlpipe-manipulation-"))
    parts = args.parts.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    if "render" in parts:
        render_cost(args.ppo_preset, args.repeats)
    if "experts" in parts:
        expert_success()
    if "pipeline" in parts:
        pipeline_speed(args.repeats)
    if "ppo" in parts:
        ppo_against_sb3(args.ppo_preset, seeds, out, args.target)
    if "recipe" in parts:
        recipe(out, seeds, args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
