"""Names of the reasoning path's implementations that live outside ``rl_core``.

``rollout.engine`` and ``actor.backend`` name implementations that need the cluster code
(inference engines, parallel trainer backends). Their registries live here, so the config
validates a name from the one place the cluster code resolves it. The built-in entries are
registered by the cluster code itself (``infra.llm``, imported by the kind packages that use
it: :mod:`rl_core.kind_packages`) as ``"module:attribute"`` references imported only by
:func:`resolve`; a user's entry may be the object itself
(``ROLLOUT_ENGINES.register("mine", factory)``).
"""

from __future__ import annotations

import importlib
from typing import Any

from rl_core.kind_packages import load_kind_packages
from rl_core.registry import Registry, RegistryError

#: ``rollout.engine`` → engine factory (or its ``"module:attribute"`` reference), called as
#: ``factory(model_cfg, rollout_cfg, device=torch.device, collocated=bool)``.
ROLLOUT_ENGINES: Registry[Any] = Registry("rollout engine", load=load_kind_packages)

#: Rollout engines that apply LoRA adapters (``actor.lora``): their factory takes a ``lora``
#: keyword (the ``actor.lora`` section) and their ``update_weights`` accepts the adapters'
#: tensors alone. The value says how, for the docs.
LORA_ROLLOUT_ENGINES: Registry[str] = Registry("rollout engine that applies LoRA adapters")
LORA_ROLLOUT_ENGINES.register("hf", "PEFT adapters on the Hugging Face model")
LORA_ROLLOUT_ENGINES.register("vllm", "a vLLM LoRA adapter (LoRARequest) per weight version")

#: ``actor.backend`` → trainer backend class (or its ``"module:attribute"`` reference).
TRAINER_BACKENDS: Registry[Any] = Registry("trainer backend", load=load_kind_packages)


def resolve(entry: Any) -> Any:
    """The object a registry entry stands for.

    Args:
        entry: A registered object, or a ``"module:attribute"`` reference to one.

    Returns:
        ``entry`` itself, or the attribute of the imported module it references.

    Raises:
        RegistryError: A reference lacks the ``":attribute"`` part or names no attribute.
    """
    if not isinstance(entry, str):
        return entry
    module, _, attribute = entry.partition(":")
    if not attribute:
        raise RegistryError(f"{entry!r} is not a 'module:attribute' reference")
    try:
        return getattr(importlib.import_module(module), attribute)
    except AttributeError:
        raise RegistryError(f"module {module!r} has no attribute {attribute!r}") from None
