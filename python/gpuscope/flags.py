"""Command-line switches for a training script's own argparse, as training scripts commonly
have them (``--profile_tensors True``), and a profiler built from them.

>>> parser = argparse.ArgumentParser()
>>> gpuscope.add_argparse_flags(parser)              # doctest: +SKIP
>>> args = parser.parse_args()
>>> scope = gpuscope.MemoryProfiler.from_args(args, model=model, optimizer=opt)
"""

from __future__ import annotations

import argparse

__all__ = ["add_argparse_flags", "str2bool"]

_TRUE = {"true", "1", "yes", "on", "y", "t"}
_FALSE = {"false", "0", "no", "off", "n", "f"}


def str2bool(text: str) -> bool:
    """``True``/``False`` and the usual spellings, for ``--flag True``."""
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, not {text!r}")


def add_argparse_flags(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Adds ``--profile_tensors``, ``--profile_interval``, ``--profile_dir``,
    ``--profile_scan`` and ``--snapshot_at``. ``--profile_tensors`` alone also means True
    (argparse's ``type=bool`` would read any string as True)."""
    group = parser.add_argument_group("gpuscope memory profiling")
    group.add_argument(
        "--profile_tensors",
        type=str2bool,
        nargs="?",
        const=True,
        default=False,
        metavar="True|False",
        help="record where memory goes every --profile_interval iterations",
    )
    group.add_argument(
        "--profile_interval", type=int, default=50, help="iterations between records"
    )
    group.add_argument(
        "--profile_dir",
        default=None,
        help="run directory (default: $GPUSCOPE_RUN_DIR, else runs/gpuscope)",
    )
    group.add_argument(
        "--profile_scan",
        choices=("fast", "gc"),
        default="fast",
        help="'gc' also walks the Python heap for tensors outside model and optimizer",
    )
    group.add_argument(
        "--snapshot_at",
        type=int,
        nargs="*",
        default=[],
        metavar="ITER",
        help="iterations at which to save a CUDA allocator snapshot",
    )
    return group
