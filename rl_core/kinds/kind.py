"""The :class:`Kind` record and its registry."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rl_core.registry import Registry, RegistryError

#: The modules of the built-in kinds, imported when a config names one of their models.
BUILTIN_KIND_MODULES = (
    "rl_core.kinds.embodied",
    "rl_core.kinds.reasoning",
    "rl_core.kinds.reward_model",
)


@dataclass(frozen=True)
class Kind:
    """One kind of training (``embodied``, ``reasoning``, or an extension's).

    Attributes:
        name: The kind's name; models of this kind register with ``category=name``.
        config: Its config class (a subclass of
            :class:`~rl_core.config.schema.RLPipeConfig`): the shared sections plus the
            kind's own; a field the kind does not read is refused by it.
        runtime: Its runtime class (a ``StepRuntime`` subclass) or a function
            ``cfg -> runtime class`` choosing among variants, or ``"module:name"`` of either
            so it is imported only when a run of this kind starts.
        score_metric: The metric that ranks checkpoints and registered versions.
        task_name: ``cfg -> str``: what the policy is trained and evaluated on (names the
            MLflow experiment and registered model).
        protocol: ``cfg -> dict``: every setting that changes what an evaluation score means.
        data_fingerprint: ``(cfg, hashlib digest) -> None``: feeds the training data's
            identity into the digest (the model's lineage).
        version_scorer: ``(protocol, model_dir, version) -> VersionScore`` (or
            ``"module:function"``) scoring a registered version again under a protocol;
            None: versions keep the score they were registered with.
        models: Model types to register with this kind (``name -> builder``).
    """

    name: str
    config: type
    runtime: type | str
    score_metric: str
    task_name: Callable[[Any], str]
    protocol: Callable[[Any], dict[str, Any]]
    data_fingerprint: Callable[[Any, Any], None]
    version_scorer: Callable[..., Any] | str | None = None
    models: Mapping[str, Callable[..., Any]] = field(default_factory=dict)

    def runtime_class(self, cfg: Any) -> type:
        """The runtime class that trains ``cfg`` (imported now when named by a string)."""
        runtime = resolve(self.runtime)
        return runtime if isinstance(runtime, type) else runtime(cfg)

    def scorer(self) -> Callable[..., Any] | None:
        """The version scorer (imported now when given as ``"module:function"``)."""
        return None if self.version_scorer is None else resolve(self.version_scorer)


def resolve(target: Any) -> Any:
    """``"package.module:attribute"`` imported; anything else returned as it is."""
    if not isinstance(target, str):
        return target
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


KINDS: Registry[Kind] = Registry("kind of training")


def _load_builtin_kinds() -> None:
    for module in BUILTIN_KIND_MODULES:
        importlib.import_module(module)


def register_kind(kind: Kind, force: bool = False) -> Kind:
    """Register ``kind`` (and its :attr:`Kind.models`); the one call that adds a kind.

    Args:
        kind: The kind.
        force: Replace a kind (and models) already registered under these names.

    Returns:
        ``kind``.
    """
    from rl_core.models.registry import register_model

    _load_builtin_kinds()
    KINDS.register(kind.name, kind, force=force)
    for model_type, builder in kind.models.items():
        register_model(model_type, builder, category=kind.name, force=force)
    return kind


def kind_named(name: str) -> Kind:
    """The registered kind called ``name``.

    Raises:
        RegistryError: No such kind (the message lists the registered ones).
    """
    _load_builtin_kinds()
    return KINDS.get(name)


def kind_of_model_type(model_type: str) -> Kind:
    """The kind of a registered model type (its category).

    Raises:
        RegistryError: Unknown model type, or its category has no registered kind.
    """
    from rl_core.models.registry import MODELS

    _load_builtin_kinds()
    category = MODELS.get(model_type).category
    if category not in KINDS:
        raise RegistryError(
            f"model.model_type = {model_type!r} has category {category!r}, which is not a "
            f"registered kind of training (registered: {', '.join(KINDS.names())}); an "
            "extension module adds one with rl_core.kinds.register_kind"
        )
    return KINDS.get(category)


def model_section_class(model_type: str) -> type:
    """The ``model`` section class of the kind that trains ``model_type``.

    Raises:
        RegistryError: Unknown model type, or its category has no registered kind.
    """
    return kind_of_model_type(model_type).config.model_fields["model"].annotation


def kind_of(cfg: Any) -> Kind:
    """The registered kind of a validated config."""
    return kind_named(cfg.category)
