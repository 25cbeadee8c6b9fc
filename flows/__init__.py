"""Prefect flows: ``train`` (entry + CLI), the per-iteration child flow, ``evaluate``."""
