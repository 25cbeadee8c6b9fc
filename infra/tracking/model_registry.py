"""MLflow model registry: register a run's exported policy, keep aliases, load it back.

A registered version's source is a model folder in its run's artifacts (rlpipe logs them
as ``model/step_<checkpoint step>``): an rlpipe model
directory (see :mod:`infra.checkpoint.export`; for language models it is also a Hugging
Face ``from_pretrained`` directory) and, where a flavor fits, an MLflow model that
``mlflow.transformers.load_model`` / ``mlflow.pyfunc.load_model`` load
(:mod:`infra.tracking.mlflow_flavor`). Version tags record the evaluation score of the
registered weights; the alias ``best`` points at the version with the highest score and
``newest`` at the most recently registered one (MLflow reserves the alias ``latest``; the
URI ``models:/<name>/latest`` resolves to the highest version number).

Load a version with :func:`load_registered_policy`::

    policy, meta = load_registered_policy("models:/rlpipe-CartPole-v1-mlp_actor_critic@best", tracking_uri)
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from rl_core.config.naming import MODEL_URI, MODEL_URI_FORMS

logger = logging.getLogger(__name__)
MODEL_ARTIFACT_DIR = "model"
BEST_ALIAS = "best"
NEWEST_ALIAS = "newest"
SCORE_TAG = "eval_score"
#: Version tag: the evaluation protocol its score was measured under (scores of different
#: protocols are not compared).
EVAL_PROTOCOL_TAG = "eval_protocol"


@dataclass(frozen=True)
class RegisteredVersion:
    """A model version created by :func:`register_version`.

    Attributes:
        name: Registered model name.
        version: Version number (string, as MLflow returns it).
        aliases: Aliases pointing at this version after registration.
        score: The evaluation score it was tagged with (None: no evaluation).
    """

    name: str
    version: str
    aliases: tuple[str, ...]
    score: float | None

    @property
    def uri(self) -> str:
        """``models:/<name>/<version>``."""
        return f"models:/{self.name}/{self.version}"


def ensure_registered_model(client: MlflowClient, name: str, description: str = "") -> None:
    """Create the registered model ``name`` unless it exists."""
    try:
        client.get_registered_model(name)
    except MlflowException:
        try:
            client.create_registered_model(name, description=description or None)
        except MlflowException as exc:  # created concurrently by another run
            if "RESOURCE_ALREADY_EXISTS" not in str(exc.error_code):
                raise


def best_version(client: MlflowClient, name: str) -> Any | None:
    """The version holding the ``best`` alias (None: no version holds it)."""
    try:
        return client.get_model_version_by_alias(name, BEST_ALIAS)
    except MlflowException:
        return None


def beats_best(client: MlflowClient, name: str, score: float | None, protocol: str | None) -> bool:
    """Whether a version scored ``score`` under ``protocol`` should take the ``best`` alias.

    It must have a score; it wins when no version holds ``best``, or the one that does has
    no score or a lower one under the same protocol. A best version scored under another
    protocol keeps the alias (the scores do not compare): a warning says so.
    """
    if score is None:
        return False
    current = best_version(client, name)
    if current is None:
        return True
    theirs = current.tags.get(EVAL_PROTOCOL_TAG)
    if protocol is not None and theirs is not None and theirs != protocol:
        logger.warning(
            "%s: 'best' (version %s) was scored under another evaluation protocol (%s, this "
            "version: %s); it keeps the alias. Compare them with the same protocol, then set "
            "the alias yourself",
            name,
            current.version,
            theirs,
            protocol,
        )
        return False
    try:
        return score > float(current.tags[SCORE_TAG])
    except (KeyError, ValueError):
        return True


def register_version(
    client: MlflowClient,
    name: str,
    run_id: str,
    artifact_path: str,
    score: float | None,
    tags: dict[str, str] | None = None,
    description: str = "",
    move_best: bool = True,
) -> RegisteredVersion:
    """Register a model directory logged in a run's artifacts as a new version of ``name``.

    Creates the registered model if missing, tags the version (``eval_score`` plus
    ``tags``), points ``newest`` at it and moves ``best`` to it when its score beats the
    current best version's under the same evaluation protocol (:func:`beats_best`) and
    ``move_best`` is set (``tracking.promotion: gated`` leaves ``best`` to the promote flow,
    :mod:`infra.tracking.promotion`).

    Args:
        client: ``MlflowClient`` of the tracking/registry store.
        name: Registered model name.
        run_id: The run holding the model directory.
        artifact_path: The directory's path in the run's artifacts (already logged).
        score: Evaluation score of the registered weights (None: not evaluated; never best).
        tags: More version tags (e.g. ``eval_step``, ``checkpoint_step``).
        description: Version description.
        move_best: Let this registration move ``best`` (False: only ``newest`` moves).
    """
    ensure_registered_model(client, name, "rlpipe policies (rlpipe model directories)")
    source = f"{client.get_run(run_id).info.artifact_uri}/{artifact_path}"
    all_tags = {**(tags or {}), **({SCORE_TAG: repr(float(score))} if score is not None else {})}
    version = client.create_model_version(
        name, source, run_id=run_id, tags=all_tags, description=description or None
    )
    client.set_registered_model_alias(name, NEWEST_ALIAS, version.version)
    aliases = [NEWEST_ALIAS]
    if move_best and beats_best(client, name, score, all_tags.get(EVAL_PROTOCOL_TAG)):
        client.set_registered_model_alias(name, BEST_ALIAS, version.version)
        aliases.append(BEST_ALIAS)
    logger.info(
        "registered %s version %s (score %s; aliases %s)", name, version.version, score, aliases
    )
    return RegisteredVersion(name, str(version.version), tuple(aliases), score)


def resolve_model_uri(client: MlflowClient, model_uri: str) -> Any:
    """The ``ModelVersion`` of ``models:/<name>@<alias>``, ``/<version>`` or ``/latest``.

    Raises:
        ValueError: Not such a URI.
        mlflow.exceptions.MlflowException: No such model, version or alias.
    """
    match = MODEL_URI.match(model_uri)
    if not match:
        raise ValueError(f"{model_uri!r} is not {MODEL_URI_FORMS}")
    name, alias, version = match["name"], match["alias"], match["version"]
    if alias:
        return client.get_model_version_by_alias(name, alias)
    if version == "latest":
        versions = client.search_model_versions(f"name = '{name}'")
        if not versions:
            raise MlflowException(f"registered model {name!r} has no versions")
        version = str(max(int(v.version) for v in versions))
    return client.get_model_version(name, version)


def download_registered_model(
    model_uri: str, tracking_uri: str | None = None, dst: str | Path | None = None
) -> Path:
    """Download a registered version's model directory; returns its local path.

    For a language model the directory is a Hugging Face directory, usable with
    ``AutoModelForCausalLM.from_pretrained(path)``.

    Args:
        model_uri: ``models:/<name>@<alias>``, ``models:/<name>/<version>`` or ``.../latest``.
        tracking_uri: Tracking (and registry) URI; None: MLflow's default.
        dst: Where to download to (default: a new temporary directory).
    """
    from mlflow.artifacts import download_artifacts

    client = MlflowClient(tracking_uri, registry_uri=tracking_uri)
    version = resolve_model_uri(client, model_uri)
    source = client.get_model_version_download_uri(version.name, version.version)
    target = Path(dst) if dst is not None else Path(tempfile.mkdtemp(prefix="rlpipe-model-"))
    target.mkdir(parents=True, exist_ok=True)
    local = download_artifacts(artifact_uri=source, dst_path=str(target), tracking_uri=tracking_uri)
    return Path(local)


def load_registered_policy(
    model_uri: str, tracking_uri: str | None = None, dst: str | Path | None = None
) -> tuple[Any, dict[str, Any]]:
    """Download a registered version and rebuild its policy (eval mode).

    Args:
        model_uri: See :func:`download_registered_model`.
        tracking_uri: Tracking (and registry) URI; None: MLflow's default.
        dst: Download directory (default: a new temporary directory).

    Returns:
        ``(policy, meta)`` as :func:`infra.checkpoint.export.load_exported_policy` returns.
    """
    from infra.checkpoint.export import load_exported_policy

    return load_exported_policy(download_registered_model(model_uri, tracking_uri, dst))
