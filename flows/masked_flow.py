"""Flows whose parameters reach the Prefect API with secrets masked.

Prefect stores a flow run's parameters and shows them in its API and UI as they are. A
flow called in-process (the CLI, a script, a parent flow) sends them through
:meth:`~prefect.Flow.serialize_parameters`: :class:`MaskedParametersFlow` masks them there
(``tracking.tracking_uri=https://***@host``, ``model.hf_token=***``) while the flow function
still receives the real values in memory.

A deployment's parameters are stored by Prefect as given (``prefect.yaml``, the UI, ``prefect
deployment run --param``) before any rlpipe code runs: keep secrets in the worker's
environment instead (``MLFLOW_TRACKING_URI``, ``MLFLOW_TRACKING_PASSWORD``, ``AWS_*``).
:func:`warn_if_secret_parameters` says so when a deployment run's parameters hold one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prefect import Flow
from prefect.context import FlowRunContext

from infra.tracking.secrets import redact_config

logger = logging.getLogger("rlpipe.parameters")


def mask_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """Flow parameters as Prefect may store them: secrets masked (keys, URIs, overrides)."""
    return redact_config(parameters)


class MaskedParametersFlow(Flow):
    """A Prefect flow whose parameters are masked on their way to the Prefect API."""

    def serialize_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """Prefect's JSON form of ``parameters``, with secrets masked."""
        return mask_parameters(super().serialize_parameters(parameters))

    def with_options(self, **options: Any) -> MaskedParametersFlow:
        """Prefect's ``with_options`` (which builds a plain ``Flow``), keeping the masking."""
        new_flow = super().with_options(**options)
        new_flow.__class__ = MaskedParametersFlow
        return new_flow


def masked_flow(**options: Any) -> Callable[[Callable[..., Any]], MaskedParametersFlow]:
    """Like ``@prefect.flow(**options)``, making a :class:`MaskedParametersFlow`."""

    def decorate(fn: Callable[..., Any]) -> MaskedParametersFlow:
        return MaskedParametersFlow(fn=fn, **options)

    return decorate


def current_deployment_id() -> str | None:
    """The deployment of the flow run this code runs in (None: not a deployment run)."""
    context = FlowRunContext.get()
    run = context.flow_run if context else None
    return str(run.deployment_id) if run and run.deployment_id else None


def warn_if_secret_parameters(parameters: dict[str, Any]) -> None:
    """Warn when a deployment run's parameters hold a secret (Prefect stores them as given)."""
    if current_deployment_id() is None:
        return
    masked = mask_parameters(parameters)
    shown = [f"{key}={masked[key]}" for key in parameters if masked[key] != parameters[key]]
    if shown:
        logger.warning(
            "this deployment run's parameters hold secrets, which Prefect stores and shows as "
            "given: %s; set them in the worker's environment instead (MLFLOW_TRACKING_URI, "
            "MLFLOW_TRACKING_PASSWORD, AWS_*)",
            "; ".join(shown),
        )
