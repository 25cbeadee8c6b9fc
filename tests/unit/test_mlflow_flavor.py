"""Registered versions load with MLflow's own loaders, in a fresh process.

Policies are registered through the code path of the ``register_model`` step
(:func:`infra.tracking.register_run.register_run_model`, a real MLflow SQLite store):
a CartPole and a Pendulum MLP, a tiny causal LM fully fine-tuned and one with LoRA
adapters. A second Python process then loads ``models:/<name>@best`` with
``mlflow.pyfunc.load_model`` and ``mlflow.transformers.load_model``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from infra.checkpoint.export import META_FILE
from infra.checkpoint.serialize import tensors_to_bytes
from infra.checkpoint.store import LocalCheckpointStore, step_dir_name
from infra.tracking.flavor_files import MLMODEL_FILE
from infra.tracking.mlflow_flavor import FLAVOR_TAG, add_mlflow_flavor, flavor_for
from infra.tracking.mlflow_tracker import MlflowTracker
from infra.tracking.model_registry import BEST_ALIAS, download_registered_model
from infra.tracking.policy_pyfunc import observations_array
from infra.tracking.register_run import register_run_model
from rl_core.config import load_config
from rl_core.envs import probe_spaces
from rl_core.envs.spaces import env_spaces_to_dict
from rl_core.models import get_model
from rl_core.models.lora import with_lora

ROOT = Path(__file__).resolve().parents[2]
STEP = 3
METRIC = {"embodied": "eval/return_mean", "reasoning": "eval/accuracy"}
PROMPTS = ["1+2=", "ab"]
NEW_TOKENS = 4
LM_ARGS = [
    "model.model_type=hf_causal_lm",
    "algorithm.adv_type=grpo",
    "reward.reward_type=math_verify",
    "rollout.max_new_tokens=6",
]
CONTROL = {
    "cartpole": [],
    "pendulum": ["env.env_id=Pendulum-v1", "model.continuous_action=tanh"],
}
LORA = ["actor.lora.rank=4", "actor.lora.alpha=8", "actor.lora.target_modules=[q_proj,v_proj]"]

#: Run in a fresh interpreter: load each version with MLflow's loaders, print the results.
LOADER = """
import json, sys
import mlflow.pyfunc, mlflow.transformers, numpy as np, pandas as pd, torch
from mlflow.models import validate_serving_input
spec = json.loads(sys.argv[1])
out = {}
for name, states in spec["control"].items():
    uri = f"models:/{name}@best"
    model = mlflow.pyfunc.load_model(uri)
    x = np.asarray(states, dtype=np.float32)
    out[name] = {
        "array": model.predict(x).tolist(),
        "frame": model.predict(pd.DataFrame(x)).tolist(),
        "json": np.asarray(validate_serving_input(uri, json.dumps({"inputs": states}))).tolist(),
        "loader": model.metadata.flavors["python_function"]["loader_module"],
    }
for name in spec["lm"]:
    uri = f"models:/{name}@best"
    pipe = mlflow.transformers.load_model(uri)
    generated = [r[0]["generated_text"] for r in pipe(spec["prompts"], max_new_tokens=4, do_sample=False)]
    with torch.no_grad():
        logits = pipe.model(input_ids=torch.tensor([spec["ids"]])).logits
    texts = mlflow.pyfunc.load_model(uri).predict(spec["prompts"], params={"max_new_tokens": 4})
    out[name] = {
        "pipeline": type(pipe).__name__,
        "generated": generated,
        "pyfunc": list(texts),
        "logits": logits[0].tolist(),
    }
