"""Named seed streams: values are pinned, so a change of any stream is deliberate (it
changes every run's numbers and breaks bit-identical resumes of older checkpoints)."""

from rl_core import seeding


def test_streams_are_pinned():
    assert seeding.worker_seed(7, "env", 2) == 7 * 100_003 + 1_000 + 2
    assert seeding.worker_seed(7, "other", 0) == 7 * 100_003 + 9_000
    assert seeding.env_base_seed(7, 1, 8) == seeding.worker_seed(7, "env", 1) * 8
    assert seeding.env_reseed(7, 1, 8, 3) == seeding.env_base_seed(7, 1, 8) + 3 * 7_919
    assert seeding.sampling_seed(5, 2) == 5 * 1_009 + 2
    assert seeding.generation_round_seed(0, 32, 1) == 2_000 * 7_919 + 32 * 31 + 1
    assert seeding.generation_rank_seed(11, 1) == 11 * 1_009 + 1
    assert seeding.update_shuffle_seed(3, 4) == 3 * 100_003 + 4
    assert seeding.generation_row_seed(11, 5) == 1_100_038 == 11 * 100_003 + 5
    assert seeding.scoring_worker_seed(7, 2) == 9
    assert seeding.model_reward_seed(7, 3) == 700_024 == 7 * 100_003 + 3
    assert seeding.model_reward_seed(0, 0) == 0
    assert seeding.eval_seeds(2, 3) == [10_002_000, 10_002_001, 10_002_002]


def test_streams_of_different_workers_and_runs_differ():
    seeds = {
        seeding.worker_seed(run, group, rank)
        for run in range(3)
        for group in ("env", "rollout", "actor", "eval")
        for rank in range(4)
    }
    assert len(seeds) == 3 * 4 * 4
