"""Example rlpipe extension package: what a user's own repository looks like.

Install it next to rlpipe (``pip install -e examples/ext_policy``) and name it in
``RLPIPE_EXT_MODULE``::

    RLPIPE_EXT_MODULE=ext_policy python flows/train.py --config examples/ext_policy/ppo_catch_cnn.yaml

rlpipe imports the module in the driver, in every Ray worker and in its standalone tools,
and calls :func:`register` there. Nothing registers on import alone, so importing the
package for its classes has no side effects.
"""

from ext_policy.catch_env import CatchEnv, make_catch_env
from ext_policy.cnn_policy import CNNActorCritic, build_cnn_actor_critic
from ext_policy.signals import monte_carlo_advantage, sign_reward

__all__ = [
    "CNNActorCritic",
    "CatchEnv",
    "build_cnn_actor_critic",
    "make_catch_env",
    "monte_carlo_advantage",
    "register",
    "sign_reward",
]


def register() -> None:
    """Register this package's env, model, reward and advantage with rlpipe."""
    from rl_core.api import register_advantage, register_env, register_model, register_reward

    register_env("catch", make_catch_env)
    register_model("cnn_actor_critic", build_cnn_actor_critic, category="embodied")
    register_reward("sign", sign_reward)
    register_advantage("monte_carlo", monte_carlo_advantage)
