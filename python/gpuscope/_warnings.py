"""Warnings that point at the user's line, however deep in gpuscope (or in torch, which calls
gpuscope's hooks and trace callbacks) they are raised: ``warnings.warn``'s ``stacklevel``
counted by hand breaks whenever a call path changes."""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

__all__ = ["warn_user"]

_GPUSCOPE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _library_dirs() -> tuple[str, ...]:
    """gpuscope's package directory, and torch's when the program has imported it (torch
    runs gpuscope's profiler callbacks and hooks on behalf of the user's call)."""
    dirs = [_GPUSCOPE_DIR]
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None)
    if torch_file:
        dirs.append(os.path.dirname(os.path.abspath(torch_file)) + os.sep)
    return tuple(dirs)


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first frame outside gpuscope and torch: the line
    of the user's code that led here (what Python 3.12's ``skip_file_prefixes`` does)."""
    skip = _library_dirs()
    frame: FrameType | None = sys._getframe(1)
    level = 2  # 1 is this function, 2 its caller
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(skip):
        frame = frame.f_back
        level += 1
    if frame is None:  # called from gpuscope and torch only: point at the caller
        level = 2
    warnings.warn(message, category, stacklevel=level)
