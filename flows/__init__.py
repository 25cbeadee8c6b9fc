"""Prefect flows: ``train`` (entry + CLI), the per-iteration child flow, ``evaluate``."""

#: The loggers of rlpipe's own code (the CLI's, and one per top-level package).
PROJECT_LOGGERS = ("rlpipe", "infra", "kinds", "tasks", "flows")
