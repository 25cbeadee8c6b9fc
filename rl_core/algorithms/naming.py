"""The one name of a run's algorithm.

The same name appears in the MLflow tag ``rlpipe.algorithm``, the Prefect tag
``algorithm:<name>`` of the train flow run (and everything under it), the run summary and
the ``algorithm:<name>`` tags of the deployments in ``prefect.yaml``. It names the training
method as papers and other libraries do, not the config field that selects it:

- off-policy runs by their algorithm, ``algorithm.loss_type``: ``sac``, ``crossq``, ``rlpd``;
- on-policy runs by their advantage estimator's method (:data:`ON_POLICY_NAMES`): ``gae`` →
  ``ppo``, ``grpo`` → ``grpo``, ``reinforce_plus_plus[_baseline]`` → ``reinforce_pp``...;
  a group-relative run with ``algorithm.dynamic_sampling`` on is ``dapo``;
- supervised fine-tuning (``flows/sft.py``) is ``sft``;
- a run without an advantage estimator (a reward model) by its loss, ``bradley_terry``.

An advantage estimator registered by an extension without a name here goes by its own
registered name; register one with :func:`register_algorithm_name`.
"""

from __future__ import annotations

from typing import Any

from rl_core.algorithms.actor_critic_family import actor_critic_spec
from rl_core.registry import Registry

#: Algorithm name of each on-policy advantage estimator (``algorithm.adv_type``).
ON_POLICY_NAMES: Registry[str] = Registry("algorithm name")
#: Name of a supervised fine-tuning run.
SUPERVISED = "sft"
#: Name of a group-relative run that filters uninformative groups (``dynamic_sampling``).
DYNAMIC_SAMPLING = "dapo"
_GROUP_RELATIVE = {"grpo", "dr_grpo"}


def register_algorithm_name(adv_type: str, name: str, *, force: bool = False) -> None:
    """Name the algorithm of runs whose ``algorithm.adv_type`` is ``adv_type``.

    Args:
        adv_type: A registered advantage estimator.
        name: What its runs are called in tags and summaries.
        force: Replace an existing name.
    """
    ON_POLICY_NAMES.register(adv_type, name, force=force)


for _adv, _name in (
    ("gae", "ppo"),
    ("token_gae", "ppo"),
    ("grpo", "grpo"),
    ("dr_grpo", "dr_grpo"),
    ("episode_grpo", "grpo"),  # GRPO over env episodes (RLinf's VLA recipe)
    ("rloo", "rloo"),
    ("reinforce_plus_plus", "reinforce_pp"),
    ("reinforce_plus_plus_baseline", "reinforce_pp"),
    ("outcome", "reinforce"),
):
    register_algorithm_name(_adv, _name)


def algorithm_name(algorithm: Any, *, supervised: bool = False) -> str:
    """The name a run's algorithm goes by in MLflow, Prefect and deployments.

    Args:
        algorithm: The config's ``algorithm`` section.
        supervised: The run is supervised fine-tuning (``flows/sft.py``).

    Returns:
        ``sft``, the off-policy algorithm, the on-policy method's name, or the loss of a
        run without advantages (``bradley_terry``).
    """
    if supervised:
        return SUPERVISED
    if getattr(algorithm, "adv_type", None) is None:  # no advantages: a reward model's loss
        return algorithm.loss_type.lower()
    if actor_critic_spec(algorithm.loss_type) is not None:
        return algorithm.loss_type.lower()
    adv_type = ON_POLICY_NAMES.normalize(algorithm.adv_type)
    if adv_type in _GROUP_RELATIVE and getattr(algorithm, "dynamic_sampling", False):
        return DYNAMIC_SAMPLING
    return ON_POLICY_NAMES.get(adv_type) if adv_type in ON_POLICY_NAMES else adv_type
