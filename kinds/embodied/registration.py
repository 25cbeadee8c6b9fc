"""The embodied kind: control policies trained in simulated environments.

Its config adds ``env`` and ``replay`` to the shared sections and extends ``model``,
``rollout``, ``algorithm`` and ``eval``; its runs are named after the env id, and a
registered version is scored again by playing the protocol's evaluation episodes.
"""

from __future__ import annotations

import json
from typing import Any

from kinds.embodied.config import EmbodiedConfig
from rl_core.kind import Kind, register_kind


def task_name(cfg: EmbodiedConfig) -> str:
    """The gymnasium id; for other env types their name (and the env id when one is set)."""
    env = cfg.env
    if env.env_type == "gym":
        return str(env.env_id)
    return f"{env.env_type}-{env.env_id}" if "env_id" in env.model_fields_set else env.env_type


def protocol(cfg: EmbodiedConfig) -> dict[str, Any]:
    """The env, the evaluation episodes and the reward: what a return means."""
    env, ev = cfg.env, cfg.eval
    return {
        "env": [env.env_type, env.env_id, env.max_episode_steps, env.kwargs],
        "eval": [ev.num_episodes, ev.deterministic, ev.max_steps],
        "reward": [cfg.reward.reward_type, cfg.reward.scale],
    }


def data_fingerprint(cfg: EmbodiedConfig, digest: Any) -> None:
    """The env a policy trains in: its type, id and settings."""
    env = cfg.env.model_dump(mode="json", include={"env_type", "env_id", "kwargs"})
    digest.update(json.dumps(env, sort_keys=True).encode())


def runtime_of(cfg: EmbodiedConfig) -> type:
    """The runtime class of an embodied run (on- or off-policy; imported now)."""
    from kinds.embodied.variants import runtime_for

    return runtime_for(cfg)


def score_version(protocol: dict[str, Any], model_dir: Any, version: Any) -> Any:
    """Score a registered version by playing the protocol's evaluation episodes.

    See :func:`kinds.embodied.evaluation.score_version` (imported now: it needs Ray).
    """
    from kinds.embodied.evaluation import score_version as score

    return score(protocol, model_dir, version)


EMBODIED = register_kind(
    Kind(
        name="embodied",
        config=EmbodiedConfig,
        runtime=runtime_of,
        score_metric="eval/return_mean",
        task_name=task_name,
        protocol=protocol,
        data_fingerprint=data_fingerprint,
        version_scorer=score_version,
    )
)
