"""Prefect tasks, one module per pipeline step.

Thin: they call worker groups through the training session and return small dicts
(metrics, versions, paths).
"""
