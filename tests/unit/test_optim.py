"""build_optimizer, learning_rate, set_learning_rate and clip_gradients on small modules."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core.config.training_sections import ActorConfig
from rl_core.training.optim import (
    ADAM_EPS,
    adam_eps,
    build_optimizer,
    clip_gradients,
    learning_rate,
    set_learning_rate,
)


def linear() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))


def test_the_default_is_adam_with_the_configured_lr_decay_and_epsilon() -> None:
    model = linear()
    optimizer = build_optimizer(model.parameters(), ActorConfig(lr=0.01))
    assert type(optimizer) is torch.optim.Adam
    group = optimizer.param_groups[0]
    assert group["lr"] == 0.01 and group["weight_decay"] == 0.0
    assert group["eps"] == ADAM_EPS == 1e-5 and group["betas"] == (0.9, 0.999)
    assert group["params"] == list(model.parameters())  # one group, the parameters' order
    assert len(optimizer.param_groups) == 1


def test_adamw_sgd_and_explicit_settings() -> None:
    actor = ActorConfig(optimizer="adamw", lr=0.1, weight_decay=0.05, adam_eps=1e-7)
    optimizer = build_optimizer(linear().parameters(), actor, betas=(0.5, 0.9), fused=True)
    group = optimizer.param_groups[0]
    assert type(optimizer) is torch.optim.AdamW
    assert (group["weight_decay"], group["eps"], group["betas"]) == (0.05, 1e-7, (0.5, 0.9))
    assert group["fused"] is True
    sgd = build_optimizer(linear().parameters(), ActorConfig(optimizer="sgd", weight_decay=0.1))
    assert type(sgd) is torch.optim.SGD and sgd.param_groups[0]["weight_decay"] == 0.1
    assert "eps" not in sgd.param_groups[0] and "betas" not in sgd.param_groups[0]


def test_overrides_and_the_trainers_default_epsilon() -> None:
    actor = ActorConfig(lr=0.1, weight_decay=0.2)
    optimizer = build_optimizer(
        linear().parameters(), actor, lr=0.3, weight_decay=0.0, default_eps=1e-8
    )
    group = optimizer.param_groups[0]
    assert (group["lr"], group["weight_decay"], group["eps"]) == (0.3, 0.0, 1e-8)
    assert adam_eps(ActorConfig(), 1e-8) == 1e-8
    assert adam_eps(ActorConfig(adam_eps=1e-3), 1e-8) == 1e-3


def test_parameter_groups_keep_their_own_options() -> None:
    model = linear()
    groups = [
        {"params": model[0].parameters()},
        {"params": model[1].parameters(), "weight_decay": 0.0},
    ]
    optimizer = build_optimizer(groups, ActorConfig(optimizer="adamw", weight_decay=0.1))
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.1, 0.0]


def test_an_unknown_optimizer_is_refused_by_name() -> None:
    actor = ActorConfig().model_copy(update={"optimizer": "lion"})
    with pytest.raises(ValueError, match=r"actor.optimizer = 'lion' is unknown; allowed: adam"):
        build_optimizer(linear().parameters(), actor)


def test_learning_rate_follows_the_schedule_and_warmup() -> None:
    constant = ActorConfig(lr=0.2)
    assert [learning_rate(constant, i, 10) for i in (0, 5, 9)] == [0.2, 0.2, 0.2]
    decaying = ActorConfig(lr=1.0, lr_schedule="linear", warmup_iterations=2)
    rates = [learning_rate(decaying, i, 10) for i in range(10)]
    assert rates[:3] == pytest.approx([0.5, 1.0, 1.0])
    assert rates[2:] == sorted(rates[2:], reverse=True) and rates[-1] < 0.2
    assert learning_rate(decaying, 6, 10, base_lr=0.1) == pytest.approx(0.1 * rates[6])


def test_set_learning_rate_sets_every_group() -> None:
    model = linear()
    groups = [{"params": model[0].parameters()}, {"params": model[1].parameters(), "lr": 5.0}]
    optimizer = build_optimizer(groups, ActorConfig())
    set_learning_rate(optimizer, 0.125)
    assert [g["lr"] for g in optimizer.param_groups] == [0.125, 0.125]


def _gradients(model: torch.nn.Module, scale: float = 1.0) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    (model(torch.ones(2, 3)).sum() * scale).backward()
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_clipping_returns_the_norm_before_and_scales_the_gradients() -> None:
    model = linear()
    grads = _gradients(model, scale=100.0)
    total = math.sqrt(sum(float(g.pow(2).sum()) for g in grads))
    assert clip_gradients(model.parameters(), 1.0) == pytest.approx(total, rel=1e-6)
    clipped = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in model.parameters()))
    assert clipped == pytest.approx(1.0, rel=1e-4)


def test_no_max_norm_measures_without_touching_the_gradients() -> None:
    model = linear()
    grads = _gradients(model, scale=100.0)
    norm = clip_gradients(model.parameters(), None)
    expected = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    assert norm == float(expected)
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), grads, strict=True))
    model[0].weight.grad[0, 0] = float("nan")  # a non-finite gradient is reported, kept
    assert math.isnan(clip_gradients(model.parameters(), None))
    assert float(model[0].bias.grad[0]) == float(grads[1][0])


def test_parameters_without_gradients_are_left_out() -> None:
    model = linear()
    assert clip_gradients(model.parameters(), None) == 0.0
    assert clip_gradients(model.parameters(), 1.0) == 0.0
    model[1].weight.requires_grad_(False)
    grads = _gradients(model)
    expected = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    assert clip_gradients(model.parameters(), None) == float(expected)
