"""The :class:`Kind` record and its registry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rl_core.kind_packages import load_kind_packages
from rl_core.registry import Registry, RegistryError


@dataclass(frozen=True)
class Kind:
    """One kind of training (``embodied``, ``reasoning``, or an extension's).

    Attributes:
        name: The kind's name; models of this kind register with ``category=name``.
        config: Its config class (a subclass of
            :class:`~rl_core.config.schema.RLPipeConfig`): the shared sections plus the
            kind's own; a field the kind does not read is refused by it.
        runtime: Its runtime class (a ``StepRuntime`` subclass), or a function
            ``cfg -> runtime class`` that chooses among variants and imports the class only
            when a run of this kind starts.
        score_metric: The metric that ranks checkpoints and registered versions.
        task_name: ``cfg -> str``: what the policy is trained and evaluated on (names the
            MLflow experiment and registered model).
        protocol: ``cfg -> dict``: every setting that changes what an evaluation score means.
        data_fingerprint: ``(cfg, hashlib digest) -> None``: feeds the training data's
            identity into the digest (the model's lineage).
        version_scorer: ``(protocol, model_dir, version) -> VersionScore`` scoring a
            registered version again under a protocol; None: versions keep the score they
            were registered with.
        models: Model types to register with this kind (``name -> builder``).
        refines: The kind this one refines (its models, naming and evaluation are that
            kind's), or None. A config of the refined kind's models is of this kind when
            :attr:`selects` says so.
        selects: ``written config (dict) -> bool``: whether a config of the refined kind's
            models is of this kind (e.g. ``online.enabled: true``).
    """

    name: str
    config: type
    runtime: type | Callable[[Any], type]
    score_metric: str
    task_name: Callable[[Any], str]
    protocol: Callable[[Any], dict[str, Any]]
    data_fingerprint: Callable[[Any, Any], None]
    version_scorer: Callable[..., Any] | None = None
    models: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    refines: str | None = None
    selects: Callable[[Mapping[str, Any]], bool] | None = None

    def __post_init__(self) -> None:
        if (self.refines is None) != (self.selects is None):
            raise ValueError(f"kind {self.name!r}: refines and selects go together")

    def runtime_class(self, cfg: Any) -> type:
        """The runtime class that trains ``cfg``."""
        runtime = self.runtime
        return runtime if isinstance(runtime, type) else runtime(cfg)

    def scorer(self) -> Callable[..., Any] | None:
        """The version scorer, or None when versions keep their registered score."""
        return self.version_scorer


KINDS: Registry[Kind] = Registry("kind of training")


def register_kind(kind: Kind, force: bool = False) -> Kind:
    """Register ``kind`` (and its :attr:`Kind.models`); the one call that adds a kind.

    Args:
        kind: The kind.
        force: Replace a kind (and models) already registered under these names.

    Returns:
        ``kind``.
    """
    from rl_core.models.registry import register_model

    load_kind_packages()
    KINDS.register(kind.name, kind, force=force)
    for model_type, builder in kind.models.items():
        register_model(model_type, builder, category=kind.name, force=force)
    return kind


def kind_named(name: str) -> Kind:
    """The registered kind called ``name``.

    Raises:
        RegistryError: No such kind (the message lists the registered ones).
    """
    load_kind_packages()
    return KINDS.get(name)


def kind_of_model_type(model_type: str) -> Kind:
    """The kind of a registered model type (its category).

    Raises:
        RegistryError: Unknown model type, or its category has no registered kind.
    """
    from rl_core.models.registry import MODELS

    load_kind_packages()
    category = MODELS.get(model_type).category
    if category not in KINDS:
        raise RegistryError(
            f"model.model_type = {model_type!r} has category {category!r}, which is not a "
            f"registered kind of training (registered: {', '.join(KINDS.names())}); an "
            "extension module adds one with rl_core.kind.register_kind"
        )
    return KINDS.get(category)


def kind_of_written_config(data: Mapping[str, Any], model_type: str) -> Kind:
    """The kind of a written (not yet validated) config whose model type is ``model_type``.

    The kind of the model type, or the registered kind refining it that selects ``data``.

    Raises:
        RegistryError: Unknown model type, its category has no registered kind, or two
            kinds refining it both select ``data``.
    """
    base = kind_of_model_type(model_type)
    chosen = [
        kind
        for kind in map(KINDS.get, KINDS.names())
        if kind.refines == base.name and kind.selects is not None and kind.selects(data)
    ]
    if len(chosen) > 1:
        names = " and ".join(kind.name for kind in chosen)
        raise RegistryError(f"this config is of two registered kinds of training at once: {names}")
    return chosen[0] if chosen else base


def model_section_class(model_type: str) -> type:
    """The ``model`` section class of the kind that trains ``model_type``.

    Raises:
        RegistryError: Unknown model type, or its category has no registered kind.
    """
    return kind_of_model_type(model_type).config.model_fields["model"].annotation


def kind_of(cfg: Any) -> Kind:
    """The registered kind of a validated config."""
    return kind_named(cfg.kind_name)
