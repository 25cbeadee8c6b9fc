"""Every seed of a run, derived from ``run.seed`` by name (one place for all formulas).

A run is reproducible, and a resumed run continues exactly, because every random stream is
a pure function of the run seed and a few indices (group, rank, step, iteration, caller).
The streams:

| stream | used for |
| --- | --- |
| :func:`worker_seed` | a worker's own seed: model init (trainer), env resets (env), sampling (rollout) |
| :func:`env_base_seed` | the reset seed of an env worker's first env |
| :func:`env_reseed` | envs reset after a restore without saved env state (step-dependent) |
| :func:`sampling_seed` | a rollout worker's sampling generator for one calling env worker |
| :func:`generation_round_seed` | one round of LLM response sampling (prompt cursor, round) |
| :func:`generation_rank_seed` | the part of a generation a rollout rank samples |
| :func:`generation_segment_seed` | one segment of a partial rollout (async reasoning) |
| :func:`generation_row_seed` | one row of a vLLM generation call |
| :func:`update_shuffle_seed` | the row permutation of an LLM update |
| :func:`scoring_worker_seed` | a reward-model scoring worker's global torch seed |
| :func:`model_reward_seed` | the reward-model scoring of one iteration's batch |
| :func:`eval_seeds` | the fixed episode seeds of every evaluation |
"""

from __future__ import annotations

#: Per-group offsets of :func:`worker_seed`.
GROUP_OFFSETS = {"env": 1_000, "rollout": 2_000, "actor": 3_000, "eval": 4_000}
_OTHER_GROUP = 9_000
_RUN_STRIDE = 100_003
_STEP_STRIDE = 7_919
_CALLER_STRIDE = 1_009
_SEGMENT_STRIDE = 104_729
_CURSOR_STRIDE = 31
_ROW_STRIDE = 100_003
#: Evaluation seeds live far from training seeds.
EVAL_SEED_OFFSET = 10_000_000


def worker_seed(run_seed: int, group: str, rank: int) -> int:
    """The seed of worker ``rank`` of ``group``."""
    return run_seed * _RUN_STRIDE + GROUP_OFFSETS.get(group, _OTHER_GROUP) + rank


def env_base_seed(run_seed: int, rank: int, num_envs: int) -> int:
    """Reset seed of env worker ``rank``'s first env (env i uses base + i // group_size)."""
    return worker_seed(run_seed, "env", rank) * num_envs


def env_reseed(run_seed: int, rank: int, num_envs: int, step: int) -> int:
    """Reset seed of env worker ``rank`` restored at ``step`` without saved env state."""
    return env_base_seed(run_seed, rank, num_envs) + _STEP_STRIDE * step


def sampling_seed(rollout_worker_seed: int, caller: int) -> int:
    """Seed of a rollout worker's sampling stream for env worker ``caller``."""
    return rollout_worker_seed * _CALLER_STRIDE + caller


def generation_round_seed(run_seed: int, consumed: int, round_index: int) -> int:
    """Seed of one round of response sampling, after ``consumed`` prompts were drawn."""
    rollout = worker_seed(run_seed, "rollout", 0)
    return rollout * _STEP_STRIDE + consumed * _CURSOR_STRIDE + round_index


def generation_rank_seed(seed: int, rank: int) -> int:
    """Seed of rollout rank ``rank``'s share of a generation seeded ``seed``."""
    return seed * _CALLER_STRIDE + rank


def generation_segment_seed(rank_seed: int, segment: int) -> int:
    """Seed of segment ``segment`` of a partial rollout (segment 0: ``rank_seed`` itself)."""
    return rank_seed + segment * _SEGMENT_STRIDE


def generation_row_seed(seed: int, row: int) -> int:
    """Seed of row ``row`` of a vLLM generation call seeded ``seed``.

    Args:
        seed: The call's seed.
        row: The row's index in the call.

    Returns:
        ``seed * 100003 + row``: a row samples the same whatever vLLM's batching.
    """
    return seed * _ROW_STRIDE + row


def update_shuffle_seed(run_seed: int, iteration: int) -> int:
    """Seed of the row permutation of the LLM update of ``iteration``."""
    return run_seed * _RUN_STRIDE + iteration


def scoring_worker_seed(run_seed: int, rank: int) -> int:
    """The global torch seed a reward-model scoring worker sets when it starts.

    Args:
        run_seed: ``run.seed``.
        rank: The scoring worker's rank.

    Returns:
        ``run_seed + rank``.
    """
    return run_seed + rank


def model_reward_seed(run_seed: int, iteration: int) -> int:
    """Seed of the reward-model scoring of ``iteration``'s batch.

    Args:
        run_seed: ``run.seed``.
        iteration: The training iteration.

    Returns:
        ``run_seed * 100003 + iteration``.
    """
    return run_seed * _RUN_STRIDE + iteration


def eval_seeds(run_seed: int, num_episodes: int) -> list[int]:
    """The fixed episode seeds of every evaluation of a run (the same set each time)."""
    return [EVAL_SEED_OFFSET + run_seed * 1000 + i for i in range(num_episodes)]
