"""Configuration schema, presets and override parsing."""

from rl_core.config.loader import ConfigError, available_presets, load_config, validate_config
from rl_core.config.run_sections import check_run_name
from rl_core.config.schema import RLPipeConfig

__all__ = [
    "ConfigError",
    "RLPipeConfig",
    "available_presets",
    "check_run_name",
    "load_config",
    "validate_config",
]
