"""The ``transformers`` MLflow flavor of an exported language model.

The export of a causal LM policy is a Hugging Face ``from_pretrained`` directory (for a
LoRA run: the merged model, the adapter alone in ``adapter/``). MLflow's
``mlflow.transformers.save_model`` saves it as a ``text-generation`` pipeline into a
staging directory; its ``MLmodel``, environment files and tokenizer (``components/``) move
into the model directory, and the flavor's ``model_binary`` points at the directory itself
(``.``) instead of MLflow's second copy of the weights (``model/``, dropped), so the
weights are stored once. ``mlflow.transformers.load_model`` then returns a
``TextGenerationPipeline`` and ``mlflow.pyfunc.load_model`` a model whose ``predict``
takes prompts and returns texts.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from infra.tracking.flavor_files import (
    MLMODEL_FILE,
    MlflowFlavorError,
    directory_size,
    merge_into,
    pinned_requirements,
)

logger = logging.getLogger(__name__)
FLAVOR = "transformers"
TASK = "text-generation"
#: ``predict``'s default ``max_new_tokens`` when the run's config has none.
DEFAULT_MAX_NEW_TOKENS = 256
#: What MLflow writes that the model directory does not keep: its copy of the weights,
#: and a license notice naming the temporary export folder as a Hugging Face repository.
_LEFT_OUT = ("model", "LICENSE.txt")
_REQUIREMENTS = ("transformers", "torch", "safetensors", "tokenizers", "accelerate")


def is_causal_lm_directory(model_dir: Path) -> bool:
    """Whether ``model_dir`` holds a Hugging Face causal LM (``*ForCausalLM`` config)."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    architectures = config.get("architectures") or []
    return any(str(a).endswith("ForCausalLM") for a in architectures)


def text_generation_signature(max_new_tokens: int) -> Any:
    """Prompts in, texts out; ``max_new_tokens`` and ``do_sample`` as parameters."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import ColSpec, ParamSchema, ParamSpec, Schema

    return ModelSignature(
        inputs=Schema([ColSpec("string")]),
        outputs=Schema([ColSpec("string")]),
        params=ParamSchema(
            [
                ParamSpec("max_new_tokens", "long", int(max_new_tokens)),
                ParamSpec("do_sample", "boolean", False),
            ]
        ),
    )


def model_card_text(meta: dict[str, Any]) -> str:
    """The model card saved with the flavor (what the directory holds and where from)."""
    source = meta.get("source") or {}
    return (
        "---\nlibrary_name: transformers\npipeline_tag: text-generation\ntags: [rlpipe]\n---\n"
        f"# rlpipe policy ({meta['model_type']})\n\n"
        f"Trained by rlpipe run `{source.get('run_name', 'unknown')}`, checkpoint step "
        f"{source.get('step', 'unknown')}; weights: {meta.get('weights', 'full')}.\n\n"
        "Load it with `mlflow.transformers.load_model(uri)` (a text-generation pipeline), "
        "`mlflow.pyfunc.load_model(uri)`, or rlpipe's "
        "`infra.checkpoint.export.load_exported_policy(directory)`.\n"
    )


def write_transformers_flavor(
    model_dir: Path, meta: dict[str, Any], max_new_tokens: int | None = None
) -> None:
    """Add the ``transformers`` (and ``python_function``) flavor to an exported causal LM.

    Args:
        model_dir: The rlpipe model directory (a Hugging Face directory).
        meta: Its ``rlpipe_model.json``.
        max_new_tokens: ``predict``'s default (the run's ``rollout.max_new_tokens``;
            None: :data:`DEFAULT_MAX_NEW_TOKENS`).

    Raises:
        MlflowFlavorError: MLflow saved the model in a layout this function does not know.
    """
    import mlflow.transformers
    from huggingface_hub import ModelCard
    from mlflow.models import Model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype="auto")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    with tempfile.TemporaryDirectory(prefix=".mlflow-", dir=model_dir.parent) as tmp:
        staging = Path(tmp) / "model"
        mlflow.transformers.save_model(
            {"model": model, "tokenizer": tokenizer},
            str(staging),
            task=TASK,
            signature=text_generation_signature(max_new_tokens or DEFAULT_MAX_NEW_TOKENS),
            model_card=ModelCard(model_card_text(meta)),  # else MLflow asks the hub for one
            pip_requirements=pinned_requirements(*_REQUIREMENTS),
        )
        del model
        mlmodel = Model.load(str(staging / MLMODEL_FILE))
        flavor = mlmodel.flavors.get(FLAVOR, {})
        if flavor.get("model_binary") != "model" or not (staging / "model").is_dir():
            raise MlflowFlavorError(
                f"mlflow {mlflow.__version__} saved the weights in an unknown layout "
                f"(model_binary {flavor.get('model_binary')!r})"
            )
        flavor["model_binary"] = "."  # the model directory is the same from_pretrained dir
        merge_into(staging, model_dir, leave_out=_LEFT_OUT)
    mlmodel.model_size_bytes = directory_size(model_dir)
    mlmodel.save(str(model_dir / MLMODEL_FILE))
    logger.info("added the MLflow %s flavor (%s) to %s", FLAVOR, TASK, model_dir)