print("RESULT " + json.dumps(out))
"""


def _write_checkpoint(root: Path, cfg, policy, state: dict, spaces) -> str:
    """A committed checkpoint at step :data:`STEP`, as a training run writes it."""
    store = LocalCheckpointStore(root)
    folder = step_dir_name(STEP)
    store.write_bytes(f"{folder}/config.json", json.dumps(cfg.model_dump(mode="json")).encode())
    if spaces is not None:
        store.write_bytes(f"{folder}/spaces.json", json.dumps(env_spaces_to_dict(spaces)).encode())
    store.write_bytes(f"{folder}/actor_0/model.safetensors", tensors_to_bytes(state))
    store.write_bytes(f"{folder}/COMPLETE", b"ok\n")
    store.commit(STEP, {})
    return str(root)


def _register(root: Path, store_uri: str, name: str, category: str) -> dict:
    """Score the checkpoint (an evaluation at step - 1) and register it like a finished run."""
    uri = f"sqlite:///{root / 'mlflow.db'}"
    tracker = MlflowTracker(uri, "flavors", name, artifact_location=str(root / "art"))
    tracker.log_metrics({METRIC[category]: 1.0}, step=STEP - 1, synchronous=True)
    result = register_run_model(tracker, store_uri, name, METRIC[category], {"run_name": name})
    tracker.finish()
    assert BEST_ALIAS in result["aliases"], result
    return result


def _perturbed(policy: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Move trainable weights away from their initial values (LoRA's B starts at zero)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in policy.parameters():
            if param.requires_grad:
                param.add_(0.2 * torch.randn(param.shape, generator=gen))
    return policy.eval()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, tiny_lm: Path) -> dict:
    """Two control policies and two language models registered through the register step."""
    root = tmp_path_factory.mktemp("flavor")
    expected: dict = {
        "uri": f"sqlite:///{root / 'mlflow.db'}",
        "control": {},
        "lm": {},
        "results": {},
    }
    for i, (key, overrides) in enumerate(CONTROL.items()):
        cfg = load_config("ppo_cartpole", overrides)
        spaces = probe_spaces(cfg.env)
        torch.manual_seed(i)
        policy = get_model(cfg.model, spaces).eval()
        store = _write_checkpoint(root / key, cfg, policy, policy.state_dict(), spaces)
        name = f"rlpipe-flavor-{key}"
        expected["results"][name] = _register(root, store, name, "embodied")
        space = spaces.observation_space
        space.seed(7)
        states = np.stack([space.sample() for _ in range(5)]).astype(np.float32)
        with torch.no_grad():
            actions, _ = policy.predict_action_batch(
                {"states": states}, mode="eval", compute_values=False
            )
        expected["control"][name] = (states, np.asarray(actions), spaces.action_space)
    for key, extra in {"full": [], "lora": LORA}.items():
        cfg = load_config(None, [*LM_ARGS, f"model.model_path={tiny_lm}", *extra])
        policy = get_model(cfg.model, None)
        if cfg.lora_adapters() is not None:
            policy = with_lora(policy, cfg.lora_adapters())
            policy = _perturbed(policy, seed=1)
            state = {n: p.detach() for n, p in policy.named_parameters() if p.requires_grad}
        else:
            policy = _perturbed(policy, seed=2)
            state = policy.state_dict()
        store = _write_checkpoint(root / key, cfg, policy, state, None)
        name = f"rlpipe-flavor-lm-{key}"
        expected["results"][name] = _register(root, store, name, "reasoning")
        expected["lm"][name] = policy
    return expected


@pytest.fixture(scope="module")
def loaded(registry: dict) -> dict:
    """What a fresh process gets from MLflow's loaders for each registered version."""
    tokens = [int(t) for t in range(3, 19)]
    spec = {
        "control": {name: s.tolist() for name, (s, _, _) in registry["control"].items()},
        "lm": sorted(registry["lm"]),
        "prompts": PROMPTS,
        "ids": tokens,
    }
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_REGISTRY_URI"}
    env["MLFLOW_TRACKING_URI"] = registry["uri"]  # the registry is the tracking store's
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", LOADER, json.dumps(spec)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    return {"ids": tokens, **json.loads(line.removeprefix("RESULT "))}


def test_control_policies_predict_their_deterministic_actions_through_pyfunc(
    registry: dict, loaded: dict
) -> None:
    for name, (states, actions, action_space) in registry["control"].items():
        assert registry["results"][name]["aliases"]
        got = loaded[name]
        assert got["loader"] == "infra.tracking.policy_pyfunc"
        for form in ("array", "frame", "json"):
            predicted = np.asarray(got[form])
            assert predicted.shape == (len(states), *action_space.shape), (name, form)
            np.testing.assert_allclose(predicted, actions, rtol=0, atol=1e-6)
        assert all(action_space.contains(np.asarray(a, action_space.dtype)) for a in got["array"])


def test_language_models_load_as_text_generation_pipelines(registry: dict, loaded: dict) -> None:
    ids = torch.tensor([loaded["ids"]])
    for name, policy in registry["lm"].items():
        got = loaded[name]
        assert got["pipeline"] == "TextGenerationPipeline"
        with torch.no_grad():
            want = policy.model(input_ids=ids).logits[0]
        torch.testing.assert_close(torch.tensor(got["logits"]), want, rtol=0, atol=1e-5)
        tokenizer = policy.tokenizer
        for prompt, text, via_pyfunc in zip(PROMPTS, got["generated"], got["pyfunc"], strict=True):
            prompt_ids = tokenizer(prompt, return_tensors="pt").input_ids
            with torch.no_grad():
                out = policy.model.generate(
                    input_ids=prompt_ids,
                    attention_mask=torch.ones_like(prompt_ids),
                    max_new_tokens=NEW_TOKENS,
                    do_sample=False,
                )
            completion = tokenizer.decode(out[0, prompt_ids.shape[1] :], skip_special_tokens=True)
            assert completion, "greedy decoding of the perturbed model gave no text"
            assert text == prompt + completion, name
            assert via_pyfunc == text, name


