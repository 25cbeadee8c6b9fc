"""The language-model machinery every LLM kind shares: engines, trainer backends and ranks.

Rollout engines (Hugging Face ``generate``, vLLM), trainer backends (FSDP2, Megatron), the
trainer ranks and the actor/reference workers serve the reasoning, online and reward-model
kinds alike. Importing this package registers the built-in engines and backends under the
names ``rollout.engine`` and ``actor.backend`` accept; each entry is imported only when a
run uses it.
"""

from rl_core.llm.implementations import ROLLOUT_ENGINES, TRAINER_BACKENDS

ROLLOUT_ENGINES.register("hf", "infra.llm.engines:HFEngine")
ROLLOUT_ENGINES.register("vllm", "infra.llm.vllm_engine:VLLMEngine")
TRAINER_BACKENDS.register("fsdp", "infra.llm.trainer_backends:FSDPBackend")
TRAINER_BACKENDS.register("megatron", "infra.llm.megatron_backend:MegatronBackend")
