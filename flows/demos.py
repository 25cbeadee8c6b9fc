"""Demonstrations: ``rlpipe demos --config sft_mlp_metaworld [section.field=value ...]``.

Plays ``demos.episodes`` episodes of the preset's env with the env's scripted expert
(:mod:`rl_core.envs.experts`), split over ``demos.num_workers`` parallel tasks on the Ray
cluster, and writes the dataset (:mod:`rl_core.data.demos`) to ``demos.path`` (default
``<run.output_dir>/demos/<env type>-<digest>-seed<seed>``). The flow shows in Prefect as ``demos``, with
one ``demos_shard`` task per part; the dataset is logged to MLflow as an input of a
``demos-<env type>`` run. ``demos.action_noise`` adds Gaussian noise to the expert's
actions (one std, or a list the episodes take in turn: data of mixed quality), recorded per
episode in the shards and per std in ``demos.json``. ``rlpipe sft``, and ``rlpipe train`` of
an offline algorithm (``iql``), run this flow first when their dataset is missing. With
``demos.import_from``, the flow converts LIBERO's HDF5 demonstration files instead
(:mod:`flows.demos_import`).
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows.demos_import import import_demos
from infra.cluster import ray_cluster
from infra.cluster.runtime_env import apply_base_env
from infra.driver.session import default_artifact_location, resolve_tracking_uri
from infra.tracking import MlflowTracker
from rl_core.config import RLPipeConfig, load_config
from rl_core.config.naming import experiment_name
from rl_core.data import demos as demos_format
from rl_core.data import expert_play
from rl_core.seeding import worker_seed

logger = logging.getLogger("rlpipe.demos")


def _play_shard(
    env: dict[str, Any], env_type: str, seeds: list[int], noise: list[float], noise_seed: int
) -> list[demos_format.Episode]:
    """Play one part's episodes (in a Ray worker)."""
    from infra.cluster.runtime_env import limit_threads
    from infra.extensions import load_extension_modules
    from rl_core.config.policy_sections import EnvConfig
    from rl_core.envs.experts import expert_for

    limit_threads()
    load_extension_modules()
    env_cfg = EnvConfig.model_validate(env)
    return expert_play.play_expert_episodes(env_cfg, seeds, expert_for(env_type), noise, noise_seed)


@task(name="demos_shard", task_run_name="demos_shard-{index}", cache_policy=NO_CACHE, retries=1)
def demos_shard(
    cfg: RLPipeConfig, folder: str, index: int, seeds: list[int], noise: list[float]
) -> dict[str, Any]:
    """Play ``seeds`` on a Ray worker and write shard ``index``; returns its counts.

    ``noise`` holds the std of the action noise of each seed's episode.
    """
    import ray

    remote = ray.remote(num_cpus=1)(_play_shard)
    env = cfg.env.model_dump(mode="json")
    noise_seed = worker_seed(cfg.run.seed, "demos", index)
    episodes = ray.get(remote.remote(env, cfg.env.env_type, seeds, noise, noise_seed))
    name = demos_format.write_shard(folder, index, episodes)
    return {
        "shard": name,
        "episodes": len(episodes),
        "steps": sum(len(e) for e in episodes),
        "successes": sum(e.success for e in episodes),
    }


@flow(name="demos", flow_run_name="demos-{preset}", persist_result=False, log_prints=False)
def demos(preset: str = "sft_mlp_metaworld", overrides: list[str] | None = None) -> dict[str, Any]:
    """Collect the preset's demonstration dataset (expert play, or LIBERO's files).

    The env's scripted expert plays ``demos.episodes`` episodes; with
    ``demos.import_from``, LIBERO's demonstration files are converted instead.

    Returns:
        ``{"path", "episodes", "steps", "successes", "seconds"}``.
    """
    apply_base_env()
    cfg = load_config(preset, overrides or [])
    folder = cfg.demos_path()
    start = time.perf_counter()
    if cfg.demos.import_from:  # LIBERO's files, converted: no env to play
        shard_names, source = import_demos(cfg, folder), "libero_hdf5"
    else:
        shard_names, source = _play(cfg, folder), "scripted_expert"
    manifest = demos_format.write_manifest(
        folder, shard_names, cfg.env.model_dump(mode="json"), source
    )
    seconds = time.perf_counter() - start
    summary = {
        "path": str(folder),
        "episodes": manifest["episodes"],
        "steps": manifest["steps"],
        "successes": manifest["successes"],
        "seconds": seconds,
    }
    logger.info(
        "demos: %d episodes (%d successful, %d steps) in %.1f s -> %s",
        summary["episodes"],
        summary["successes"],
        summary["steps"],
        seconds,
        folder,
    )
    _track(cfg, manifest, summary)
    return summary


