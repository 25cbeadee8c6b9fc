"""``rlpipe demos`` with ``demos.import_from``: LIBERO's HDF5 demonstrations converted.

One ``demos_import`` task per file (in the flow's process: reading HDF5 is I/O, not
simulation); each writes its episodes as shards of :data:`EPISODES_PER_SHARD` episodes.
"""

from __future__ import annotations

import logging
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from rl_core.config import RLPipeConfig
from rl_core.data import demos as demos_format
from rl_core.data.libero_hdf5 import libero_files, read_libero_file

logger = logging.getLogger("rlpipe.demos")

#: Episodes per shard: LIBERO's 128x128 episodes are ~7 MB each, a shard ~70 MB in memory.
EPISODES_PER_SHARD = 10
#: Shard numbers reserved per file (files are numbered apart, so a retried file rewrites
#: only its own shards).
SHARDS_PER_FILE = 1000


def check_importable(cfg: RLPipeConfig) -> list[str]:
    """The files ``demos.import_from`` names, after checking the config can take them.

    Raises:
        DemosError: The env is not LIBERO, or no file is there.
    """
    if cfg.env.env_type != "libero":
        raise demos_format.DemosError(
            "demos.import_from reads LIBERO's demonstration files: env.env_type must be "
            f"'libero', got {cfg.env.env_type!r}"
        )
    return [str(p) for p in libero_files(cfg.demos.import_from or "")]


@task(name="demos_import", task_run_name="demos_import-{index}", cache_policy=NO_CACHE, retries=1)
def demos_import(cfg: RLPipeConfig, folder: str, index: int, path: str) -> dict[str, Any]:
    """Convert the LIBERO file ``path`` into shards of the dataset in ``folder``.

    Returns:
        ``{"shards", "episodes", "steps", "successes"}`` of this file.
    """
    manipulation = cfg.env.manipulation
    shards: list[str] = []
    batch: list[demos_format.Episode] = []
    counts = {"episodes": 0, "steps": 0, "successes": 0}

    def flush() -> None:
        number = index * SHARDS_PER_FILE + len(shards)
        shards.append(demos_format.write_shard(folder, number, batch))
        batch.clear()

    episodes = read_libero_file(
        path,
        manipulation.obs_mode,
        manipulation.image_size,
        first_seed=index * SHARDS_PER_FILE,
        action_chunk=manipulation.action_chunk,
    )
    for episode in episodes:
        batch.append(episode)
        counts["episodes"] += 1
        counts["steps"] += len(episode)
        counts["successes"] += int(episode.success)
        if len(batch) == EPISODES_PER_SHARD:
            flush()
    if batch:
        flush()
    logger.info("demos: %s -> %d episodes", path, counts["episodes"])
    return {"shards": shards, **counts}


def import_demos(cfg: RLPipeConfig, folder: str) -> list[str]:
    """Convert every file of ``demos.import_from``, one task each; the shard names."""
    files = check_importable(cfg)
    results = [demos_import(cfg, folder, i, path) for i, path in enumerate(files)]
    return [name for result in results for name in result["shards"]]
