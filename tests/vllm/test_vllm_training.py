"""GRPO through the train CLI with ``rollout.engine: vllm``: vLLM in the Ray rollout worker,
weights synced from the trainer every iteration, here patch syncs from megatron at tensor
parallel 2 (vLLM applying a patch is checked on its own in ``test_vllm_engine.py``). Bucket
syncs from FSDP2 ranks into separate vLLM rollout workers, and the hybrid engine (vLLM
inside the trainer ranks), are tested in ``test_vllm_hybrid_engine.py``."""

from __future__ import annotations

from pathlib import Path

import yaml
from mlflow.tracking import MlflowClient

from rl_core.models.tiny_lm import create_tiny_lm
from tests.integration.conftest import find_run, prefect_api, run_train, train_env  # noqa: F401

ITERATIONS = 4


def write_preset(root: Path, mode: str) -> Path:
    config = {
        "run": {"name": f"vllm-{mode}", "max_iterations": ITERATIONS, "eval_interval": 2},
        "cluster": {"hybrid_engine": "off"},  # a rollout worker of its own
        "model": {"model_type": "hf_causal_lm", "model_path": str(create_tiny_lm(root / "m"))},
        "data": {"prompts_per_batch": 4, "eval_size": 8},
        "rollout": {"engine": "vllm", "max_new_tokens": 6, "weight_sync_mode": mode},
        "algorithm": {"adv_type": "grpo", "group_size": 4, "normalize_advantages": False},
        # a digit anywhere scores 1: random completions get mixed rewards, so weights move
        "reward": {"reward_type": "format", "format_pattern": "[0-9]"},
        "actor": {"num_minibatches": 1, "micro_batch_size": 16, "lr": 1.0e-2},
        "eval": {"pass_k": 2, "sample_rows": 2},
    }
    path = root / f"vllm_{mode}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


#: The trainer: megatron at tensor parallel 2 over two ranks.
MEGATRON_TP2 = (
    "actor.backend=megatron",
    "actor.num_workers=2",
    "actor.megatron.tensor_model_parallel_size=2",
)


def test_grpo_with_vllm_rollouts_and_patch_syncs_from_megatron(
    tmp_path: Path,
    train_env: dict[str, str],  # noqa: F811
) -> None:
    mode = "patch"
    preset = write_preset(tmp_path, mode)
    out = run_train(tmp_path, train_env, "--config", str(preset), *MEGATRON_TP2)
    assert "accuracy" in out
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = find_run(client, f"vllm-{mode}")

    def history(key: str) -> list[float]:
        points = client.get_metric_history(run.info.run_id, key)
        return [m.value for m in sorted(points, key=lambda m: m.step)]

    # the update changes the weights every iteration ...
    assert all(v > 0 for v in history("train/grad_norm"))
    # ... and vLLM samples with the synced ones: its log-probs are the trainer's
    mismatch = history("rollout/logprob_mismatch")
    assert len(mismatch) == ITERATIONS and max(mismatch) < 1e-3, mismatch
    moved = history("rollout/weight_sync_bytes")
    assert moved[0] > 0
    # a full sync first, then patches (a sync right after an evaluation's has nothing to send)
    assert history("rollout/weight_sync_full")[:2] == [1.0, 0.0]
    assert moved[1] > 0  # a patch (every element moved at lr 1e-2: larger than a full sync)
