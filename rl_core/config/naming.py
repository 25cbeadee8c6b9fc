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
from typing import Any

#: Characters MLflow refuses in registered model names, replaced by "_".
_MODEL_NAME_UNSAFE = re.compile(r"[/:\s]+")
#: A registered model version: ``models:/<name>@<alias>``, ``/<version>`` or ``/latest``.
MODEL_URI = re.compile(
    r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[\w\-]+)|/(?P<version>\d+|latest))$"
)
#: The forms :data:`MODEL_URI` accepts, for error messages.
MODEL_URI_FORMS = "models:/<name>@<alias>, models:/<name>/<version> or models:/<name>/latest"


def task_name(cfg: Any) -> str:
    """The run's task, named by its kind: the env id (embodied), the prompt set (reasoning)."""
    from rl_core.kind import kind_of

    return kind_of(cfg).task_name(cfg)


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
    from rl_core.kind import kind_of

    settings = kind_of(cfg).protocol(cfg)
    payload = json.dumps(
        {"category": cfg.category, "task": task_name(cfg), **settings}, sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:12]
