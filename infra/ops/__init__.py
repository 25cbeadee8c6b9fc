"""Operations tools, apart from the training runtime.

The local Prefect API, a local Ray head, and the local stack (Prefect and MLflow servers
and a worker).
"""
