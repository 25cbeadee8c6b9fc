"""A rerun of a finished run says so in one line, and the CLI's summary title says it too."""

from __future__ import annotations

from types import SimpleNamespace

from flows.run_loop import already_finished
from rl_core.config import load_config

CFG = load_config("ppo_cartpole", ["run.name=budget", "run.max_iterations=3"])


def state(iteration: int, solved: bool = False) -> SimpleNamespace:
    return SimpleNamespace(iteration=iteration, solved=solved)


def test_a_resumed_run_with_nothing_left_says_how_to_train_again() -> None:
    message = already_finished(CFG, state(3), resumed_from=3)
    assert message is not None
    assert message.startswith(
        "run budget had already finished (3 of run.max_iterations=3 iterations): nothing to "
        "train; to train more, raise run.max_iterations"
    )
    assert "another run.name" in message
    assert ", solved)" in (already_finished(CFG, state(2, solved=True), resumed_from=2) or "")


def test_a_new_run_or_one_with_iterations_left_is_not_finished() -> None:
    assert already_finished(CFG, state(0), resumed_from=None) is None
    assert already_finished(CFG, state(1), resumed_from=1) is None
