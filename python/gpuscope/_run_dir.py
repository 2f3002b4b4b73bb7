"""The run directory when the caller names none: the one ``gpuscope run`` hands its
command (the variable's name comes from the engine, which sets it), else the caller's
default. The profiler, the profiling session, the OOM guard and the framework callbacks
all ask here, so that they and the CLI agree on one variable read one way."""

from __future__ import annotations

import os
from pathlib import Path

from gpuscope._native import RUN_DIR_VAR

__all__ = ["default_run_dir"]


def default_run_dir(default: str | os.PathLike[str] = "runs/gpuscope") -> Path:
    """``$GPUSCOPE_RUN_DIR`` (set by ``gpuscope run``) when set and not empty, else
    ``default``: an empty variable means none, as the CLI reads it, not the current
    directory."""
    return Path(os.environ.get(RUN_DIR_VAR) or default)
