"""Reasoning-path infrastructure: FSDP2 process groups, rollout engines, prompt feeding."""
