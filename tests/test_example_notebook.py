"""The example notebook (examples/trace_analysis_notebook.py, HTA's questions with the
import changed to gpuscope's) runs, and shows the numbers HTA shows: the same file with
HTA's import line runs too, and the frames both save agree (2 µs or 0.5 %)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import REPO_ROOT, SHARED_DATA, shared_file

pd = pytest.importorskip("pandas")
pytest.importorskip("hta.trace_analysis")

NOTEBOOK = REPO_ROOT / "examples" / "trace_analysis_notebook.py"
GPUSCOPE_IMPORT = "from gpuscope import TraceAnalysis"
HTA_IMPORT = "from hta.trace_analysis import TraceAnalysis"


def run(script: Path, traces: Path, out: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(script), str(traces), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    return done.stdout


def test_the_notebook_shows_what_hta_shows(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    for name in ("sampled_rank0.json.gz", "sampled_rank1.json.gz"):
        os.symlink(shared_file(SHARED_DATA / "traces" / name), traces / name)
    source = NOTEBOOK.read_text()
    assert source.count(GPUSCOPE_IMPORT) == 1
    ported_back = tmp_path / "with_hta.py"
    ported_back.write_text(source.replace(GPUSCOPE_IMPORT, HTA_IMPORT))
    printed = run(NOTEBOOK, traces, tmp_path / "gpuscope")
    assert "idle_time_pctg" in printed
    run(ported_back, traces, tmp_path / "hta")
    for name in ("temporal", "kernel_types", "overlap"):
        ours = pd.read_json(tmp_path / "gpuscope" / f"{name}.json", orient="split")
        theirs = pd.read_json(tmp_path / "hta" / f"{name}.json", orient="split")
        assert list(ours.columns) == list(theirs.columns), name
        for column in ours.select_dtypes("number").columns:
            for a, b in zip(ours[column], theirs[column], strict=True):
                assert abs(a - b) <= max(2.0, 0.005 * abs(b), 0.1), (name, column, a, b)
    ours = pd.read_json(tmp_path / "gpuscope" / "launches.json", orient="split")
    theirs = pd.read_json(tmp_path / "hta" / "launches.json", orient="split")
    assert list(ours["correlation"]) == list(theirs["correlation"])
