"""IQL against behaviour cloning on the same Meta-World dataset of mixed quality.

One dataset is played with the scripted expert (``rl_core.data.demos``, as ``rlpipe demos``
does): ``--episodes`` episodes of ``--tasks``, their actions with Gaussian noise of the
``--noise`` stds in turn (0: the expert's own actions). Then, for each seed, the trainers
of the two presets learn from it for the same number of gradient steps on minibatches of
the same size (by default the presets' own budget: ``run.max_iterations`` iterations of
``demos.steps_per_iteration`` steps), in this process (the workers' own ``update`` /
``sft_update``, no Ray):

* ``iql``: ``iql_metaworld`` (``OfflineActorWorker``, the IQL learner);
* ``bc``: ``sft_mlp_metaworld_mixed`` (``ActorWorker.sft_update``), every episode;
* ``bc-success``: the same on the successful episodes only (``demos.successful_only``).

Each policy then plays ``--eval-episodes`` greedy episodes on the seed's held-out
evaluation states (``kinds.embodied.episodes.run_episodes``, as the evaluate step does).
Prints the dataset's quality per noise std, each run's success rate and return, the median
and min-max over the seeds side by side, and the ratio of the medians.

Usage: python benchmarks/iql_vs_bc.py [--steps N] [--seeds 0,1,2] [--episodes 120]
       [--noise 0,1,3] [--tasks reach-v3,push-v3] [--eval-episodes 50]
       [--methods iql,bc,bc-success] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from rl_core.config import RLPipeConfig, load_config  # noqa: E402

#: Method name -> (preset, extra overrides).
METHODS: dict[str, tuple[str, list[str]]] = {
    "iql": ("iql_metaworld", []),
    "bc": ("sft_mlp_metaworld_mixed", []),
    "bc-success": ("sft_mlp_metaworld_mixed", ["demos.successful_only=true"]),
}


def spread(values: list[float]) -> str:
    """``median (min-max)`` of ``values``."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def config(preset: str, args: argparse.Namespace, seed: int, *extra: str) -> RLPipeConfig:
    """The preset with the benchmark's dataset, tasks and budget."""
    tasks = "[" + ",".join(args.tasks) + "]"
    noise = "[" + ",".join(str(x) for x in args.noise) + "]"
    budget = []
    if args.steps is not None:
        budget = [
            f"demos.steps_per_iteration={args.steps_per_iteration}",
            f"run.max_iterations={max(1, args.steps // args.steps_per_iteration)}",
        ]
    return load_config(
        preset,
        [
            f"run.seed={seed}",
            f"run.output_dir={args.out}",
            f"env.manipulation.tasks={tasks}",
            f"demos.episodes={args.episodes}",
            f"demos.action_noise={noise}",
            *budget,
            f"eval.num_episodes={args.eval_episodes}",
            "eval.num_envs=10",
            "tracking.enabled=false",
            *extra,
        ],
    )


def make_dataset(args: argparse.Namespace) -> Path:
    """Play the mixed-quality dataset once (data seed 0), as ``rlpipe demos`` would."""
    from rl_core.data import demos as demos_format
    from rl_core.data import expert_play
    from rl_core.envs.experts import expert_for
    from rl_core.seeding import worker_seed

    cfg = config("iql_metaworld", args, 0)
    folder = Path(cfg.demos_path())
    if (folder / demos_format.MANIFEST).is_file():
        return folder
    base = worker_seed(cfg.run.seed, "demos", 0)
    seeds = [base + i for i in range(cfg.demos.episodes)]
    noise = expert_play.noise_levels(cfg.demos.action_noise, len(seeds))
    start = time.perf_counter()
    episodes = expert_play.play_expert_episodes(
        cfg.env, seeds, expert_for(cfg.env.env_type), noise, worker_seed(0, "demos", 0)
    )
    shard = demos_format.write_shard(folder, 0, episodes)
    demos_format.write_manifest(folder, [shard], cfg.env.model_dump(mode="json"), "benchmark")
    print(f"dataset: {len(episodes)} episodes in {time.perf_counter() - start:.1f} s -> {folder}")
    return folder


