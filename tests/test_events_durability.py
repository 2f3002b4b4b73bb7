"""What survives a writer that is killed, flushed or dropped: records reach the file within
the flush interval, a file cut inside its last record still reads (the cut is reported,
not fatal), and flush()/drop/exit leave nothing behind."""

from __future__ import annotations

import gc
import inspect
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import gpuscope
import pytest
from _helpers import CliRunner, accumulator, event_files, only_event_file, record_spans, run

FLUSH_SECS = 0.2
# A record the child had handed to add_scalar this long before SIGKILL must be on disk.
MARGIN_SECS = 0.5

CHILD = f"""if True:
    import sys, time, gpuscope
    w = gpuscope.EventWriter(sys.argv[1], flush_secs={FLUSH_SECS!r})
    step = 0
    while True:
        w.add_scalar("loss", step * 0.5, step)
        if step % 10 == 0:
            print(step, time.monotonic(), flush=True)  # step and everything before: written
        step += 1
        time.sleep(0.001)
"""


def _kill_writer_midway(log_dir: Path) -> tuple[list[tuple[int, float]], float, str]:
    """Runs CHILD until ~1.2 s after its first report, SIGKILLs it; returns its reports
    (step, monotonic time), the monotonic time of the kill, and its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(log_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reports: list[tuple[int, float]] = []

    def read_reports() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            step, at = line.split()
            reports.append((int(step), float(at)))

    reader = threading.Thread(target=read_reports, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while not reports and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        assert reports, f"the writer never reported progress (exit status {proc.poll()})"
        first_at = reports[0][1]
        while time.monotonic() < first_at + 1.2 and proc.poll() is None:
            time.sleep(0.01)
        assert proc.poll() is None, "the writer ended on its own"
        killed_at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    assert proc.stderr is not None
    return reports, killed_at, proc.stderr.read()


def test_sigkilled_writer_loses_at_most_the_last_flush_interval(tmp_path: Path) -> None:
    reports, killed_at, stderr = _kill_writer_midway(tmp_path)
    assert stderr == "", stderr
    written_before = [step for step, at in reports if at <= killed_at - MARGIN_SECS]
    assert written_before, reports
    must_have = max(written_before)
    assert must_have >= 100, "the writer made too little progress to test anything"

    data = gpuscope.read_events(tmp_path)
    (info,) = data["files"]
    assert info["damaged"] is None
    spans, tail = record_spans(Path(info["path"]))
    assert info["records"] == len(spans)
    assert info["truncated_at_byte"] == tail  # None, or where the cut record starts

    steps = data["tags"]["loss"]["steps"]
    assert steps == list(range(len(steps))), "records are missing in the middle"
    assert len(steps) > must_have, f"step {must_have} was written >= 0.5 s before the kill"
    assert data["tags"]["loss"]["values"] == [s * 0.5 for s in steps]

    events = accumulator(tmp_path).Scalars("loss")
    assert [e.step for e in events] == steps
    assert [e.value for e in events] == [s * 0.5 for s in steps]


@pytest.fixture
def complete_file(tmp_path: Path) -> Path:
    """A gpuscope-written file of 20 scalars, closed cleanly."""
    with gpuscope.EventWriter(tmp_path / "run") as w:
        for step in range(20):
            w.add_scalar("x", step + 0.5, step, walltime=1_700_000_000.0 + step)
    return only_event_file(tmp_path / "run")


@pytest.mark.parametrize("kept", [1, 8, 12, 13, -4, -1], ids=lambda k: f"kept{k}")
def test_truncated_last_record(complete_file: Path, kept: int, run_cli: CliRunner) -> None:
    """The last record cut after ``kept`` of its bytes (negative: all but that many)."""
    spans, tail = record_spans(complete_file)
    assert tail is None and len(spans) == 21
    start, end = spans[-1]
    cut = start + kept if kept > 0 else end + kept
    data = complete_file.read_bytes()
    complete_file.write_bytes(data[:cut])

    result = gpuscope.read_events(complete_file)
    (info,) = result["files"]
    assert info["truncated_at_byte"] == start
    assert info["records"] == 20 and info["damaged"] is None
    steps = list(range(19))
    assert result["tags"]["x"]["steps"] == steps
    assert result["tags"]["x"]["values"] == [s + 0.5 for s in steps]
    # TensorBoard sees the same records.
    assert [e.step for e in accumulator(complete_file.parent).Scalars("x")] == steps

    text = run_cli("module", "tb", complete_file)
    assert text.returncode == 0, text.stderr
    assert text.stderr == ""
    notes = [line for line in text.stdout.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and f"byte {start}" in notes[0], text.stdout

    as_json = run_cli("module", "tb", complete_file, "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["files"][0]["truncated_at_byte"] == start
    assert [p["step"] for p in doc["tags"]["x"]["points"]] == steps


def test_a_run_whose_files_hold_no_record_yet(complete_file: Path, run_cli: CliRunner) -> None:
    """Every file cut inside its first record (a writer that has not flushed it yet):
    ``read_events`` lists the file with no record, so a run being written can be polled;
    ``gpuscope tb`` says why there is nothing to show, in one line, exit 2."""
    complete_file.write_bytes(complete_file.read_bytes()[:7])
    result = gpuscope.read_events(complete_file.parent)
    (info,) = result["files"]
    assert (info["records"], info["truncated_at_byte"], result["tags"]) == (0, 0, {})
    out = run_cli("module", "tb", complete_file.parent)
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert "holds no records" in line and "not flushed" in line, line


def _expected_tags() -> dict[str, list[int]]:
    return {"x": list(range(50)), "m_a/m": [7], "m_b/m": [7], "t/text_summary": [3]}


def _write_some(w: Any) -> None:
    for step in range(50):
        w.add_scalar("x", step * 2.0, step)
    w.add_scalars("m", {"a": 1.0, "b": 2.0}, 7)
    w.add_text("t", "hello", 3)


def _steps_by_key(log_dir: Path) -> dict[str, list[int]]:
    return {k: v["steps"] for k, v in gpuscope.read_events(log_dir)["tags"].items()}


# A writer whose timer never fires: flush(), a copy of the directory as flush() left it,
# one more scalar, flush() again, then the process ends without close() or drop.
FLUSH_CHILD = (
    "import shutil, sys\nfrom typing import Any\nimport gpuscope\n"
    + inspect.getsource(_write_some)
    + """
