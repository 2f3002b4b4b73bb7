"""``gpuscope.Snapshot``: an allocator snapshot as DataFrames, checked against the
reference figures of the shared snapshots (torch's ``_memory_viz`` and the snapshot's own
dicts, in ``snapshots/reference.json``)."""

from __future__ import annotations

import json
from typing import Any

import gpuscope
import pytest
from _helpers import SHARED_DATA, shared_file

pd = pytest.importorskip("pandas")

SNAPSHOTS = SHARED_DATA / "snapshots"
NAMES = ["lm_fullstep_ctx128.pickle", "finetune_no_timestamps.pickle"]


def reference(name: str) -> dict[str, Any]:
    ref: dict[str, Any] = json.loads(shared_file(SNAPSHOTS / "reference.json").read_text())
    return ref[name]


@pytest.mark.parametrize("name", NAMES)
def test_segments_and_blocks_match_the_reference(name: str) -> None:
    ref = reference(name)
    snap = gpuscope.Snapshot(shared_file(SNAPSHOTS / name))
    segments, blocks = snap.segments(), snap.blocks()
    assert len(segments) == ref["segments"]
    assert segments["total_size"].sum() == ref["reserved_bytes"]
    assert segments["allocated_size"].sum() == ref["allocated_bytes"]
    assert segments["requested_size"].sum() == ref["requested_bytes"]
    assert blocks["state"].value_counts().to_dict() == ref["block_counts"]
    assert blocks.groupby("state")["size"].sum().to_dict() == ref["block_bytes"]
    assert (
        blocks.groupby("segment_address").size() == segments.set_index("address")["blocks"]
    ).all()
    # What is alive now, by site, is the allocated blocks.
    assert snap.alive_now()["bytes"].sum() == ref["allocated_bytes"]


@pytest.mark.parametrize("name", NAMES)
def test_the_trace_tables(name: str) -> None:
    ref = reference(name)
    source = shared_file(SNAPSHOTS / name)
    snap = gpuscope.Snapshot(source.read_bytes())  # bytes work as a path does
    peak = snap.alive_at_peak()
    assert peak["bytes"].sum() == ref["peak_allocated_bytes"]
    assert list(peak["bytes"]) == sorted(peak["bytes"], reverse=True)
    timeline = snap.timeline()
    assert list(timeline.columns) == ["moment", "x", "site", "bytes"]
    # At the peak moment the timeline's sites add up to the peak.
    assert timeline.groupby("moment")["bytes"].sum().max() == ref["peak_allocated_bytes"]
    assert {"site", "bytes", "count"} <= set(snap.churn().columns)
    assert snap.ooms().empty
    without_trace = gpuscope.Snapshot(source, trace=False)
    assert without_trace.alive_at_peak().empty
    assert len(without_trace.blocks()) == len(snap.blocks())


def test_a_pickle_that_would_run_code_is_refused(tmp_path: Any) -> None:
    evil = b"cos\nsystem\n(S'echo owned'\ntR."
    with pytest.raises(gpuscope.BadInputError):
        gpuscope.Snapshot(evil)
    with pytest.raises(TypeError):
        gpuscope.Snapshot(3)  # type: ignore[arg-type]
