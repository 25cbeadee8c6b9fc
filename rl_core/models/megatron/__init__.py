"""Megatron-core models built from Hugging Face causal LMs (Qwen2 / Llama family).

:mod:`.config` maps a Hugging Face config to megatron's ``TransformerConfig``,
:mod:`.weights` converts weights both ways (per tensor-parallel rank),
:mod:`.gpt` builds the ``GPTModel`` and :mod:`.cpu_modules` replaces the two modules that need CUDA.
"""
