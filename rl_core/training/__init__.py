"""Pure training steps used by the actor worker (advantages, PPO update, schedules)."""
