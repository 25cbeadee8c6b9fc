"""Model registry and the built-in MLP actor-critic (discrete and continuous heads)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from rl_core.config import load_config
from rl_core.envs import EnvSpaces
from rl_core.models import MODELS, BasePolicy, get_model, register_model
from rl_core.models.mlp_actor_critic import MLPActorCritic
from rl_core.registry import RegistryError

BATCH = 16
CASES = [
    pytest.param("CartPole-v1", "clip", id="discrete"),
    pytest.param("Pendulum-v1", "clip", id="continuous-clip"),
    pytest.param("Pendulum-v1", "tanh", id="continuous-tanh"),
]


def spaces_of(env_id):
    env = gym.make(env_id)
    try:
        return EnvSpaces(env.observation_space, env.action_space)
    finally:
        env.close()


def build(env_id, continuous_action="clip", seed=0, **model_overrides):
    cfg = load_config().model.model_copy(
        update={"continuous_action": continuous_action, **model_overrides}
    )
    torch.manual_seed(seed)
    spaces = spaces_of(env_id)
    return get_model(cfg, spaces), spaces


def observations(spaces, seed=0, n=BATCH):
    space = spaces.observation_space
    rng = np.random.default_rng(seed)
    low = np.maximum(space.low, -3.0)
    high = np.minimum(space.high, 3.0)
    # a wide spread so that clipped continuous actions hit the bounds too
    return {"states": rng.uniform(low, high, size=(n, *space.shape)).astype(np.float32)}


def gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize(("env_id", "mode"), CASES)
def test_predict_actions_inside_space_with_batch_results(env_id, mode):
    policy, spaces = build(env_id, mode, init_log_std=1.0)  # wide noise: reach the bounds
    assert isinstance(policy, MLPActorCritic) and isinstance(policy, BasePolicy)
    actions, result = policy.predict_action_batch(observations(spaces), generator=gen(0))
    assert isinstance(actions, np.ndarray)
    space = spaces.action_space
    if isinstance(space, gym.spaces.Discrete):
        assert actions.shape == (BATCH,)
        assert np.issubdtype(actions.dtype, np.integer)
        assert len(set(actions.tolist())) == 2  # both actions sampled from ~uniform logits
    else:
        assert actions.shape == (BATCH, 1)
        assert actions.dtype == np.float32
        assert np.all(actions >= space.low) and np.all(actions <= space.high)
        if mode == "clip":
            assert np.any(np.abs(actions) == 2.0)  # some samples were clipped to the bounds
    for a in actions:
        assert space.contains(np.asarray(a, dtype=space.dtype))
    assert set(result) == {"prev_logprobs", "prev_values", "forward_inputs"}
    assert result["prev_logprobs"].shape == (BATCH,)
    assert torch.isfinite(result["prev_logprobs"]).all()
    assert result["prev_values"].shape == (BATCH,)
    assert set(result["forward_inputs"]) == {"states", "model_action"}
    for t in result["forward_inputs"].values():
        assert isinstance(t, torch.Tensor) and t.shape[0] == BATCH
    assert not result["prev_logprobs"].requires_grad


@pytest.mark.parametrize(("env_id", "mode"), CASES)
def test_default_forward_recomputes_prev_logprobs(env_id, mode):
    policy, spaces = build(env_id, mode)
    _, result = policy.predict_action_batch(observations(spaces), generator=gen(1))
    out = policy(forward_type="default_forward", forward_inputs=result["forward_inputs"])
    assert set(out) == {"logprobs", "values", "entropy"}
    torch.testing.assert_close(out["logprobs"], result["prev_logprobs"], atol=1e-5, rtol=0)
    torch.testing.assert_close(out["values"], result["prev_values"], atol=1e-6, rtol=0)
    assert out["entropy"].shape == (BATCH,)
    assert out["logprobs"].requires_grad  # training needs gradients through this branch
    out = policy(
        forward_inputs=result["forward_inputs"], compute_values=False, compute_entropy=False
    )
    assert set(out) == {"logprobs"}


def test_tanh_logprob_matches_change_of_variables():
    policy, spaces = build("Pendulum-v1", "tanh")
    actions, result = policy.predict_action_batch(observations(spaces), generator=gen(2))
    u = result["forward_inputs"]["model_action"]
    states = result["forward_inputs"]["states"]
    with torch.no_grad():
        mean = policy.actor(states)
        std = policy.log_std.exp()
    base = torch.distributions.Normal(mean, std).log_prob(u).sum(-1)
    # env action = 2 * tanh(u) on [-2, 2]; log p(a_unit) = log p(u) - log(1 - tanh(u)^2)
    expected = base - torch.log1p(-(torch.tanh(u) ** 2)).sum(-1)
    torch.testing.assert_close(result["prev_logprobs"], expected, atol=1e-4, rtol=1e-5)
    np.testing.assert_allclose(actions, 2.0 * np.tanh(u.numpy()), atol=1e-6)


@pytest.mark.parametrize(("env_id", "mode"), CASES)
def test_eval_mode_is_deterministic(env_id, mode):
    policy, spaces = build(env_id, mode)
    obs = observations(spaces)
    a1, _ = policy.predict_action_batch(obs, mode="eval", generator=gen(0))
    a2, _ = policy.predict_action_batch(obs, mode="eval", generator=gen(123))
    np.testing.assert_array_equal(a1, a2)
    with torch.no_grad():
        logits_or_mean = policy.actor(torch.as_tensor(obs["states"]))
    if env_id == "CartPole-v1":
        np.testing.assert_array_equal(a1, logits_or_mean.argmax(-1).numpy())
    elif mode == "clip":
        np.testing.assert_allclose(a1, logits_or_mean.clamp(-2, 2).numpy(), atol=1e-6)
    else:
        np.testing.assert_allclose(a1, 2 * torch.tanh(logits_or_mean).numpy(), atol=1e-6)


@pytest.mark.parametrize(("env_id", "mode"), CASES)
def test_same_generator_seed_same_actions(env_id, mode):
    policy, spaces = build(env_id, mode, init_log_std=0.5)
    obs = observations(spaces)
    a1, r1 = policy.predict_action_batch(obs, generator=gen(42))
    a2, r2 = policy.predict_action_batch(obs, generator=gen(42))
    a3, _ = policy.predict_action_batch(obs, generator=gen(43))
    np.testing.assert_array_equal(a1, a2)
    torch.testing.assert_close(r1["prev_logprobs"], r2["prev_logprobs"])
    assert not np.array_equal(a1, a3)


def test_same_torch_seed_same_weights():
    p1, _ = build("CartPole-v1", seed=5)
    p2, _ = build("CartPole-v1", seed=5)
    for (n1, t1), (n2, t2) in zip(p1.state_dict().items(), p2.state_dict().items(), strict=True):
        assert n1 == n2
        torch.testing.assert_close(t1, t2)


def test_hidden_sizes_and_values_without_critic():
    policy, spaces = build("CartPole-v1", hidden_sizes=[8, 4, 2])
    widths = [m.out_features for m in policy.actor if isinstance(m, torch.nn.Linear)]
    assert widths == [8, 4, 2, 2]
    _, result = policy.predict_action_batch(observations(spaces), compute_values=False)
    assert result["prev_values"] is None
    values = policy(forward_type="value_forward", env_obs=observations(spaces))
    assert values.shape == (BATCH,)


def test_unknown_forward_type_lists_allowed():
    policy, _ = build("CartPole-v1")
    with pytest.raises(ValueError) as info:
        policy(forward_type="policy_forward", forward_inputs={})
    msg = str(info.value)
    assert "MLPActorCritic has no forward_type 'policy_forward'" in msg
    assert "allowed: default_forward, value_forward" in msg


def test_unsupported_action_space():
    with pytest.raises(ValueError, match="Discrete or 1-D Box"):
        MLPActorCritic(4, gym.spaces.MultiDiscrete([2, 3]), [8])


def test_register_model_duplicate_and_force():
    original = MODELS.get("mlp_actor_critic")

    def other(cfg, spaces):
        return original.builder(cfg, spaces)

    with pytest.raises(RegistryError, match=r"'mlp_actor_critic' is already registered.*force"):
        register_model("MLP_Actor_Critic", other)
    assert MODELS.get("mlp_actor_critic") is original
    # re-registering the same builder is a no-op, not an error
    assert register_model("mlp_actor_critic", original.builder) is original.builder
    try:
        assert register_model("mlp_actor_critic", other, force=True) is other
        assert MODELS.get("mlp_actor_critic").builder is other
        policy, _ = build("CartPole-v1")
        assert isinstance(policy, MLPActorCritic)
    finally:
        MODELS.register("mlp_actor_critic", original, force=True)
    assert MODELS.get("mlp_actor_critic") is original


def test_register_model_bad_category():
    with pytest.raises(ValueError, match="category must be a lowercase identifier"):
        register_model("test_bad_category", lambda cfg, spaces: None, category="Robot arm")
    assert "test_bad_category" not in MODELS


def test_builder_returning_non_policy_raises_type_error():
    register_model("test_not_a_policy", lambda cfg, spaces: torch.nn.Linear(1, 1))
    try:
        cfg = load_config().model.model_copy(update={"model_type": "test_not_a_policy"})
        with pytest.raises(TypeError) as info:
            get_model(cfg, spaces_of("CartPole-v1"))
        assert "'test_not_a_policy' returned Linear" in str(info.value)
        assert "BasePolicy" in str(info.value)
    finally:
        MODELS.unregister("test_not_a_policy")


def test_unknown_model_type_lists_known():
    cfg = load_config().model.model_copy(update={"model_type": "nope"})
    with pytest.raises(
        RegistryError, match=r"unknown model type 'nope'; known: .*mlp_actor_critic"
    ):
        get_model(cfg, spaces_of("CartPole-v1"))


def test_get_model_loads_builtins_itself(monkeypatch):
    """A fresh process (e.g. a Ray worker) may call get_model before anything imported the
    built-in models; simulate that by forgetting the built-in modules and registration."""
    import sys

    import rl_core.models

    original = MODELS.get("mlp_actor_critic")
    monkeypatch.delitem(sys.modules, "rl_core.models.mlp_actor_critic", raising=False)
    monkeypatch.delattr(rl_core.models, "mlp_actor_critic", raising=False)
    MODELS.unregister("mlp_actor_critic")
    try:
        policy, _ = build("CartPole-v1")
        assert type(policy).__name__ == "MLPActorCritic"
    finally:
        MODELS.register("mlp_actor_critic", original, force=True)
