"""Reward-model training: the FSDP2 trainer ranks and the runtime of the reward_model kind."""
