"""``gpuscope.MemoryAnalysis``: torch.profiler's memory timeline export in a notebook.
Against HTA 0.5's ``MemoryAnalysis`` on the shared raw export (every instant, every
category), and on the raw and coalesced exports of a real CPU training loop against the
model's own parameter bytes and torch's coalesced rows."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import gpuscope
import pytest
import torch
from _helpers import SHARED_DATA, shared_file
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX

pd = pytest.importorskip("pandas")

# torch deprecates export_memory_timeline in favour of CUDA allocator snapshots, which a
# CPU run does not have; it is what this class reads.
pytestmark = pytest.mark.filterwarnings("ignore:`export_memory_timeline` is deprecated")

RAW = SHARED_DATA / "traces" / "memory_timeline.raw.gz"
# The categories in the order of the index torch writes into a raw export, by torch's
# own names (None: memory torch could not place).
CATEGORIES = [
    "unknown" if category is None else category.name.lower()
    for category, _ in sorted(_CATEGORY_TO_INDEX.items(), key=lambda item: item[1])
]


def hta_rows(path: Path) -> tuple[list[int], list[list[int]]]:
    """HTA 0.5's rows of a raw export: one per instant (its time, ns; each category's
    bytes after it)."""
    hta_memory = pytest.importorskip("hta.memory_analysis")
    times, sizes = hta_memory.MemoryAnalysis(str(path))._process_raw_events()
    return times, sizes


def test_every_instant_is_hta_s_on_the_shared_export() -> None:
    """HTA keeps one row per instant (after its events, memory from before profiling
    first, at the first instant's time); the frame has one per event, so its last row
    of each instant is HTA's row."""
    path = shared_file(RAW)
    analysis = gpuscope.MemoryAnalysis(path)
    assert analysis.categories == CATEGORIES
    ours = analysis.get_memory_timeline()
    rows = json.loads(gzip.decompress(path.read_bytes()))
    assert len(ours) == len(rows)
    assert list(ours.columns) == ["time (ms)", *CATEGORIES, "total"]
    assert (ours["total"] == ours[CATEGORIES].sum(axis=1)).all()

    times, sizes = hta_rows(path)
    before = sum(1 for r in rows if r[0] < 0)
    assert before > 0 and times[0] == times[1] == min(times)
    # HTA's first row is the memory from before profiling alone.
    assert ours.loc[before - 1, CATEGORIES].tolist() == sizes[0]
    instants = ours.groupby("time (ms)", sort=False).last()
    assert instants[CATEGORIES].to_numpy().tolist() == sizes[1:]
    origin = min(times)
    assert instants.index.tolist() == pytest.approx([(t - origin) / 1e6 for t in times[1:]])


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int, int]:
    """A real CPU training loop's raw and coalesced exports, its parameters' bytes and
    its optimizer state's (the tensors Adam keeps)."""
    work = tmp_path_factory.mktemp("memory")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for _ in range(3):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    raw, coalesced = work / "timeline.raw.json.gz", work / "timeline.json"
    prof.export_memory_timeline(str(raw), device="cpu")
    prof.export_memory_timeline(str(coalesced), device="cpu")
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    state = sum(
        t.numel() * t.element_size()
        for per_parameter in opt.state.values()
        for t in per_parameter.values()
        if isinstance(t, torch.Tensor)
    )
    return raw, coalesced, parameters, state


def test_a_training_loop_s_exports_read_as_torch_wrote_them(
    exports: tuple[Path, Path, int, int],
) -> None:
    raw, coalesced, parameters, state = exports
    ours = gpuscope.MemoryAnalysis(raw).get_memory_timeline()
    # The parameters and Adam's state (two moments and a step count per parameter), as
    # the model and the optimizer hold them at the end.
    assert ours["parameter"].iloc[-1] == parameters
    assert ours["optimizer_state"].iloc[-1] == state
    assert ours["gradient"].max() >= parameters
    times, sizes = json.loads(coalesced.read_text())
    rows = gpuscope.MemoryAnalysis(coalesced).get_memory_timeline()
    assert rows[CATEGORIES].to_numpy().tolist() == [s[1:] for s in sizes]
    assert rows["time (ms)"].tolist() == pytest.approx([(t - times[0]) / 1e3 for t in times])
    # The raw export's highest instant is torch's highest coalesced row.
    assert ours["total"].max() >= rows["total"].max()
    # HTA's rows are the frame's last of each instant, after a first row of the memory
    # from before profiling alone (at the first instant's time), when there is any.
    times, sizes = hta_rows(raw)
    instants = ours.groupby("time (ms)", sort=False).last()
    assert instants[CATEGORIES].to_numpy().tolist() == sizes[-len(instants) :]
    assert len(sizes) - len(instants) in (0, 1)


def test_the_plot_is_saved_as_a_page_of_its_own(
    exports: tuple[Path, Path, int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``save_graph`` writes into ``images/`` of the working directory, as HTA does; with
    plotly it is a page with plotly.js inside it, loading nothing."""
    pytest.importorskip("plotly")
    monkeypatch.chdir(tmp_path)
    gpuscope.MemoryAnalysis(exports[0]).plot_memory_timeline(save_graph=True)
    page = (tmp_path / "images" / "memory_plot.html").read_text()
    assert "Memory timeline (GiB)" in page
    assert '<script src="http' not in page and "optimizer_state" in page


def test_saving_a_plot_with_nothing_to_draw_it_is_an_error(
    exports: tuple[Path, Path, int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without plotly or matplotlib, a plot asked to be saved raises (no file would
    come); one only shown warns, as ``visualize=True`` does."""
    import gpuscope.notebook._pandas as frames

    for module in ("plotly", "plotly.express", "plotly.graph_objects", "matplotlib"):
        monkeypatch.setitem(sys.modules, module, None)  # an import of it fails
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    monkeypatch.setattr(frames, "_said_no_plotting", False)
    monkeypatch.chdir(tmp_path)
    analysis = gpuscope.MemoryAnalysis(exports[0])
    with pytest.raises(ImportError, match="needs plotly or matplotlib"):
        analysis.plot_memory_timeline(save_graph=True)
    assert not (tmp_path / "images").exists()
    with pytest.warns(UserWarning, match="neither plotly nor matplotlib"):
        analysis.plot_memory_timeline()


def test_what_is_not_a_memory_timeline_is_refused(tmp_path: Path) -> None:
    trace = shared_file(SHARED_DATA / "traces" / "triton_example.json.gz")
    with pytest.raises(gpuscope.BadInputError, match="not a memory timeline"):
        gpuscope.MemoryAnalysis(trace)
    with pytest.raises(OSError):
        gpuscope.MemoryAnalysis(tmp_path / "missing.raw.json.gz")
    broken = tmp_path / "broken.raw.json.gz"
    broken.write_bytes(gzip.compress(b"[[1, 2, 3]"))
    with pytest.raises(gpuscope.BadInputError):
        gpuscope.MemoryAnalysis(broken)
