"""Reward functions applied to collected rollouts."""

from rl_core.rewards.registry import REWARDS, build_reward, get_reward, register_reward

__all__ = ["REWARDS", "build_reward", "get_reward", "register_reward"]
