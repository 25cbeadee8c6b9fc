"""Upper bounds of the config's counts and sizes, and the memory estimate of a rollout batch.

The bounds are far above any run these machines (or a large cluster) can do, and far below
what makes a typo such as ``env.num_envs=1000000000`` reach a worker: such a value fails
validation with the field, the value and the bound. The rollout-buffer check compares a
lower bound of the batch's size with the physical memory of the machine that validates the
config (the driver, and each worker again when it starts).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Ray actors or tasks of one worker group (env, rollout, actor, reward/eval fan-out).
MAX_WORKERS = 1_024
#: Vectorized envs of one env worker or one evaluation task.
MAX_ENVS = 65_536
#: Env steps per env per iteration; also the cap of other per-iteration step counts.
MAX_STEPS = 1_000_000
#: Minibatches per epoch, and rows of one micro-batch.
MAX_MINIBATCHES = 65_536
#: Passes over one batch, and optimizer steps per SFT iteration.
MAX_EPOCHS = 1_000
#: Prompts per training batch or evaluation.
MAX_PROMPTS = 65_536
#: Responses sampled per prompt (GRPO group), and pass@k samples.
MAX_GROUP_SIZE = 1_024
#: Tokens of one prompt or one response.
MAX_TOKENS = 1_048_576
#: Training iterations of a run (and the intervals counted in iterations).
MAX_ITERATIONS = 100_000_000
#: Evaluation episodes, and the step cap of one evaluation.
MAX_EPISODES = 1_000_000
MAX_EVAL_STEPS = 1_000_000_000
#: Width of one MLP layer (and channels of one conv layer).
MAX_LAYER_WIDTH = 65_536
#: Conv layers of a pixel policy's image encoder (each halves the image).
MAX_CONV_LAYERS = 16
#: Frames of one evaluation video, and rows of the logged sample table.
MAX_VIDEO_FRAMES = 100_000
MAX_SAMPLE_ROWS = 10_000
#: CPUs of a local Ray cluster.
MAX_CPUS = 65_536
#: Nodes of a Ray cluster a run spans.
MAX_NODES = 4_096
#: GPUs of one node.
MAX_GPUS_PER_NODE = 1_024
#: Size of one weight-sync bucket (MiB).
MAX_BUCKET_MB = 65_536.0

#: Lower bound of the bytes one env step takes in the trainer's batch: observation, action,
#: log-prob, value, reward, done flags, advantage and return (CartPole alone needs more).
EMBODIED_BYTES_PER_STEP = 64
#: Lower bound of the bytes one token takes in a reasoning batch: token id (int64), mask,
#: log-prob (float32) — before old/reference log-probs, advantages and the logits.
REASONING_BYTES_PER_TOKEN = 16


def machine_memory_bytes() -> int | None:
    """Physical memory of this machine (``os.sysconf`` pages), or None where unknown."""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None


@dataclass(frozen=True)
class BufferEstimate:
    """A lower bound of a rollout batch's size and how it was computed."""

    bytes: int
    formula: str
    fields: str

    def describe(self, memory: int) -> str:
        """One line: the estimate, the machine's memory and which fields to lower."""
        return (
            f"the rollout buffer needs at least {format_bytes(self.bytes)} ({self.formula}), "
            f"more than this machine's {format_bytes(memory)} of memory; lower {self.fields}"
        )


def embodied_buffer(num_workers: int, num_envs: int, num_steps: int) -> BufferEstimate:
    """Lower bound of an embodied batch: every env worker's envs × steps."""
    steps = num_workers * num_envs * num_steps
    return BufferEstimate(
        steps * EMBODIED_BYTES_PER_STEP,
        f"env.num_workers*env.num_envs*rollout.num_steps = {num_workers}*{num_envs}*"
        f"{num_steps} = {steps:,} env steps x {EMBODIED_BYTES_PER_STEP} bytes",
        "env.num_workers, env.num_envs or rollout.num_steps",
    )


def reasoning_buffer(
    prompts: int, group_size: int, prompt_tokens: int, response_tokens: int
) -> BufferEstimate:
    """Lower bound of a reasoning batch: responses × (prompt + response) tokens."""
    tokens = prompts * group_size * (prompt_tokens + response_tokens)
    return BufferEstimate(
        tokens * REASONING_BYTES_PER_TOKEN,
        f"data.prompts_per_batch*algorithm.group_size*(data.max_prompt_length+rollout."
        f"max_new_tokens) = {prompts}*{group_size}*({prompt_tokens}+{response_tokens}) = "
        f"{tokens:,} tokens x {REASONING_BYTES_PER_TOKEN} bytes",
        "data.prompts_per_batch, algorithm.group_size, data.max_prompt_length or "
        "rollout.max_new_tokens",
    )


def format_bytes(n: int) -> str:
    """``n`` bytes in binary units (``23.5 GiB``)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    value, index = float(n), 0
    while value >= 1024 and index < len(units) - 1:
        value, index = value / 1024, index + 1
    return f"{n} B" if index == 0 else f"{value:.1f} {units[index]}"
