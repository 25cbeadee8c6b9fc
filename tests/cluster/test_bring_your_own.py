"""A reasoning run on a verl-prepared Parquet file (chat-message prompts, ground truths in
``reward_model``), scored by a TRL-style reward function named in the config, on real Ray
workers with the tiny LM."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from infra.driver.runtimes import make_runtime
from rl_core.config import load_config
from tests.in_process import run_iterations

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_local")]

REWARD = """
CALLS = []

def quarter(prompts, completions, ground_truth, data_source, **kwargs):
    assert all(source == "openai/gsm8k" for source in data_source)
    assert all(answer.isdigit() for answer in ground_truth)
    return [0.25 for _ in completions]
"""


def verl_parquet(path: Path, rows: int) -> Path:
    table = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": f"What is {i} + {i}?"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
            "extra_info": {"split": "train", "index": i},
        }
        for i in range(rows)
    ]
    pq.write_table(pa.Table.from_pylist(table), path)
    return path


def test_grpo_trains_on_verl_parquet_with_a_trl_reward_function(
    tmp_path: Path, tiny_lm_one_layer: str
) -> None:
    reward = tmp_path / "my_reward.py"
    reward.write_text(REWARD)
    cfg = load_config(
        overrides=[
            "model.model_type=hf_causal_lm",
            f"model.model_path={tiny_lm_one_layer}",
            "data.source=files",
            f"data.train_files=[{verl_parquet(tmp_path / 'train.parquet', 8)}]",
            f"data.eval_files=[{verl_parquet(tmp_path / 'test.parquet', 4)}]",
            "data.prompts_per_batch=4",
            "data.eval_size=4",
            "data.max_prompt_length=64",
            "rollout.max_new_tokens=4",
            "algorithm.adv_type=grpo",
            "algorithm.group_size=2",
            "reward.reward_type=function",
            f"reward.function={reward}:quarter",
            "reward.num_tasks=1",
            "actor.num_minibatches=1",
            "actor.update_epochs=1",
            "tracking.enabled=false",
            "cluster.hybrid_engine=off",
            f"run.output_dir={tmp_path}",
        ]
    )
    runtime = make_runtime(cfg)
    try:
        assert runtime.train_samples[0].messages[0]["content"] == "What is 0 + 0?"
        results = run_iterations(runtime, range(1))
        rewards = results[0]["reward"].metrics
        assert rewards["rollout/reward_mean"] == pytest.approx(0.25)
    finally:
        runtime.shutdown()
