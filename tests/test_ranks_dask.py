"""Thousands of ranks the way people already spread such work: each rank's summary
(``gpuscope.rank_summary``) computed on the worker processes of a Dask cluster, the
summaries merged on one machine. ``distributed.LocalCluster`` stands in for a real
cluster: the code is the same, with the scheduler's address in place of the local one.

The job is 256 ranks of the shared H200 trace (links to one file; its rank comes from
the file name), one of them a copy with its kernels stretched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gpuscope
import pytest
from _helpers import SHARED_DATA, gpuscope_cli, rank_job, shared_file
from distributed import Client, LocalCluster

H200_TRACE = SHARED_DATA / "gpu-h200/lm_clean/profiler_traces/1795675943334.pt.trace.json.gz"
RANKS = 256
SLOW = 137


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RANKS rank files: links to the H200 trace, rank SLOW a stretched copy."""
    source = shared_file(H200_TRACE)
    return rank_job(tmp_path_factory.mktemp("job256"), source, RANKS, SLOW)


def test_dask_workers_summarise_256_ranks_and_the_merge_finds_the_stretched_one(
    job: Path,
) -> None:
    paths = sorted(str(p) for p in job.glob("*.json.gz"))
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        workers = set(client.run(os.getpid).values())
        summaries = client.gather(client.map(gpuscope.rank_summary, paths))
    # The summaries were made in two other processes, not this one.
    assert len(workers) == 2 and os.getpid() not in workers
    assert sorted(s["rank"] for s in summaries) == list(range(RANKS))
    assert max(len(json.dumps(s)) for s in summaries) <= 16 * 1024
    merged = gpuscope.merge_rank_summaries(summaries)
    assert [s["rank"] for s in merged["comparison"]["stragglers"]] == [SLOW]
    # The same answer as the command reading the traces themselves.
    full = gpuscope_cli("trace", job, "--format", "json", timeout=300)
    assert full.returncode == 0, full.stderr
    doc = json.loads(full.stdout)
    assert merged["comparison"] == doc["rank_comparison"]
    assert [r["rank"] for r in doc["ranks"]] == list(range(RANKS))
