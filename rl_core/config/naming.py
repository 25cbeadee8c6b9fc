"""Names keyed by what a run trains: its task, its MLflow experiment, its registered model.

A run's *task* is what its policy is trained and evaluated on: the env id for embodied
runs, the prompt set for reasoning runs. Its *model kind* is the registered model type.
Together they name the MLflow experiment and the registered model (unless the config names
them), so runs of different tasks never share either, and the ``best`` alias only compares
policies of one task. The *evaluation protocol* is a short hash of every setting that
changes what an evaluation score means (the task, the evaluation episodes or prompts, the
reward); a version only takes ``best`` from one scored under the same protocol.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Characters MLflow refuses in registered model names, replaced by "_".
_MODEL_NAME_UNSAFE = re.compile(r"[/:\s]+")
_ARITH_OPS = {"+": "add", "-": "sub", "*": "mul"}


def _embodied_task(cfg: Any) -> str:
    """The gymnasium id; for other env types their name (and the env id when one is set)."""
    env = cfg.env
    if env.env_type == "gym":
        return str(env.env_id)
    return f"{env.env_type}-{env.env_id}" if "env_id" in env.model_fields_set else env.env_type


def _reasoning_task(cfg: Any) -> str:
    data = cfg.data
    if data.source == "arithmetic":
        ops = "-".join(_ARITH_OPS[op] for op in data.arithmetic_ops)
        return f"arith-{ops}-{data.arithmetic_max_operand}"
    files = data.train_files or data.eval_files
    return Path(files[0]).stem if files else "prompts"


def _embodied_protocol(cfg: Any) -> dict[str, Any]:
    env, ev = cfg.env, cfg.eval
    return {
        "env": [env.env_type, env.env_id, env.max_episode_steps, env.kwargs],
        "eval": [ev.num_episodes, ev.deterministic, ev.max_steps],
        "reward": [cfg.reward.reward_type, cfg.reward.scale],
    }


def _reasoning_protocol(cfg: Any) -> dict[str, Any]:
    data = cfg.data
    return {
        "data": [
            data.source,
            data.arithmetic_ops,
            data.arithmetic_max_operand,
            data.eval_files,
            data.eval_size,
            data.prompt_template,
            data.apply_chat_template,
            data.system_prompt,
        ],
        "eval": [cfg.rollout.max_new_tokens],  # the score is greedy: pass_k does not count
        "reward": cfg.reward.model_dump(mode="json", exclude={"num_tasks", "fanout_min_seconds"}),
    }


#: Per model category: the task's name and the settings of its evaluation protocol.
TASK_NAMERS: dict[str, Callable[[Any], str]] = {
    "embodied": _embodied_task,
    "reasoning": _reasoning_task,
}
PROTOCOLS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "embodied": _embodied_protocol,
    "reasoning": _reasoning_protocol,
}


def task_name(cfg: Any) -> str:
    """The run's task: the env id (embodied), the prompt set (reasoning), else the preset."""
    namer = TASK_NAMERS.get(cfg.category)
    return namer(cfg) if namer else str(cfg.preset)


def model_kind(cfg: Any) -> str:
    """The registered model type the run trains (``mlp_actor_critic``, ``hf_causal_lm``...)."""
    return str(cfg.model.model_type).lower()


def experiment_name(cfg: Any) -> str:
    """``tracking.experiment_name``, or ``<task>-<model kind>`` (e.g. ``CartPole-v1-mlp_sac``)."""
    return cfg.tracking.experiment_name or f"{task_name(cfg)}-{model_kind(cfg)}"


def model_name_key(cfg: Any) -> str:
    """``<task>-<model kind>`` with the characters MLflow refuses in model names replaced."""
    return _MODEL_NAME_UNSAFE.sub("_", f"{task_name(cfg)}-{model_kind(cfg)}")


def registered_model_name(cfg: Any) -> str | None:
    """``tracking.registered_model_name`` filled in (None: the run registers nothing).

    The template's fields: ``{task}`` (:func:`model_name_key`), ``{preset}``, ``{run_name}``.
    """
    template = cfg.tracking.registered_model_name
    if not template:
        return None
    return template.format(task=model_name_key(cfg), preset=cfg.preset, run_name=cfg.run.name)


def eval_protocol(cfg: Any) -> str:
    """A 12-hex-digit hash of the settings that give an evaluation score its meaning."""
    describe = PROTOCOLS.get(cfg.category)
    settings = describe(cfg) if describe else cfg.eval.model_dump(mode="json")
    payload = json.dumps(
        {"category": cfg.category, "task": task_name(cfg), **settings}, sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:12]
