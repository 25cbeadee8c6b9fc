"""Online RL: serving a run's policy, storing generations and feedback, training on them."""
