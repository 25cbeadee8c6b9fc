"""Long-lived Ray actors holding envs, policies and optimizers."""
