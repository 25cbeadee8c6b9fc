"""What answering heartbeats on a control thread costs: calls and a real iteration's steps.

Workers created by ``WorkerGroup`` have a ``control`` concurrency group (a second thread for
``heartbeat``); their step methods run on one thread of Ray's default group instead of the
main thread. This compares, on the same local cluster and interleaved to share the noise:

- a ping as before (plain actor, default executor) vs a heartbeat in the control group;
- an empty step call, with ``ray.get`` and with the deadline wait (``WorkerGroup.get``);
- the embodied preset's worker steps (rollout of 8 envs x 128 steps, reward, advantage,
  update) on plain actors vs on actors with the control group.

Usage: ``python benchmarks/liveness_overhead.py [--calls 1000] [--iterations 16]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infra.cluster.runtime_env import apply_base_env  # noqa: E402

apply_base_env()

import ray  # noqa: E402

from infra.cluster import ray_cluster  # noqa: E402
from infra.cluster.placement import GroupPlacement  # noqa: E402
from infra.cluster.worker_base import WorkerBase  # noqa: E402
from infra.cluster.worker_group import WorkerGroup  # noqa: E402
from kinds.embodied.workers.actor_worker import ActorWorker  # noqa: E402
from kinds.embodied.workers.env_worker import EnvWorker  # noqa: E402
from kinds.embodied.workers.rollout_worker import RolloutWorker  # noqa: E402
from rl_core.config import load_config  # noqa: E402
from rl_core.envs import VectorEnvAdapter  # noqa: E402


class ProbeWorker(WorkerBase):
    """A worker with an empty step."""

    def noop(self) -> int:
        """An empty step call."""
        return 0


def interleaved_ms(rows: dict[str, Callable[[], Any]], calls: int) -> dict[str, float]:
    """Median wall time (ms) of each callable, called in turn so they share the load."""
    times: dict[str, list[float]] = {name: [] for name in rows}
    for fn in rows.values():
        fn()
    for _ in range(calls):
        for name, fn in rows.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1e3 for name, values in times.items()}


def call_costs(preset: str, calls: int) -> None:
    """Ping, heartbeat and step-call latencies, plain actors vs control-group actors."""
    cfg = load_config(preset)
    config = cfg.model_dump(mode="json")
    plain = ray.remote(ProbeWorker).options(num_cpus=0).remote(config, 0)
    group = WorkerGroup("probe", ProbeWorker, 1, GroupPlacement((), 0.0), lambda r: (config, r))
    group.wait_started()
    grouped = group[0]
    plain_workers, group_workers = _plain_workers(config), _group_workers(config)
    plain_rollout, group_rollout = plain_workers[1], group_workers[1]
    obs = VectorEnvAdapter(cfg.env, cfg.env.num_envs, seed=0).observation()
    rows = {
        "ping, plain actor (as before)": lambda: ray.get(plain.ping.remote()),
        "heartbeat, control group": lambda: ray.get(group.heartbeat(0)),
        "ping, default group of a control-group actor": lambda: ray.get(grouped.ping.remote()),
        "empty step, plain actor, ray.get": lambda: ray.get(plain.noop.remote()),
        "empty step, control-group actor, ray.get": lambda: ray.get(grouped.noop.remote()),
        "empty step, control-group actor, WorkerGroup.get": lambda: group.get(
            [grouped.noop.remote()], timeout_s=60.0, step="update"
        ),
        "rollout predict (one env batch), plain actor": lambda: ray.get(
            plain_rollout.predict.remote(obs, "train", 0)
        ),
        "rollout predict (one env batch), control-group actor": lambda: ray.get(
            group_rollout.predict.remote(obs, "train", 0)
        ),
    }
    print(f"call latency, median of {calls} interleaved calls:")
    for name, value in interleaved_ms(rows, calls).items():
        print(f"  {name:52s} {value:7.3f} ms")
    # Killed, not dropped: Ray 2.60 aborts (SIGABRT, logged) when a never-called actor with
    # concurrency groups exits gracefully.
    for handle in (plain, grouped, *plain_workers, *group_workers):
        ray.kill(handle)


def _plain_workers(config: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Env, rollout and actor workers as plain actors (no control group)."""
    env = ray.remote(EnvWorker).options(num_cpus=0).remote(config, 0)
    spaces = ray.get(env.spaces.remote())
    rollout = ray.remote(RolloutWorker).options(num_cpus=0).remote(config, 0, (), spaces)
    actor = ray.remote(ActorWorker).options(num_cpus=0).remote(config, 0, (), spaces)
    return env, rollout, actor


def _group_workers(config: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The same workers created by WorkerGroup (with the control group)."""
    free = GroupPlacement((), 0.0)
    env = WorkerGroup("env", EnvWorker, 1, free, lambda r: (config, r))[0]
    spaces = ray.get(env.spaces.remote())
    rollout = WorkerGroup("rollout", RolloutWorker, 1, free, lambda r: (config, r, (), spaces))
    actor = WorkerGroup("actor", ActorWorker, 1, free, lambda r: (config, r, (), spaces))
    return env, rollout[0], actor[0]


def iteration_steps(preset: str, iterations: int) -> None:
    """The embodied worker steps on plain actors vs control-group actors."""
    cfg = load_config(preset)
    config = cfg.model_dump(mode="json")
    variants = {"plain": _plain_workers(config), "control": _group_workers(config)}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for i in range(iterations + 1):
        for name, (env, rollout, actor) in variants.items():
            start = time.perf_counter()
            pair = env.interact.options(num_returns=2).remote(rollout, cfg.rollout.num_steps)
            ray.get(pair[1])
            ray.get(actor.receive_batch.remote(pair[0]))
            ray.get(actor.apply_reward.remote())
            ray.get(actor.compute_advantages.remote())
            ray.get(actor.update.remote(i))
            if i:  # the first iteration warms up
                times[name].append(time.perf_counter() - start)
    print(
        f"{preset}: rollout {cfg.env.num_envs} envs x {cfg.rollout.num_steps} steps + reward + "
        f"advantage + update, median of {iterations} interleaved iterations:"
    )
    for name, values in times.items():
        print(f"  {name:8s} {statistics.median(values) * 1e3:8.1f} ms")
    ratios = [c / p for c, p in zip(times["control"], times["plain"], strict=True)]
    print(f"  control / plain, median of per-iteration ratios = {statistics.median(ratios):.3f}")


def main() -> None:
    """Run both measurements on a 2-CPU local cluster."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=16)
    parser.add_argument("--preset", default="ppo_cartpole")
    args = parser.parse_args()
    ray_cluster.connect(num_cpus=2)
    call_costs(args.preset, args.calls)
    iteration_steps(args.preset, args.iterations)
    ray_cluster.shutdown()


if __name__ == "__main__":
    main()