def train_and_evaluate(method: str, args: argparse.Namespace, seed: int) -> dict[str, float]:
    """Train ``method`` for ``--steps`` gradient steps, then play the evaluation episodes."""
    from kinds.embodied.episodes import run_episodes
    from kinds.embodied.workers.actor_worker import ActorWorker
    from kinds.embodied.workers.offline_trainer import OfflineActorWorker
    from rl_core.envs import VectorEnvAdapter
    from rl_core.seeding import eval_seeds

    preset, extra = METHODS[method]
    dataset = config("iql_metaworld", args, 0).demos_path()  # the one dataset, any seed
    cfg = config(preset, args, seed, f"demos.path={dataset}", *extra)
    config_dict = cfg.model_dump(mode="json")
    envs = VectorEnvAdapter(cfg.env, 1, seed=0, vectorization="sync")
    spaces = envs.spaces
    envs.close()
    offline = method == "iql"
    worker = (OfflineActorWorker if offline else ActorWorker)(config_dict, 0, (), spaces)
    start = time.perf_counter()
    for it in range(cfg.run.max_iterations):
        metrics = worker.update(it) if offline else worker.sft_update(it)
    seconds = time.perf_counter() - start
    weights = {k: v.detach().cpu().numpy() for k, v in worker.policy.state_dict().items()}
    seeds = [int(s) for s in eval_seeds(cfg.run.seed, cfg.eval.num_episodes)]
    played = run_episodes(config_dict, weights, seeds)
    return {
        "success_rate": float(np.mean(played["successes"])),
        "return_mean": float(np.mean(played["returns"])),
        "train_seconds": seconds,
        "gradient_steps": float(cfg.run.max_iterations * cfg.demos.steps_per_iteration),
        "batch_size": float(cfg.demos.batch_size),
        "bc_loss": float(metrics["train/bc_loss"]),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--steps", type=int, default=None, help="gradient steps per run (default: the presets')"
    )
    parser.add_argument("--steps-per-iteration", type=int, default=100)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--episodes", type=int, default=120)
    parser.add_argument("--noise", default="0,1,3", help="action-noise stds, in turn")
    parser.add_argument("--tasks", default="reach-v3,push-v3")
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--out", default=None, help="folder of the dataset (default: a temp dir)")
    args = parser.parse_args(argv)
    args.noise = [float(x) for x in args.noise.split(",")]
    args.tasks = args.tasks.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    methods = args.methods.split(",")
    args.out = args.out or tempfile.mkdtemp(prefix="iql-vs-bc-")
    torch.set_num_threads(1)
    folder = make_dataset(args)
    manifest = json.loads((folder / "demos.json").read_text())
    print(f"\ndataset {folder.name}: {manifest['episodes']} episodes, {manifest['steps']} steps")
    print("| action noise std | episodes | successes | mean return |")
    print("| --- | --- | --- | --- |")
    for row in manifest["action_noise"]:
        print(
            f"| {row['std']} | {row['episodes']} | {row['successes']} | {row['return_mean']:.0f} |"
        )
    results: dict[str, list[dict[str, float]]] = {m: [] for m in methods}
    print("\n| method | seed | success rate | mean return | train s | last bc_loss |")
    print("| --- | --- | --- | --- | --- | --- |")
    for seed in seeds:
        for method in methods:
            out = train_and_evaluate(method, args, seed)
            results[method].append(out)
            print(
                f"| {method} | {seed} | {out['success_rate']:.2f} | {out['return_mean']:.0f} | "
                f"{out['train_seconds']:.0f} | {out['bc_loss']:.2f} |",
                flush=True,
            )
    steps = int(results[methods[0]][0]["gradient_steps"])
    batch = int(results[methods[0]][0]["batch_size"])
    print(
        f"\n{steps} gradient steps of {batch} transitions each, seeds {args.seeds}, "
        f"{args.eval_episodes} evaluation episodes per run: median (min-max)"
    )
    print("| method | success rate | mean return |")
    print("| --- | --- | --- |")
    for method in methods:
        rates = [r["success_rate"] for r in results[method]]
        returns = [r["return_mean"] for r in results[method]]
        print(f"| {method} | {spread(rates)} | {spread(returns)} |")
    if "iql" in results and "bc" in results:
        iql = statistics.median(r["success_rate"] for r in results["iql"])
        bc = statistics.median(r["success_rate"] for r in results["bc"])
        ratio = f"{iql / bc:.2f}" if bc > 0 else "inf"
        print(f"\nsuccess rate, IQL / BC (medians): {iql:.2f} / {bc:.2f} = {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
