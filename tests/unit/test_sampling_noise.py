"""Policy noise drawn on the generator's device: same numbers as a plain CPU draw."""

from __future__ import annotations

import torch

from rl_core.models.sampling_noise import multinomial_on_device, standard_normal_like


def test_normal_noise_equals_a_plain_draw_of_the_same_generator() -> None:
    reference = torch.zeros(4, 3, dtype=torch.float64)
    noise = standard_normal_like(reference, torch.Generator().manual_seed(7))
    expected = torch.randn((4, 3), generator=torch.Generator().manual_seed(7))
    assert noise.dtype == torch.float64 and noise.shape == (4, 3)
    assert torch.equal(noise, expected.double())


def test_categorical_draws_equal_a_plain_multinomial() -> None:
    probs = torch.softmax(torch.randn(16, 5, generator=torch.Generator().manual_seed(1)), -1)
    probs.requires_grad_(True)
    draws = multinomial_on_device(probs, torch.Generator().manual_seed(3))
    expected = torch.multinomial(probs.detach(), 1, generator=torch.Generator().manual_seed(3))
    assert draws.shape == (16,) and torch.equal(draws, expected.squeeze(-1))


def test_without_a_generator_the_draw_follows_the_reference_device() -> None:
    torch.manual_seed(0)
    noise = standard_normal_like(torch.ones(2, 2))
    assert noise.device == torch.device("cpu") and noise.shape == (2, 2)
