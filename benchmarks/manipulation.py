"""Manipulation figures: render cost, pipelining, PPO against Stable-Baselines3, SFT → GRPO.

Parts (``--parts render,pipeline,ppo,recipe``; all by default):

* ``render``: milliseconds per camera frame of a Meta-World env on one core, 64×64 and
  128×128, with and without ``fast_render``, against a state-only step (the bare loop:
  the simulator alone). Median of ``--repeats`` runs with the spread.
* ``pipeline``: env steps/s of ``ppo_metaworld``'s rollout step with 1 and 2 pipeline
  stages (``rollout.pipeline_stages``), on real Ray workers, median over iterations 1-5.
* ``ppo``: ``ppo_metaworld`` (the train CLI) against Stable-Baselines3 PPO on the same env
  (rlpipe's ``metaworld`` env factory, the same episode length and env-step budget): the
  greedy success rate on the same held-out initial states at the end, and the wall time.
* ``recipe``: ``grpo_vla_metaworld`` (demonstrations, behaviour cloning, then GRPO) with an
  evaluation before RL: ``eval/success_rate`` of the cloned policy, and the best and last
  after RL, from the run's MLflow store.

Usage: python benchmarks/manipulation.py [--parts render,pipeline] [--repeats 3]
       [--seeds 0,1,2] [--out DIR]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from rl_core.config import load_config  # noqa: E402


def spread(values: list[float]) -> str:
    """``median (min-max)`` of ``values``."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def render_cost(repeats: int, steps: int = 200) -> None:
    """Milliseconds per step of one env: state only, and with camera frames."""
    import numpy as np

    from rl_core.envs.registry import make_single_env

    cases = [("state", 64, True), ("rgb", 64, True), ("rgb", 64, False)]
    cases += [("rgb", 128, True), ("rgb", 128, False)]
    print("| observation | image | fast_render | ms per step (median, min-max) | vs state |")
    print("| --- | --- | --- | --- | --- |")
    base = None
    for mode, size, fast in cases:
        cfg = load_config(
            "ppo_metaworld",
            [
                f"env.manipulation.obs_mode={mode}",
                f"env.manipulation.image_size={size}",
                f"env.manipulation.fast_render={str(fast).lower()}",
            ],
        ).env
        times = []
        for r in range(repeats):
            env = make_single_env(cfg)
            env.reset(seed=r)
            rng = np.random.default_rng(r)
            start = time.perf_counter()
            for _ in range(steps):
                env.step(rng.uniform(-1, 1, 4).astype(np.float32))
            times.append((time.perf_counter() - start) / steps * 1000)
            env.close()
        median = statistics.median(times)
        base = base or median
        image = "-" if mode == "state" else f"{size}x{size}"
        print(f"| {mode} | {image} | {fast} | {spread(times)} | {median / base:.1f}x |")


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


def ppo_against_sb3(seeds: list[int], out: Path) -> None:
    """ppo_metaworld against SB3 PPO on the same env and env-step budget."""
    cfg = load_config("ppo_metaworld")
    budget = cfg.run.max_iterations * cfg.env.num_envs * cfg.rollout.num_steps
    rows = []
    for seed in seeds:
        seconds, folder = rlpipe_train("ppo_metaworld", out / f"rlpipe-{seed}", f"run.seed={seed}")
        success = metric_history(folder, "ppo-metaworld", "eval/success_rate")[-1][1]
        sb3 = subprocess.run(
            [sys.executable, __file__, "--sb3-run", str(seed), str(budget)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        line = [x for x in sb3.stdout.splitlines() if x.startswith("SB3 ")]
        if not line:
            raise RuntimeError(sb3.stdout[-2000:] + sb3.stderr[-2000:])
        sb3_result = json.loads(line[-1][4:])
        rows.append((seed, seconds, success, sb3_result["seconds"], sb3_result["success"]))
    print(f"env-step budget: {budget:,} (ppo_metaworld's iterations x envs x steps)")
    print("| seed | rlpipe s | rlpipe success | SB3 s | SB3 success |")
    print("| --- | --- | --- | --- | --- |")
    for seed, rs, rsucc, ss, ssucc in rows:
        print(f"| {seed} | {rs:.0f} | {rsucc:.2f} | {ss:.0f} | {ssucc:.2f} |")
    ratio = statistics.median(r[1] for r in rows) / statistics.median(r[3] for r in rows)
    print(f"median wall time rlpipe / SB3: {ratio:.2f}")


def sb3_run(seed: int, budget: int) -> None:
    """SB3 PPO on ppo_metaworld's env (run in its own process); prints ``SB3 {json}``."""
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from rl_core.envs.registry import make_single_env
    from rl_core.seeding import eval_seeds

    torch.set_num_threads(1)
    cfg = load_config("ppo_metaworld", [f"run.seed={seed}"])
    start = time.perf_counter()
    envs = DummyVecEnv([lambda: make_single_env(cfg.env) for _ in range(cfg.env.num_envs)])
    envs.seed(seed)
    model = PPO(
        "MlpPolicy",
        envs,
        n_steps=cfg.rollout.num_steps,
        batch_size=cfg.env.num_envs * cfg.rollout.num_steps // cfg.actor.num_minibatches,
        n_epochs=cfg.actor.update_epochs,
        learning_rate=cfg.actor.lr,
        gamma=cfg.algorithm.gamma,
        gae_lambda=cfg.algorithm.gae_lambda,
        policy_kwargs={"net_arch": list(cfg.model.hidden_sizes)},
        seed=seed,
        verbose=0,
    )
    model.learn(total_timesteps=budget)
    successes = []
    env = make_single_env(cfg.env)
    for s in eval_seeds(cfg.run.seed, cfg.eval.num_episodes):
        obs, _ = env.reset(seed=int(s))
        done, success = False, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(np.asarray(action, np.float32))
            success = success or bool(info.get("success"))
            done = terminated or truncated
        successes.append(float(success))
    seconds = time.perf_counter() - start
    print("SB3 " + json.dumps({"seconds": seconds, "success": float(np.mean(successes))}))


def recipe(out: Path) -> None:
    """grpo_vla_metaworld from zero, with an evaluation before RL."""
    seconds, folder = rlpipe_train(
        "grpo_vla_metaworld", out / "recipe", "eval.before_training=true"
    )
    sft = metric_history(folder, "sft-vla-metaworld", "eval/success_rate")
    rl = metric_history(folder, "grpo-vla-metaworld", "eval/success_rate")
    print(f"whole recipe (demos, SFT, GRPO): {seconds:.0f} s")
    print(f"SFT: success rate by iteration {sft}")
    print(f"GRPO: success rate by iteration (-1: before RL) {rl}")
    before = rl[0][1]
    print(
        f"held-out success: {before:.2f} cloned -> {rl[-1][1]:.2f} after RL "
        f"(best {max(v for _, v in rl):.2f})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="render,pipeline,ppo,recipe")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--sb3-run", nargs=2, type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sb3_run:
        sb3_run(*args.sb3_run)
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="rlpipe-manipulation-"))
    parts = args.parts.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    if "render" in parts:
        render_cost(args.repeats)
    if "pipeline" in parts:
        pipeline_speed(args.repeats)
    if "ppo" in parts:
        ppo_against_sb3(seeds, out)
    if "recipe" in parts:
        recipe(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
