"""The CUDA checks of ``scripts/gpu_check.py``, one module per path."""
