"""Reward functions applied to collected rollouts."""

from rl_core.rewards.registry import REWARDS, get_reward, register_reward

__all__ = ["REWARDS", "get_reward", "register_reward"]
