"""``gpuscope.Run``: a run directory as DataFrames, checked against the run's own files
read with the json module (the shared H200 runs), and against ``gpuscope report``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import gpuscope
import pytest
from _helpers import SHARED_DATA, shared_file

pd = pytest.importorskip("pandas")

H200 = SHARED_DATA / "gpu-h200"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in shared_file(path).read_text().splitlines() if line]


@pytest.mark.parametrize("run", ["lm_clean", "lm_leak_nan", "lm_variable_capped"])
def test_records_are_the_jsonl_lines(run: str) -> None:
    expected = lines(H200 / run / "profiles" / "memory.jsonl")
    records = gpuscope.Run(H200 / run).records()
    assert len(records) == len(expected)
    assert list(records.columns[:3]) == ["iteration", "time", "rank"]
    assert list(records["iteration"]) == [r["iteration"] for r in expected]
    for column, path in [
        ("allocator.reserved_bytes", ("allocator", "reserved_bytes")),
        ("categories_bytes.activations", ("categories_bytes", "activations")),
        ("system.rss_bytes", ("system", "rss_bytes")),
        ("losses.lm", ("losses", "lm")),
    ]:
        want = [r[path[0]].get(path[1]) if r[path[0]] else None for r in expected]
        got = [None if pd.isna(v) else v for v in records[column]]  # NaN: absent
        assert got == pytest.approx(want, nan_ok=True), column
    sections = gpuscope.Run(H200 / run).sections()
    assert len(sections) == sum(len(r.get("sections") or {}) for r in expected)
    gradients = gpuscope.Run(H200 / run).gradients()
    with_gradients = [r for r in expected if r.get("gradients")]
    assert len(gradients) == len(with_gradients)
    if with_gradients:
        assert list(gradients["global_norm"].fillna(-1)) == [
            -1
            if r["gradients"]["global_norm"] is None
            else pytest.approx(r["gradients"]["global_norm"])
            for r in with_gradients
        ]


def test_lm_clean_has_17_records_and_the_diagnosis() -> None:
    run = gpuscope.Run(H200 / "lm_clean")
    assert len(run.records()) == 17
    samples = lines(H200 / "lm_clean" / "gpu.jsonl")
    assert len(run.gpu_samples()) == sum(len(s["gpus"]) for s in samples)
    findings = run.findings()
    cli = subprocess.run(
        [sys.executable, "-m", "gpuscope", "report", str(H200 / "lm_clean"), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    expected = json.loads(cli.stdout)["diagnoses"][0]["findings"]
    assert list(findings["kind"]) == [f["kind"] for f in expected]
    assert list(findings["summary"]) == [f["summary"] for f in expected]
    assert findings["kind"].iloc[0] == "oom"
    assert run.nonfinite().empty


def test_nonfinite_events() -> None:
    expected = lines(H200 / "lm_leak_nan" / "profiles" / "nonfinite.jsonl")
    events = gpuscope.Run(H200 / "lm_leak_nan").nonfinite()
    assert len(events) == len(expected)
    assert events["iteration"].iloc[0] == 70
    assert list(events["iteration"]) == [e["iteration"] for e in expected]


def test_a_directory_with_nothing_readable_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(gpuscope.BadInputError):
        gpuscope.Run(tmp_path)