w = gpuscope.EventWriter(sys.argv[1], flush_secs=3600)
_write_some(w)
w.flush()
shutil.copytree(sys.argv[1], sys.argv[2])
w.add_scalar("x", -1.0, 50)
w.flush()
import os
os._exit(0)
"""
)


def test_flush_makes_everything_visible(tmp_path: Path) -> None:
    """flush() alone puts every record on disk, without waiting for the timer (an hour
    here): what it left is read back after the process ends without closing its writer.
    The child runs under a timeout, so a flush that waited would fail the test, not hang."""
    log_dir, after_first = tmp_path / "run", tmp_path / "after-first-flush"
    out = run([sys.executable, "-c", FLUSH_CHILD, str(log_dir), str(after_first)], timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    assert _steps_by_key(after_first) == _expected_tags()
    assert [e.step for e in accumulator(after_first).Scalars("x")] == list(range(50))
    assert [e.step for e in accumulator(after_first / "m_b").Scalars("m")] == [7]
    assert _steps_by_key(log_dir)["x"] == list(range(51))
    assert [e.step for e in accumulator(log_dir).Scalars("x")] == list(range(51))


def test_dropped_writer_flushes(tmp_path: Path) -> None:
    w = gpuscope.EventWriter(tmp_path, flush_secs=3600)
    _write_some(w)
    del w
    gc.collect()
    assert _steps_by_key(tmp_path) == _expected_tags()
    assert len(event_files(tmp_path)) == 3


@pytest.mark.parametrize("ending", ["", "sys.exit(3)", "raise SystemExit(0)"])
def test_process_exit_without_close_flushes(tmp_path: Path, ending: str) -> None:
    script = f"""if True:
        import sys, gpuscope
        w = gpuscope.EventWriter(sys.argv[1], flush_secs=3600)
        for step in range(50):
            w.add_scalar("x", step * 2.0, step)
        w.add_scalars("m", {{"a": 1.0, "b": 2.0}}, 7)
        w.add_text("t", "hello", 3)
        {ending}
    """
    result = run([sys.executable, "-c", script, str(tmp_path)])
    assert result.returncode == (3 if "3" in ending else 0), result.stderr
    assert _steps_by_key(tmp_path) == _expected_tags()


def test_file_version_record_on_disk_at_construction(tmp_path: Path) -> None:
    w = gpuscope.EventWriter(tmp_path, flush_secs=3600)
    try:
        path = only_event_file(tmp_path)
        spans, tail = record_spans(path)
        assert len(spans) == 1 and tail is None
        (info,) = gpuscope.read_events(path)["files"]
        assert info["event_kinds"] == {"file_version": 1}
        assert accumulator(tmp_path).FirstEventTimestamp() > 0
    finally:
        w.close()


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    per_thread = 5000
    with gpuscope.EventWriter(tmp_path, flush_secs=0.05) as w:

        def work(k: int) -> None:
            for step in range(per_thread):
                w.add_scalar(f"thread_{k}", step * 0.5, step)
                if step % 1000 == 0:
                    w.add_scalars("shared", {f"t{k}": float(step)}, step)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    tags = gpuscope.read_events(tmp_path)["tags"]
    for k in range(4):
        assert tags[f"thread_{k}"]["steps"] == list(range(per_thread))
        assert tags[f"thread_{k}"]["values"] == [s * 0.5 for s in range(per_thread)]
        assert tags[f"shared_t{k}/shared"]["steps"] == list(range(0, per_thread, 1000))


def test_burst_larger_than_the_queue_loses_nothing(tmp_path: Path) -> None:
    """~12 MB of events at full speed: past the 8 MiB queue the caller waits, never drops."""
    n = 300_000
    with gpuscope.EventWriter(tmp_path, flush_secs=3600) as w:
        add = w.add_scalar
        for step in range(n):
            add("burst/with_a_longish_tag_name", 0.25, step)
    path = only_event_file(tmp_path)
    spans, tail = record_spans(path)
    assert tail is None and len(spans) == n + 1
    assert path.stat().st_size > 8 << 20
    series = gpuscope.read_events(path)["tags"]["burst/with_a_longish_tag_name"]
    assert series["steps"] == list(range(n))
