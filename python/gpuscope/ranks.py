"""Many ranks: each rank's trace reduced to a few kilobytes where it lies, then the
summaries merged on one machine.

``rank_summary`` is a module-level function of one file, so Dask, Ray or a Slurm array
can ship it to the workers that hold the traces; the summaries are plain JSON-able dicts
(``gpuscope.rank_summary/1``, at most 16 KiB each), and ``merge_rank_summaries`` turns
any number of them into the cross-rank view (``gpuscope.ranks/1``): per-step spread,
the stragglers as ``gpuscope trace DIR`` reports them, collectives whose time differs
across ranks, ranks missing steps.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from gpuscope import _native

__all__ = ["merge_rank_summaries", "rank_summary"]


def rank_summary(path: str | os.PathLike[str], *, hta_compat: bool = False) -> dict[str, Any]:
    """The summary of one rank's trace file (``.json`` or ``.json.gz``): its rank and
    where the rank came from, the figures the stragglers are found from, the first and
    last profiler steps with where their time went, the communication kernels, the
    launch statistics and the top kernels. ``hta_compat`` rounds times as HTA does."""
    return _native.rank_summary(os.fspath(path), hta_compat)


def merge_rank_summaries(summaries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The cross-rank view of ``summaries`` (as :func:`rank_summary` returns them, from
    any machine). Raises ``gpuscope.BadInputError`` for a dict that is not one."""
    return _native.merge_rank_summaries(list(summaries))
