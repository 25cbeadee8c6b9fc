"""Runtime infrastructure for rlpipe.

Ray connection, worker groups, placement, weight sync, checkpoint store and MLflow
tracking. Never imports ``tasks`` or ``flows``.
"""
