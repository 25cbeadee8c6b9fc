"""Which runtime trains a config, building it, and one iteration without Prefect."""

from __future__ import annotations

import time

from infra.driver.step_runtime import StepResult, StepRuntime
from rl_core.config import ConfigError, RLPipeConfig
from rl_core.kind import kind_of
from rl_core.steps import Step


def runtime_class(cfg: RLPipeConfig) -> type[StepRuntime]:
    """The runtime class that trains ``cfg``: its kind's runtime (or that one's variant).

    Raises:
        ConfigError: The kind's runtime cannot be imported.
    """
    kind = kind_of(cfg)
    try:
        runtime = kind.runtime_class(cfg)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"the {kind.name} kind of training names runtime {kind.runtime!r}, which cannot be "
            f"imported: {exc}"
        ) from None
    return runtime


def make_runtime(cfg: RLPipeConfig) -> StepRuntime:
    """Build the worker groups of ``cfg`` with the runtime of its model's category."""
    return runtime_class(cfg)(cfg)


def run_iteration_in_process(runtime: StepRuntime, iteration: int) -> dict[Step, StepResult]:
    """One training iteration without Prefect: the steps in order, fan-out jobs called here.

    For bare-loop benchmarks and tests that compare placements; the train flow runs the
    same steps as Prefect tasks (``flows/iteration.py``).

    Returns:
        Each step's result; the reward's ``seconds`` include scoring the jobs.
    """
    results = {
        Step.WEIGHT_SYNC: runtime.run_step(Step.WEIGHT_SYNC, iteration),
        Step.ROLLOUT: runtime.run_step(Step.ROLLOUT, iteration),
    }
    start = time.perf_counter()
    scores = [job.fn(**job.kwargs) for job in runtime.fanout_jobs(Step.REWARD, iteration)]
    results[Step.REWARD] = runtime.reward(iteration, scores)
    results[Step.REWARD].seconds = time.perf_counter() - start
    results[Step.ADVANTAGE] = runtime.run_step(Step.ADVANTAGE, iteration)
    results[Step.UPDATE] = runtime.run_step(Step.UPDATE, iteration)
    return results
