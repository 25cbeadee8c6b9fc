"""Experiment tracking (MLflow)."""

from infra.tracking.mlflow_tracker import MlflowTracker, flatten_config

__all__ = ["MlflowTracker", "flatten_config"]
