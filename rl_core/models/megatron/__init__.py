"""Megatron-core models built from Hugging Face causal LMs (Qwen2 / Llama family).

:mod:`.config` maps a Hugging Face config to megatron's ``TransformerConfig``,
:mod:`.weights` converts weights both ways (per tensor-parallel rank),
:mod:`.gpt` builds the ``GPTModel`` and :mod:`.cpu_modules` replaces the two modules that need CUDA;
:mod:`.policy` is the trainer's policy, feeding the model padded or packed rows (:mod:`.sequences`).
"""

import warnings

# megatron-core warns at import and model build about GPU extensions (Transformer Engine,
# Apex) and CUDA settings; none applies to the modules this package builds, and every
# trainer rank would print them.
for _message in (
    r".*(Transformer Engine|Apex) (is|are) not installed",
    r"full scope is deprecated",
    r"When using async grad allreduce",
):
    warnings.filterwarnings("ignore", message=_message, category=UserWarning)
