"""Rank summaries (``gpuscope.rank_summary``) and their merge: each rank's trace in a few
kilobytes, and the cross-rank view of any number of them, equal to what ``gpuscope trace
DIR`` reports from the full traces. Ranks are copies of a real shared trace (ResNet-50 on
a V100, whose rank comes from the file name), one of them with its kernels stretched."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import gpuscope
import pytest
from _helpers import SHARED_DATA, gpuscope_cli, rank_job, shared_file

TRACES = SHARED_DATA / "traces"
SOURCE = "resnet50_v100_memory_workers4.json.gz"
RANKS = 8
SLOW = 5
STRETCH = 1.3


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of RANKS rank files: links to one trace, rank SLOW stretched."""
    source = shared_file(TRACES / SOURCE)
    return rank_job(tmp_path_factory.mktemp("job"), source, RANKS, SLOW, STRETCH)


def test_every_shared_trace_summarises_under_16_kib() -> None:
    for path in sorted(shared_file(TRACES).glob("*.json.gz")):
        summary = gpuscope.rank_summary(path)
        assert summary["schema"] == "gpuscope.rank_summary/1"
        assert len(json.dumps(summary)) <= 16 * 1024, path.name
        assert len(summary["steps"]) <= 48
        assert all(len(k["name"]) <= 120 for k in summary["top_kernels"])


