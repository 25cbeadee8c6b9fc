"""The data fingerprint in a registered model's lineage tags."""

from __future__ import annotations

from rl_core.config import load_config
from rl_core.config.lineage import data_fingerprint


def test_env_runs_change_fingerprint_with_the_env_only():
    base = data_fingerprint(load_config(None, []))
    assert data_fingerprint(load_config(None, ["actor.lr=1e-4", "run.seed=3"])) == base
    assert data_fingerprint(load_config(None, ["env.env_id=Acrobot-v1"])) != base


def test_prompt_files_are_fingerprinted_by_their_bytes(tmp_path):
    rows = tmp_path / "train.jsonl"
    rows.write_text('{"prompt": "1+1=", "answer": "2"}\n')
    args = [
        "model.model_type=hf_causal_lm",
        "model.model_path=x",
        "model.tiny_init=true",
        "algorithm.adv_type=grpo",
        "reward.reward_type=math_verify",
        "data.source=files",
        f"data.train_files=[{rows}]",
    ]
    first = data_fingerprint(load_config(None, args))
    assert data_fingerprint(load_config(None, [*args, "data.prompts_per_batch=2"])) == first
    rows.write_text('{"prompt": "1+2=", "answer": "3"}\n')
    assert data_fingerprint(load_config(None, args)) != first
