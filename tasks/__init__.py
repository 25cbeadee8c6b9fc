"""Prefect tasks of the pipeline's steps.

Thin: they call worker groups through the training session and return small dicts
(metrics, versions, paths). The steps that are one call of the runtime share one task
definition (``tasks/steps.py``); reward, evaluate, checkpoint and the run's closing steps
have modules of their own.
"""
