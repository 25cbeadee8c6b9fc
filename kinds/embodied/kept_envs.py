"""Evaluation envs kept in their process between evaluations (``eval.keep_envs``).

Building a manipulation simulator takes about half a second (ManiSkill3, LIBERO), and an
evaluation used to build and close all of its envs every time: for ``ppo_pushcube``, 15 of
the 18 seconds of an evaluation of 16 episodes on 2 cores. An evaluation task borrows the
envs of its settings from this process's store and gives them back when its episodes are
played; the next evaluation in the same Ray worker (or driver) plays on them again.

Every evaluation resets each env with its episode's seed, and the simulators' episodes do not
depend on the episodes played before a reset, so kept envs give the results fresh ones give
(tested). An env borrowed by one evaluation is not in the store, so two evaluations at once
never share one; envs of an evaluation that raised are closed, not given back.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rl_core.envs import VectorEnvAdapter

logger = logging.getLogger(__name__)

#: Env sets kept at most per process (least recently used closed first).
MAX_KEPT = 2

_kept: OrderedDict[tuple[str, int], VectorEnvAdapter] = OrderedDict()
_lock = threading.Lock()


def _key(env_cfg: Any, count: int) -> tuple[str, int]:
    return json.dumps(env_cfg.model_dump(mode="json"), sort_keys=True), count


def _close(envs: VectorEnvAdapter) -> None:
    try:
        envs.close()
    except Exception:  # noqa: BLE001 - closing is best effort; the envs are dropped anyway
        logger.debug("closing kept evaluation envs failed", exc_info=True)


@contextmanager
def evaluation_envs(env_cfg: Any, count: int, keep: bool) -> Iterator[VectorEnvAdapter]:
    """``count`` sync envs of ``env_cfg``, kept for the next evaluation when ``keep``.

    Args:
        env_cfg: The run's ``env`` section.
        count: Envs played side by side.
        keep: Borrow from and give back to the process's store; False builds and closes.

    Yields:
        The envs (the caller resets them with its seeds).
    """
    key = _key(env_cfg, count)
    envs = None
    if keep:
        with _lock:
            envs = _kept.pop(key, None)
    if envs is None:
        envs = VectorEnvAdapter(env_cfg, count, seed=0, vectorization="sync")
    try:
        yield envs
    except BaseException:
        _close(envs)
        raise
    if not keep:
        _close(envs)
        return
    with _lock:
        extra = _kept.pop(key, None)  # another evaluation gave back the same settings
        _kept[key] = envs
        while len(_kept) > MAX_KEPT:
            _close(_kept.popitem(last=False)[1])
    if extra is not None:
        _close(extra)


def close_kept_envs() -> None:
    """Close every kept env set of this process (also run at exit)."""
    with _lock:
        kept = list(_kept.values())
        _kept.clear()
    for envs in kept:
        _close(envs)


atexit.register(close_kept_envs)
