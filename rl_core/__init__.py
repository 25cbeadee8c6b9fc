"""Pure RL building blocks: algorithms, policies, envs, config schema, registries.

Nothing in this package imports Prefect, Ray, MLflow or boto3, so it can be unit tested in
milliseconds and used inside any worker process.
"""
