"""The real-model preset ``grpo_gsm8k_qwen05b`` end to end through the train CLI, on a CPU.

The preset is run as written except for sizes and device: its model stays the hub id
``Qwen/Qwen2.5-0.5B-Instruct``, found in a Hugging Face cache the test fills with a local
stand-in (the same architecture and chat format, tiny sizes, random weights), as
``hf download`` would; its data are GSM8K-format Parquet files in the hub's layout,
generated (nothing is downloaded: the cache is offline). Checked: the run completes, MLflow
has its train and eval metrics, the prompts went through Qwen's chat template with the
preset's system prompt, the reference answers are the numbers after GSM8K's ``####``, and
the rollouts sampled from the policy itself (rollout log-probs = the trainer's).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient

from rl_core.config import load_config
from rl_core.models.standin import create_standin
from scripts.build_standin import TEST_FILE, TRAIN_FILE, write_gsm8k
from tests.hf_cache import cache_model
from tests.integration.conftest import find_run, run_train, training_env

pytestmark = pytest.mark.integration

PRESET = "grpo_gsm8k_qwen05b"
RUN = "gsm8k-standin"


def test_the_real_model_preset_runs_against_its_standin(tmp_path: Path, prefect_api: str) -> None:
    cfg = load_config(PRESET)
    cache = tmp_path / "hf-cache"
    snapshot = cache_model(cache, cfg.model.model_path, create_standin(tmp_path / "standin"))
    data = write_gsm8k(tmp_path / "gsm8k", train=32, test=4)
    out_dir = tmp_path / "out"
    env = {**training_env(prefect_api, tmp_path), "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    out = run_train(
        out_dir,
        env,
        "--config",
        PRESET,
        f"run.name={RUN}",
        # the preset's model (a hub id) and settings; a CPU and small sizes instead
        "cluster.device=cpu",
        "model.dtype=float32",
        f"data.train_files=[{data / TRAIN_FILE}]",
        f"data.eval_files=[{data / TEST_FILE}]",
        "data.prompts_per_batch=2",
        "algorithm.group_size=4",
        "rollout.max_new_tokens=16",
        "run.max_iterations=2",
        "run.eval_interval=2",
        timeout=300,
    )
    assert "rlpipe run finished" in out and "eval before run" in out

    client = MlflowClient(f"sqlite:///{out_dir / 'mlflow.db'}")
    run = find_run(client, RUN)
    assert client.get_experiment(run.info.experiment_id).name == "gsm8k-hf_causal_lm"
    assert json.loads(run.data.params["model.model_path"]) == str(snapshot)
    assert json.loads(run.data.params["model.gradient_checkpointing"]) is True
    for key in (
        "eval/accuracy",
        "eval/pass_at_1",
        "eval/return_mean",
        "rollout/reward_mean",
        "train/policy_loss",
        "train/kl_loss",
        "train/tokens_per_second",
    ):
        assert key in run.data.metrics, key
    accuracy = client.get_metric_history(run.info.run_id, "eval/accuracy")
    assert sorted(m.step for m in accuracy) == [0, 1]  # before training, after iteration 2
    # the rollouts sampled from the policy at the run's settings, not with the sampling
    # defaults of the model's generation_config (a repetition penalty, top-k 20...)
    mismatch = client.get_metric_history(run.info.run_id, "rollout/logprob_mismatch")
    assert len(mismatch) == 2 and max(m.value for m in mismatch) < 1e-4, mismatch

    table = json.loads(
        Path(client.download_artifacts(run.info.run_id, "eval/samples_000002.json")).read_text()
    )
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    solutions = {
        row["question"]: row["answer"] for row in pq.read_table(data / TEST_FILE).to_pylist()
    }
    assert len(rows) == 4
    for row in rows:
        assert row["model_input"] == (
            f"<|im_start|>system\n{cfg.data.system_prompt}<|im_end|>\n"
            f"<|im_start|>user\n{row['prompt']}<|im_end|>\n<|im_start|>assistant\n"
        )
        solution = solutions[row["prompt"]]
        assert row["answer"] == solution.rsplit("####", 1)[1].strip()
        assert row["answer"].isdigit() and "####" in solution and len(solution) > 40
