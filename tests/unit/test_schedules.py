"""lr_at: constant, linear, cosine and warm-up learning rates, checked by hand."""

import math

import pytest

from rl_core.training.schedules import lr_at


def test_constant():
    assert [lr_at(0.1, i, 10, "constant") for i in (0, 5, 9, 10)] == [0.1, 0.1, 0.1, 0.1]


def test_linear_decays_to_zero():
    # progress = i / 10
    assert lr_at(1.0, 0, 10, "linear") == pytest.approx(1.0)
    assert lr_at(1.0, 1, 10, "linear") == pytest.approx(0.9)
    assert lr_at(1.0, 5, 10, "linear") == pytest.approx(0.5)
    assert lr_at(1.0, 9, 10, "linear") == pytest.approx(0.1)
    assert lr_at(1.0, 10, 10, "linear") == pytest.approx(0.0)
    assert lr_at(1.0, 15, 10, "linear") == pytest.approx(0.0)  # progress capped at 1


def test_cosine():
    assert lr_at(2.0, 0, 8, "cosine") == pytest.approx(2.0)
    assert lr_at(2.0, 2, 8, "cosine") == pytest.approx(1.0 + math.cos(math.pi / 4))  # 1.7071
    assert lr_at(2.0, 4, 8, "cosine") == pytest.approx(1.0)
    assert lr_at(2.0, 6, 8, "cosine") == pytest.approx(1.0 - math.cos(math.pi / 4))  # 0.2929
    assert lr_at(2.0, 8, 8, "cosine") == pytest.approx(0.0, abs=1e-12)


def test_warmup_then_linear():
    # warm-up over 4 iterations: base * (i + 1) / 4
    values = [lr_at(1.0, i, 14, "linear", warmup=4) for i in range(4)]
    assert values == pytest.approx([0.25, 0.5, 0.75, 1.0])
    # then linear over the remaining 10: progress = (i - 4) / 10
    assert lr_at(1.0, 4, 14, "linear", warmup=4) == pytest.approx(1.0)
    assert lr_at(1.0, 7, 14, "linear", warmup=4) == pytest.approx(0.7)
    assert lr_at(1.0, 14, 14, "linear", warmup=4) == pytest.approx(0.0)


def test_warmup_then_constant_and_cosine():
    assert lr_at(3e-4, 0, 100, "constant", warmup=3) == pytest.approx(1e-4)
    assert lr_at(3e-4, 3, 100, "constant", warmup=3) == pytest.approx(3e-4)
    # cosine over 10 iterations after 2 of warm-up: at i = 7, progress 0.5
    assert lr_at(1.0, 7, 12, "cosine", warmup=2) == pytest.approx(0.5)


def test_warmup_as_long_as_run():
    # every iteration of the run is warm-up; the span after it is clamped to 1 (no 0-division)
    assert [lr_at(1.0, i, 4, "cosine", warmup=4) for i in range(4)] == pytest.approx(
        [0.25, 0.5, 0.75, 1.0]
    )
    assert lr_at(1.0, 5, 4, "linear", warmup=4) == pytest.approx(0.0)  # progress (5-4)/1


def test_unknown_schedule():
    with pytest.raises(
        ValueError, match="unknown lr schedule 'step'; allowed: constant, linear, cosine"
    ):
        lr_at(1.0, 0, 10, "step")
