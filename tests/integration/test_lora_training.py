"""LoRA through the train CLI (Prefect flows, 2 FSDP2 ranks and a rollout worker on Ray,
MLflow): checkpoints hold the adapters alone, an interrupted run resumes bit-identical, the
export has the merged model and the adapter in PEFT's format, and the registered version
says which, with the base model's fingerprint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient
from safetensors.torch import load_file

from rl_core.models.lora import base_fingerprint
from rl_core.models.tiny_lm import create_tiny_lm
from tests.integration.conftest import (
    ROOT,
    find_run,
    run_stopped_at_2_then_resumed,
    run_train,
    training_env,
)

pytestmark = pytest.mark.integration

RUN = "lora-it"
FINAL = f"{RUN}/checkpoints/step_000004"


@pytest.fixture(scope="module")
def preset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small GRPO preset with LoRA adapters on the tiny model: 2 FSDP2 ranks."""
    root = tmp_path_factory.mktemp("lora")
    model = create_tiny_lm(root / "tiny", num_hidden_layers=2, num_key_value_heads=2)
    config = {
        "run": {"name": RUN, "max_iterations": 4, "eval_interval": 2, "checkpoint_interval": 2},
        "model": {"model_type": "hf_causal_lm", "model_path": str(model)},
        "data": {"prompts_per_batch": 4, "eval_size": 8},
        "rollout": {"max_new_tokens": 6},
        "algorithm": {"adv_type": "grpo", "group_size": 4, "normalize_advantages": False},
        # a digit anywhere scores 1: random completions get mixed rewards, so weights move
        "reward": {"reward_type": "format", "format_pattern": "[0-9]"},
        "actor": {
            "num_workers": 2,
            "num_minibatches": 2,
            "micro_batch_size": 4,
            "lr": 1.0e-2,
            "lora": {"rank": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj", "o_proj"]},
        },
        "eval": {"pass_k": 2, "sample_rows": 2},
    }
    path = root / "grpo_lora_tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory: pytest.TempPathFactory, prefect_api: str, preset: Path) -> Path:
    """The preset trained once, uninterrupted (its output dir)."""
    out_dir = tmp_path_factory.mktemp("lora-run")
    run_train(out_dir, training_env(prefect_api, out_dir), "--config", str(preset))
    return out_dir


def test_checkpoints_hold_the_adapters_and_resume_bit_identical(
    tmp_path: Path, train_env: dict[str, str], preset: Path, lora_run: Path
) -> None:
    a = load_file(str(lora_run / FINAL / "actor_0" / "model.safetensors"))
    assert a and all(".lora_" in name for name in a), sorted(a)[:4]  # no base weights
    before = load_file(str(lora_run / f"{RUN}/checkpoints/step_000002/actor_0/model.safetensors"))
    assert any(not torch.equal(a[k], before[k]) for k in a), "adapters did not move"

    resumed = tmp_path / "resumed"
    run_stopped_at_2_then_resumed(resumed, train_env, "--config", str(preset))
    b = load_file(str(resumed / FINAL / "actor_0" / "model.safetensors"))
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_export_has_the_merged_model_and_the_adapter_and_the_registry_says_so(
    tmp_path: Path, train_env: dict[str, str], preset: Path, lora_run: Path
) -> None:
    out = tmp_path / "export"
    proc = subprocess.run(
        [sys.executable, "-m", "infra.checkpoint.convert", "--run-name", RUN]
        + ["--output-dir", str(lora_run), "--out", str(out)],
        cwd=ROOT,
        env=train_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads((out / "rlpipe_model.json").read_text())
    base_dir = Path(yaml.safe_load(preset.read_text())["model"]["model_path"])
    assert meta["weights"] == "merged"
    assert meta["adapter"]["dir"] == "adapter" and meta["adapter"]["rank"] == 4
    assert meta["base_model"]["fingerprint"] == base_fingerprint(base_dir)

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    base = AutoModelForCausalLM.from_pretrained(base_dir)
    adapted = PeftModel.from_pretrained(base, out / "adapter").eval()
    ids = torch.arange(3, 19).unsqueeze(0)
    with torch.no_grad():
        want, got = adapted(input_ids=ids).logits, merged(input_ids=ids).logits
        plain = AutoModelForCausalLM.from_pretrained(base_dir)(input_ids=ids).logits
    assert torch.allclose(want, got, atol=1e-5)
    assert not torch.allclose(plain, got, atol=1e-4), "the adapter changed nothing"

    client = MlflowClient(f"sqlite:///{lora_run / 'mlflow.db'}")
    run = find_run(client, RUN)
    name = run.data.tags["rlpipe.registered_model"].split("/")[1]
    (version,) = client.search_model_versions(f"name = '{name}'")
    assert version.tags["weights"] == "merged"
    assert version.tags["adapter"] == "adapter/ (peft)"
    assert version.tags["base_model_fingerprint"] == base_fingerprint(base_dir)
    syncs = client.get_metric_history(run.info.run_id, "rollout/sync_probe_max_diff")
    assert syncs and max(m.value for m in syncs) < 1e-4
