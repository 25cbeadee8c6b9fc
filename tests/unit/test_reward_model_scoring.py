"""Reward models built on the tiny causal LM: scoring (prompt, response) texts, exporting
them so that transformers and rlpipe both load them, and scoring the export."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from infra.checkpoint.export import export_policy, load_exported_policy
from rl_core.models import get_model
from rl_core.models.reward_model import RewardModelPolicy, encode_pairs, score_texts
from rl_core.models.tiny_lm import create_tiny_lm

PROMPTS = ["12+7=", "3+4=", "50+50="]
RESPONSES = ["19", "8", "100, since 50+50=100"]


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", num_hidden_layers=1)


def _model_cfg(path: Path) -> SimpleNamespace:
    return SimpleNamespace(
        model_type="hf_reward_model",
        model_path=str(path),
        dtype="float32",
        trust_remote_code=False,
        attn_implementation="sdpa",
        gradient_checkpointing=False,
    )


@pytest.fixture(scope="module")
def policy(backbone: Path) -> RewardModelPolicy:
    torch.manual_seed(0)
    model = get_model(_model_cfg(backbone), None)
    with torch.no_grad():  # a head that says something (the initial one is near 0)
        model.model.score.weight.normal_(0.0, 1.0)
    return model.eval()


def test_the_registered_type_builds_a_scalar_head_on_the_backbone(
    policy: RewardModelPolicy, backbone: Path
) -> None:
    assert isinstance(policy, RewardModelPolicy)
    assert policy.model.config.num_labels == 1
    tokenizer = AutoTokenizer.from_pretrained(backbone)
    assert policy.pad_token_id == tokenizer.pad_token_id


def test_scores_do_not_depend_on_the_batch_or_its_padding(policy: RewardModelPolicy) -> None:
    together = score_texts(policy, PROMPTS, RESPONSES)
    alone = [score_texts(policy, [p], [r])[0] for p, r in zip(PROMPTS, RESPONSES, strict=True)]
    assert len(together) == 3 and len(set(together)) == 3
    assert together == pytest.approx(alone, abs=1e-5)
    assert score_texts(policy, PROMPTS, RESPONSES, batch_size=2) == pytest.approx(
        together, abs=1e-5
    )


def test_texts_are_prompt_plus_response_cut_to_their_last_tokens(policy) -> None:
    full = score_texts(policy, ["12+7="], ["19"])
    assert score_texts(policy, ["12+"], ["7=19"]) == pytest.approx(full, abs=1e-5)
    assert score_texts(policy, ["xx12+7="], ["19"], max_length=7) == pytest.approx(full, abs=1e-5)
    with pytest.raises(ValueError, match="2 prompts but 1 responses"):
        score_texts(policy, ["a", "b"], ["c"])


def test_pair_batches_pad_chosen_and_rejected_to_one_length(policy: RewardModelPolicy) -> None:
    batch = encode_pairs(policy.tokenizer, policy.pad_token_id, ["1+1="], ["2"], ["2, since"])
    assert batch["chosen_ids"].shape == batch["rejected_ids"].shape == (1, 12)
    assert batch["chosen_mask"].sum() == 5 and batch["rejected_mask"].sum() == 12


def test_an_export_loads_in_transformers_and_rlpipe_with_the_same_scores(
    policy: RewardModelPolicy, backbone: Path, tmp_path: Path
) -> None:
    config = {k: v for k, v in vars(_model_cfg(backbone)).items()}
    out = export_policy(policy, config, None, tmp_path / "rm", source={"run_name": "t"})
    expected = score_texts(policy, PROMPTS, RESPONSES)

    assert score_texts(out, PROMPTS, RESPONSES) == pytest.approx(expected, abs=1e-5)
    loaded, meta = load_exported_policy(out)
    assert meta["category"] == "reward_model" and meta["model"]["model_path"] == "."
    assert score_texts(loaded, PROMPTS, RESPONSES) == pytest.approx(expected, abs=1e-5)

    hf = AutoModelForSequenceClassification.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    ids = tokenizer([p + r for p, r in zip(PROMPTS, RESPONSES, strict=True)], padding=True)
    with torch.no_grad():
        logits = hf(
            input_ids=torch.tensor(ids["input_ids"]),
            attention_mask=torch.tensor(ids["attention_mask"]),
        ).logits
    assert logits.shape == (3, 1)
    assert logits[:, 0].tolist() == pytest.approx(expected, abs=1e-5)


def test_the_probe_script_ranks_digit_errors_and_a_policys_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    from rl_core.models.reward_model import create_tiny_reward_model

    script = Path(__file__).resolve().parents[2] / "scripts/probe_reward_model.py"
    spec = importlib.util.spec_from_file_location("probe_reward_model", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rm = create_tiny_reward_model(tmp_path / "rm", tmp_path / "lm")
    args = ["--reward-model", str(rm), "--policy", str(tmp_path / "lm"), "--problems", "3"]
    assert module.main([*args, "--samples", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == [
        f"one wrong {name:8} digit" for name in ("units", "tens", "hundreds")
    ]
    assert "(12 pairs)" in lines[0]  # four problems per --problems for the digit errors
    assert lines[3].startswith("policy samples (")
    digit = module.digit_accuracy(str(rm), 12, seed=0)
    assert all(0.0 <= acc <= 1.0 for acc, _ in digit.values())
    assert digit == module.digit_accuracy(str(rm), 12, seed=0)  # a function of its seed