def test_registered_folders_stay_rlpipe_model_directories_without_pickles(
    registry: dict, tmp_path: Path
) -> None:
    from mlflow.models import Model
    from mlflow.tracking import MlflowClient

    from infra.tracking.model_registry import load_registered_policy

    client = MlflowClient(registry["uri"], registry_uri=registry["uri"])
    flavors = {}
    for name in [*registry["control"], *registry["lm"]]:
        folder = download_registered_model(f"models:/{name}@best", registry["uri"], tmp_path / name)
        files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
        assert {META_FILE, MLMODEL_FILE} <= files, name
        assert not [f for f in files if f.endswith((".pkl", ".pickle", ".bin", ".pt"))], files
        mlmodel = Model.load(str(folder / MLMODEL_FILE))
        pyfunc = mlmodel.flavors["python_function"]
        assert "python_model" not in pyfunc and not pyfunc.get("code"), pyfunc
        version = client.get_model_version_by_alias(name, BEST_ALIAS)
        flavors[name] = version.tags[FLAVOR_TAG]
        policy, meta = load_registered_policy(f"models:/{name}@best", registry["uri"])
        assert meta["model_type"] in {"mlp_actor_critic", "hf_causal_lm"} and not policy.training
    assert flavors == {
        "rlpipe-flavor-cartpole": "python_function",
        "rlpipe-flavor-pendulum": "python_function",
        "rlpipe-flavor-lm-full": "transformers",
        "rlpipe-flavor-lm-lora": "transformers",
    }
    lora = download_registered_model("models:/rlpipe-flavor-lm-lora@best", registry["uri"])
    assert (lora / "adapter" / "adapter_config.json").is_file()  # the adapter alone, as before
    assert not (lora / "model").exists()  # the weights are stored once, at the root
    signature = Model.load(str(lora / MLMODEL_FILE)).signature
    assert signature.params.to_dict()[0] == {
        "name": "max_new_tokens",
        "type": "long",
        "default": 6,  # the run's rollout.max_new_tokens
        "shape": None,
    }


def test_a_failed_flavor_leaves_the_rlpipe_directory_registrable(
    registry: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    import infra.tracking.mlflow_flavor as flavor

    folder = download_registered_model(
        "models:/rlpipe-flavor-cartpole@best", registry["uri"], tmp_path / "m"
    )
    (folder / MLMODEL_FILE).unlink()

    def broken(model_dir: Path, meta: dict) -> None:
        (model_dir / MLMODEL_FILE).write_text("half written")
        raise OSError("disk full")

    monkeypatch.setattr(flavor, "write_policy_pyfunc", broken)
    assert add_mlflow_flavor(folder) == "none"
    assert "could not add the MLflow python_function flavor (OSError: disk full)" in caplog.text
    assert not (folder / MLMODEL_FILE).exists() and (folder / META_FILE).is_file()


def test_flavor_choice_and_observation_input(tmp_path: Path) -> None:
    box = {"type": "Box", "shape": [4], "low": [0] * 4, "high": [1] * 4, "dtype": "float32"}
    images = {"type": "Dict", "spaces": {"main_images": {**box, "shape": [8, 8, 3]}}}
    state = {"weights_format": "state_dict", "spaces": {"observation_space": box}}
    pixels = {"weights_format": "state_dict", "spaces": {"observation_space": images}}
    backbone = {"weights_format": "hf_backbone", "spaces": {"observation_space": box}}
    nowhere = Path("/nonexistent")
    assert flavor_for(nowhere, state) == "python_function"
    assert flavor_for(nowhere, pixels) == "none"
    assert flavor_for(nowhere, backbone) == "none"
    assert flavor_for(nowhere, {"weights_format": "hf_pretrained", "spaces": None}) == "none"
    hf = {"weights_format": "hf_pretrained", "spaces": None}
    for architecture, flavor in [("Qwen2ForCausalLM", "transformers"), ("Qwen2Model", "none")]:
        (tmp_path / "config.json").write_text(json.dumps({"architectures": [architecture]}))
        assert flavor_for(tmp_path, hf) == flavor, architecture  # a reward model: none

    assert observations_array([0.1, 0.2, 0.3, 0.4], 4).shape == (1, 4)
    assert observations_array(np.zeros((3, 4)), 4).dtype == np.float32
    with pytest.raises(ValueError, match=r"takes \[batch, 4\]"):
        observations_array(np.zeros((3, 5)), 4)


def test_without_tracking_mlflow_flavor_the_rlpipe_folder_is_registered_alone(
    tmp_path: Path,
) -> None:
    from mlflow.tracking import MlflowClient

    cfg = load_config("ppo_cartpole", [*CONTROL["cartpole"], "tracking.mlflow_flavor=false"])
    spaces = probe_spaces(cfg.env)
    policy = get_model(cfg.model, spaces).eval()
    store = _write_checkpoint(tmp_path / "ckpt", cfg, policy, policy.state_dict(), spaces)
    _register(tmp_path, store, "rlpipe-no-flavor", "embodied")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    version = MlflowClient(uri, registry_uri=uri).get_model_version_by_alias(
        "rlpipe-no-flavor", BEST_ALIAS
    )
    assert version.tags[FLAVOR_TAG] == "none"
    folder = download_registered_model("models:/rlpipe-no-flavor@best", uri, tmp_path / "m")
    assert (folder / META_FILE).is_file() and not (folder / MLMODEL_FILE).exists()
