"""`gpuscope report RUN`'s diagnosis of whole run directories recorded here: a real CPU
training under ``gpuscope run`` with a profiler trace, the same training leaking, and the
H200 run's page in headless Chromium. What each run holds is known from how it was made
(the command line, the files on disk), never from the report under test."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _chromium import PageParser, assert_self_contained, dump_dom
from _helpers import SHARED_DATA, gpuscope_cli, shared_file

ROOT = Path(__file__).resolve().parent.parent
TINY_TRAIN = ROOT / "examples" / "tiny_train.py"
LM_CLEAN = SHARED_DATA / "gpu-h200" / "lm_clean"
HOSTILE_NAME = '<script>alert(1)</script>&"'
SEVERITIES = ["high", "medium", "low", "info"]


def train(run_dir: Path, *flags: str) -> None:
    """tiny_train.py under ``gpuscope run`` with a profiler trace of three iterations."""
    done = gpuscope_cli(
        "run",
        "--logdir",
        run_dir,
        "--",
        sys.executable,
        TINY_TRAIN,
        "--profiling.wait",
        "100",
        "--profiling.active",
        "3",
        *flags,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def diagnoses(*paths: Path) -> list[dict[str, Any]]:
    done = gpuscope_cli("report", *paths, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["diagnoses"]


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("diagnosis") / "clean"
    train(run_dir)
    return run_dir


@pytest.fixture(scope="module")
def leaking_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("diagnosis") / "leak"
    train(run_dir, "--leak")
    return run_dir


def sources_of(d: dict[str, Any]) -> list[str]:
    return [f["source"] for f in d["sources"]["found"]]


def check_contract(d: dict[str, Any]) -> None:
    """Ranked by severity; every source read says something; every field as documented."""
    findings = d["findings"]
    assert findings
    ranks = [SEVERITIES.index(f["severity"]) for f in findings]
    assert ranks == sorted(ranks)
    said = {f["source"] for f in findings}
    for source in sources_of(d):
        assert source in said, f"{source} was read but said nothing"
    for f in findings:
        assert isinstance(f["summary"], str) and f["summary"]
        assert isinstance(f["next"], str)
        assert f["rank"] is None or isinstance(f["rank"], int)
        assert f["stake"]["unit"] in {"bytes", "step_time", "iterations", "none"}
        assert isinstance(f["evidence"], dict)
    for absent in d["sources"]["absent"]:
        assert absent["written_by"]


def test_a_cpu_run_under_gpuscope_run_is_read_whole(clean_run: Path) -> None:
    (d,) = diagnoses(clean_run)
    check_contract(d)
    # gpuscope run wrote gpu.jsonl; the profiler a trace; the MemoryProfiler its records.
    assert sources_of(d) == ["memory", "trace", "gpu"]
    samples = sum(1 for line in (clean_run / "gpu.jsonl").read_text().splitlines() if line)
    assert d["sources"]["gpu_samples"] == samples
    assert {a["source"] for a in d["sources"]["absent"]} == {"snapshot", "nonfinite", "nsys"}
    by_source = {f["source"]: f for f in reversed(d["findings"])}
    # The training ran on the CPU: its trace has no GPU work.
    assert by_source["trace"]["severity"] == "info"
    assert "no GPU work" in by_source["trace"]["summary"]
    # On a GPU host torch may still open a CUDA context (memory on the GPU, no work):
    # the samples say which.
    held = any(
        (json.loads(line).get("tree") or {}).get("gpu_memory_bytes")
        for line in (clean_run / "gpu.jsonl").read_text().splitlines()
        if line
    )
    if held:
        assert by_source["gpu"]["summary"].startswith("GPU ")
    else:
        assert "held memory on no GPU" in by_source["gpu"]["summary"]
    assert not any(f["kind"] == "leak" for f in d["findings"])


def test_a_timed_section_is_joined_with_the_operators_inside_it(clean_run: Path) -> None:
    (d,) = diagnoses(clean_run)
    (section,) = [f for f in d["findings"] if f["source"] == "sections"]
    path = section["evidence"]["section"]["path"]
    # While the profiler records, each section is a record_function range of its name.
    (trace,) = (clean_run / "profiler_traces").glob("*.pt.trace.json.gz")
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    assert any(e.get("cat") == "user_annotation" and e.get("name") == path for e in events)
    operators = section["evidence"]["trace_operators"]
    assert operators, section
    assert any(o["name"].startswith("aten::") for o in operators), operators
    assert all(0 <= o["self_us"] <= o["total_us"] for o in operators)


def test_the_leaking_run_leads_with_its_leak(leaking_run: Path) -> None:
    (d,) = diagnoses(leaking_run)
    check_contract(d)
    first = d["findings"][0]
    assert (first["kind"], first["severity"], first["source"]) == ("leak", "high", "memory")
    assert "activations" in first["summary"]
    assert first["next"]


def test_two_runs_give_two_diagnoses_in_order(clean_run: Path, leaking_run: Path) -> None:
    got = diagnoses(clean_run, leaking_run)
    assert [d["path"] for d in got] == [str(clean_run), str(leaking_run)]


def test_text_puts_the_findings_first_within_80_columns(leaking_run: Path) -> None:
    done = gpuscope_cli("report", leaking_run)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == f"DIAGNOSIS: {leaking_run}"
    assert lines.index("TENSOR PROFILING SUMMARY") > lines.index(f"DIAGNOSIS: {leaking_run}")
    assert any(line.startswith("HIGH [memory, rank 0] memory leak suspected") for line in lines)
    assert max(len(line) for line in lines[: lines.index("TENSOR PROFILING SUMMARY")]) <= 80


# ---------------------------------------------------------------------------- the page


@dataclass
class Finding:
    severity: str = ""
    href: str = ""
    summary: str = ""
    summary_nodes: int = 0


@dataclass
class DiagnosisPage(PageParser):
    """The findings (severity, link, summary text and how many text nodes it has), every
    id, the h2 headings in order, and which section each chart is in."""

    findings: list[Finding] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    headings: list[str] = field(default_factory=list)
    charts_in: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__()
        self._section = ""
        self._summary: Finding | None = None

    def start(self, tag: str, a: dict[str, str], classes: list[str]) -> None:
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "section":
            self._section = a.get("id", "")
        if tag == "li" and "finding" in classes:
            self.findings.append(Finding(severity=classes[1]))
        elif tag == "a" and "summary" in classes:
            self.findings[-1].href = a["href"]
            self._summary = self.findings[-1]
            self.capture(tag)
        elif tag == "h2":
            self.capture(tag)
        elif tag == "svg" and "chart" in classes:
            self.charts_in[self._section] = self.charts_in.get(self._section, 0) + 1

    def handle_data(self, data: str) -> None:
        if self._summary is not None:
            self._summary.summary_nodes += 1
        super().handle_data(data)

    def captured(self, tag: str, text: str) -> None:
        if tag == "a" and self._summary is not None:
            self._summary.summary = text
            self._summary = None
        elif tag == "h2":
            self.headings.append(text)


def page_of(chromium: str, html_file: Path, *paths: Path) -> tuple[str, DiagnosisPage]:
    done = gpuscope_cli("report", *paths, "--format", "html", "-o", html_file)
    assert done.returncode == 0, done.stderr
    source = html_file.read_text()
    return source, DiagnosisPage.parse(dump_dom(chromium, html_file))


@pytest.mark.skipif(not LM_CLEAN.is_dir(), reason="the shared H200 runs are not here")
def test_the_h200_page_links_each_finding_to_its_evidence(chromium: str, tmp_path: Path) -> None:
    (d,) = diagnoses(LM_CLEAN)
    source, page = page_of(chromium, tmp_path / "lm_clean.html", LM_CLEAN)
    assert_self_contained(source, page.elements, page.styles)
    assert page.headings[0] == f"Diagnosis: {LM_CLEAN}"
    assert [f.summary for f in page.findings] == [f["summary"] for f in d["findings"]]
    assert [f.severity for f in page.findings] == [f["severity"] for f in d["findings"]]
    for f in page.findings:
        assert f.summary_nodes == 1, f
        assert f.href.startswith("#") and f.href[1:] in page.ids, f.href
    # The trace's step chart and the snapshot's timeline by call site are on the page,
    # where the trace's and the snapshot's findings point.
    links = {f["source"]: page.findings[i].href[1:] for i, f in enumerate(d["findings"])}
    assert page.charts_in.get(links["trace"], 0) >= 1
    assert page.charts_in.get(links["snapshot"], 0) >= 1


def test_the_h200_peak_is_the_out_of_memory_records_when_it_held_more() -> None:
    """The H200 run's out-of-memory error was caught at iteration 159 with more memory
    allocated than any scheduled record saw: the peak finding gives the record the
    error took (the one its report holds), not the scheduled records' highest."""
    report = next((LM_CLEAN / "snapshots").glob("oom.*.txt")).read_text()
    at_error, _ = json.JSONDecoder().raw_decode(report[report.index("record:") + 7 :].lstrip())
    records = [json.loads(line) for line in (LM_CLEAN / "profiles" / "memory.jsonl").open()]
    scheduled = max(r["allocator"]["peak_allocated_bytes"] for r in records)
    assert at_error["allocator"]["allocated_bytes"] > scheduled
    (d,) = diagnoses(LM_CLEAN)
    peak = next(f for f in d["findings"] if f["kind"] == "peak")
    evidence = peak["evidence"]
    assert evidence["allocated_bytes"] == at_error["allocator"]["allocated_bytes"]
    assert evidence["reserved_bytes"] == at_error["allocator"]["reserved_bytes"]
    assert evidence["iteration"] == at_error["iteration"] == 159
    assert (
        evidence["categories_bytes"]["activations"] == (at_error["categories_bytes"]["activations"])
    )
    assert "when the out-of-memory error was caught (iteration 159)" in peak["summary"]