def test_merged_summaries_find_the_stretched_rank_as_the_full_traces_do(job: Path) -> None:
    summaries = [gpuscope.rank_summary(p) for p in sorted(job.glob("*.json.gz"))]
    assert sorted(s["rank"] for s in summaries) == list(range(RANKS))
    assert all(s["rank_from"] == "file_name" for s in summaries)
    # Summaries travel as JSON between machines.
    merged = gpuscope.merge_rank_summaries(json.loads(json.dumps(summaries)))
    assert merged["schema"] == "gpuscope.ranks/1"
    stragglers = merged["comparison"]["stragglers"]
    assert [s["rank"] for s in stragglers] == [SLOW]
    full = subprocess.run(
        [sys.executable, "-m", "gpuscope", "trace", str(job), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert merged["comparison"] == json.loads(full.stdout)["rank_comparison"]
    assert [s["ranks"] for s in merged["steps"]] == [RANKS] * len(merged["steps"])
    assert merged["missing_steps"] == []


def test_a_rank_missing_steps_is_named(job: Path, tmp_path: Path) -> None:
    summaries = [gpuscope.rank_summary(p) for p in sorted(job.glob("*.json.gz"))]
    short: dict[str, Any] = dict(summaries[2])
    short["steps"] = short["steps"][:-2]
    short["steps_total"] = len(short["steps"])
    merged = gpuscope.merge_rank_summaries([*summaries[:2], short, *summaries[3:]])
    assert merged["missing_steps"] == [{"rank": 2, "missing": 2}]


def test_what_is_not_a_summary_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(gpuscope.BadInputError, match="summary 0"):
        gpuscope.merge_rank_summaries([{"rank": 0}])
    with pytest.raises(gpuscope.BadInputError, match="one rank's trace file"):
        gpuscope.rank_summary(tmp_path)


def test_the_command_line_writes_summaries_and_reads_them_back(job: Path, tmp_path: Path) -> None:
    """``gpuscope trace DIR --summaries-out OUT`` writes ``<rank>.summary.json`` per rank;
    ``gpuscope trace OUT`` (recognised by the files' schema) compares the ranks as the
    traces do."""

    def gpuscope_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gpuscope", "trace", *args],
            capture_output=True,
            text=True,
            check=True,
        )

    out = tmp_path / "summaries"
    gpuscope_cli(str(job), "--summaries-out", str(out))
    files = sorted(out.iterdir())
    assert [f.name for f in files] == sorted(f"{r}.summary.json" for r in range(RANKS))
    assert all(f.stat().st_size <= 16 * 1024 for f in files)
    merged = json.loads(gpuscope_cli(str(out), "--format", "json").stdout)
    assert merged["schema"] == "gpuscope.ranks/1"
    full = json.loads(gpuscope_cli(str(job), "--format", "json").stdout)
    assert merged["comparison"] == full["rank_comparison"]
    text = gpuscope_cli(str(out)).stdout
    assert f"{RANKS} ranks, from their summaries" in text


def test_collectives_by_kind_and_size_come_from_the_kernels_metadata(tmp_path: Path) -> None:
    """rank0_nccl_data's NCCL kernels carry torch.distributed's metadata (collective name,
    dtype, elements, group size): the summary groups them by it. Every communication
    kernel there has it, so the groups' time adds up to the communication kernels' time
    by name; sizes are elements times the dtype's bytes. With a sequence number on each
    kernel (``Seq``, as newer Kineto writes it; added here in order), each group spans its
    kernels' numbers."""
    source = shared_file(TRACES / "rank0_nccl_data.json.gz")
    doc = json.loads(gzip.decompress(source.read_bytes()))
    kernels = [
        e
        for e in doc["traceEvents"]
        if e.get("cat") == "kernel" and "Collective name" in e.get("args", {})
    ]
    expected = {
        (a["Collective name"], a["dtype"], a["In msg nelems"], a["Group size"])
        for a in (k["args"] for k in kernels)
    }
    summary = gpuscope.rank_summary(source)
    sizes = summary["collective_sizes"]
    got = {(c["kind"], c["dtype"], c["elements"], c["group_size"]) for c in sizes}
    assert got == expected
    element = {"Float": 4, "Long": 8}
    assert all(c["bytes"] == c["elements"] * element[c["dtype"]] for c in sizes)
    by_name = sum(k["total_us"] for k in summary["collectives"])
    assert sum(c["total_us"] for c in sizes) == pytest.approx(by_name)
    assert all(c["first_seq"] is None for c in sizes)

    for seq, kernel in enumerate(sorted(kernels, key=lambda k: k["ts"])):
        kernel["args"]["Seq"] = 100 + seq
    edited = tmp_path / "rank0.json.gz"
    edited.write_bytes(gzip.compress(json.dumps(doc).encode()))
    seqs: dict[tuple[str, str, int], list[int]] = {}
    for a in (k["args"] for k in sorted(kernels, key=lambda k: k["ts"])):
        seqs.setdefault((a["Collective name"], a["dtype"], a["In msg nelems"]), []).append(a["Seq"])
    for c in gpuscope.rank_summary(edited)["collective_sizes"]:
        # The window leaves out the last profiler step: a group keeps its earliest calls.
        numbers = seqs[(c["kind"], c["dtype"], c["elements"])]
        assert (c["first_seq"], c["last_seq"]) == (numbers[0], numbers[c["count"] - 1])


def test_a_summary_says_what_cuda_graph_replays_ran() -> None:
    """rank0_nccl_negative_queue replays CUDA graphs (``cudaGraphLaunch``): the summary
    carries the work its launch statistics leave out, as the rank's report does; a trace
    without graphs says none."""
    source = shared_file(TRACES / "rank0_nccl_negative_queue.json.gz")
    doc = json.loads(gzip.decompress(source.read_bytes()))
    graph_launches = sum(1 for e in doc["traceEvents"] if e.get("name") == "cudaGraphLaunch")
    replays = gpuscope.rank_summary(source)["graph_replays"]
    assert 0 < replays["launches"] <= graph_launches
    assert replays["work"] >= replays["launches"] and replays["gpu_us"] > 0
    report = gpuscope_cli("trace", source, "--format", "json")
    assert json.loads(report.stdout)["ranks"][0]["graph_replays"] == replays
    plain = gpuscope.rank_summary(shared_file(TRACES / "v100_rank0_ns_resolution.json.gz"))
    assert plain["graph_replays"] is None


@pytest.mark.parametrize(("stretch", "named"), [(2.0, True), (1.3, False)])
def test_of_two_ranks_the_slower_is_named_past_the_rule(
    tmp_path: Path, stretch: float, named: bool
) -> None:
    """The median of two ranks is their mean, so the slower is named when it computes
    10.53 % (21/19) or more longer than the other. Kernels stretched 2x make rank 1
    compute about 13 % longer (stretched kernels overlap more): named; 1.3x, about 5 %:
    not."""
    job = rank_job(tmp_path / "job", shared_file(TRACES / SOURCE), 2, 1, stretch)
    summaries = [gpuscope.rank_summary(p) for p in job.iterdir()]
    comparison = gpuscope.merge_rank_summaries(summaries)["comparison"]
    ranks = {r["rank"]: r["compute_us"] for r in comparison["ranks"]}
    assert (ranks[1] >= 21 / 19 * ranks[0]) is named
    assert [s["rank"] for s in comparison["stragglers"]] == ([1] if named else [])


def test_the_real_pair_names_the_rank_that_computes_longer_and_waits_less() -> None:
    """Ranks 0 and 1 of a 128-rank job: rank 1 computes longer and spends less time in
    communication (it keeps the other waiting), so it is the straggler."""
    summaries = [
        gpuscope.rank_summary(shared_file(TRACES / f"sampled_rank{r}.json.gz")) for r in (0, 1)
    ]
    comparison = gpuscope.merge_rank_summaries(summaries)["comparison"]
    ranks = {r["rank"]: r for r in comparison["ranks"]}
    assert ranks[1]["compute_us"] > ranks[0]["compute_us"] * 21 / 19
    assert ranks[1]["communication_us"] < ranks[0]["communication_us"]
    assert [s["rank"] for s in comparison["stragglers"]] == [1]