def _play(cfg: RLPipeConfig, folder: str) -> list[str]:
    """Play the env's scripted expert on the Ray cluster, one task per part; shard names.

    Raises:
        DemosError: The env type has no scripted expert (before any worker starts).
    """
    from rl_core.envs.experts import EXPERTS

    if cfg.env.env_type not in EXPERTS:
        raise demos_format.DemosError(
            f"env type {cfg.env.env_type!r} has no scripted expert to play demonstrations "
            f"(the types that have one: {', '.join(EXPERTS.names())}): set demos.import_from "
            "to demonstration files to convert (LIBERO's HDF5), or demos.path to a dataset"
        )
    ray_cluster.connect_cluster(cfg.cluster)
    # the dataset's own seeds: not the training envs' nor the evaluation's
    base = worker_seed(cfg.run.seed, "demos", 0)
    seeds = [base + i for i in range(cfg.demos.episodes)]
    noise = dict(
        zip(seeds, expert_play.noise_levels(cfg.demos.action_noise, len(seeds)), strict=True)
    )
    parts = expert_play.split_seeds(seeds, cfg.demos.num_workers)
    futures = [
        demos_shard.submit(cfg, folder, i, part, [noise[s] for s in part])
        for i, part in enumerate(parts)
    ]
    return [f.result()["shard"] for f in futures]


def dataset_digest(manifest: dict[str, Any]) -> str:
    """A short fingerprint of a dataset (its manifest: counts, shapes, shard names)."""
    text = repr(sorted((k, repr(v)) for k, v in manifest.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def dataset_profile(manifest: dict[str, Any]) -> dict[str, Any]:
    """The counts MLflow shows next to a dataset."""
    return {k: manifest[k] for k in ("episodes", "steps", "successes")}


def _track(cfg: RLPipeConfig, manifest: dict[str, Any], summary: dict[str, Any]) -> None:
    """A ``demos-<env type>`` MLflow run with the dataset as its input."""
    if not cfg.tracking.enabled:
        return
    output_dir = Path(cfg.run.output_dir)
    uri = resolve_tracking_uri(cfg.tracking.tracking_uri, output_dir)
    tracker = MlflowTracker(
        uri,
        experiment_name(cfg),
        f"demos-{cfg.env.env_type}",
        artifact_location=cfg.tracking.artifact_location
        or default_artifact_location(uri, output_dir),
    )
    try:
        tracker.log_params(
            {
                "demos.episodes": str(cfg.demos.episodes),
                "demos.action_noise": str(cfg.demos.action_noise),
                "env": cfg.env.env_type,
            }
        )
        episodes = max(1, summary["episodes"])
        tracker.log_metrics(
            {
                "demos/episodes": float(summary["episodes"]),
                "demos/success_rate": summary["successes"] / episodes,
                "demos/steps": float(summary["steps"]),
                "demos/seconds": summary["seconds"],
            },
            step=0,
            synchronous=True,
        )
        tracker.log_dataset(
            Path(summary["path"]).name,
            str(Path(summary["path"]).resolve()),
            dataset_digest(manifest),
            dataset_profile(manifest),
            "demonstrations",
        )
        tracker.finish("FINISHED")
    except Exception:
        tracker.finish("FAILED")
        raise


def main(argv: list[str] | None = None, prog: str = "rlpipe demos") -> int:
    """CLI entry point (the train CLI's arguments)."""
    from flows.cli import run_cli

    return run_cli(
        _demos_cli,
        argv,
        default_preset="sft_mlp_metaworld",
        prog=prog,
        description="Collect a preset's demonstration dataset with rlpipe: its env's scripted "
        "expert plays demos.episodes episodes (or, with demos.import_from, LIBERO's "
        "demonstration files are converted) into demos.path (default: a folder under "
        "<run.output_dir>/demos/).",
    )


def _demos_cli(preset: str, overrides: list[str] | None = None) -> dict[str, Any]:
    summary = demos(preset=preset, overrides=overrides)
    return {"report": summary, "stopped": None}


if __name__ == "__main__":
    sys.exit(main())