def test_activations_on_a_gpu_say_what_they_hold(clean_run: Path) -> None:
    """The H200 Lightning run, a 1 MiB model, reads activations as most of its memory
    between iterations (its records say so): the peak finding says that on a GPU they
    are memory no tensor object owns, library workspaces included. The CPU run's, where
    activations are the heap beyond the census, does not."""
    lightning = shared_file(SHARED_DATA / "gpu-h200" / "lightning")
    records = [json.loads(line) for line in (lightning / "profiles" / "memory.jsonl").open()]
    last = records[-1]["categories_bytes"]
    assert max(last, key=lambda c: last[c] or 0) == "activations"
    (d,) = diagnoses(lightning)
    peak = next(f for f in d["findings"] if f["kind"] == "peak")
    assert "library workspaces such as cuBLAS's" in peak["summary"], peak["summary"]
    (cpu,) = diagnoses(clean_run)
    peak = next(f for f in cpu["findings"] if f["kind"] == "peak")
    assert "workspaces" not in peak["summary"], peak["summary"]


def test_a_hostile_run_directory_name_is_text(
    chromium: str, leaking_run: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / HOSTILE_NAME
    shutil.copytree(leaking_run / "profiles", run_dir / "profiles")
    source, page = page_of(chromium, tmp_path / "hostile.html", run_dir)
    assert "script" not in [tag for tag, _ in page.elements]
    assert page.headings[0] == f"Diagnosis: {run_dir}"
    assert page.findings and all(f.summary_nodes == 1 for f in page.findings)
    assert "&lt;script&gt;" in source


def test_a_directory_with_nothing_to_read_is_refused_in_one_line(tmp_path: Path) -> None:
    done = gpuscope_cli("report", tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
