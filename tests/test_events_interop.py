"""Event files written by gpuscope are what TensorBoard (and tbparse) read, and event files
written by PyTorch's SummaryWriter or found in the wild are what gpuscope reads.

Expected values come from what the tests write (rounded to float32 where TensorBoard
stores float32), from TensorBoard's reader, or from ../shared/data/tfevents/reference.json;
never from gpuscope's own output.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import pickle
import re
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gpuscope
import numpy as np
import pytest
import torch
from _helpers import CliRunner, accumulator, f32, only_event_file, record_spans, run, tbparse_frame
from tensorboard.plugins.custom_scalar import layout_pb2
from torch.utils.tensorboard import SummaryWriter

VIAS = ["module", "script"]
WALL = 1_700_000_000.0  # an explicit walltime base, so wall times can be compared exactly


# --------------------------------------------------------------------------------------
# gpuscope.EventWriter writes; TensorBoard's EventAccumulator and tbparse read.
# --------------------------------------------------------------------------------------


def _scalar_inputs() -> list[tuple[Any, float]]:
    """(value passed to add_scalar, the float32 TensorBoard must read back)."""
    leaf = torch.tensor(0.6, requires_grad=True)
    non_leaf = torch.tensor(0.75, requires_grad=True) * 3
    return [
        (0.1, f32(0.1)),
        (7, 7.0),
        (np.float32(0.3), float(np.float32(0.3))),
        (np.int64(-42), -42.0),
        (np.float64(1e-3), f32(1e-3)),
        (torch.tensor(2.5), 2.5),
        (torch.tensor(1.0 / 3.0, dtype=torch.float32), float(torch.tensor(1.0 / 3.0))),
        (leaf, float(leaf.detach())),
        (non_leaf, float(non_leaf.detach())),
    ]


SCALAR_TAG = "scalars/mixed"
SCALARS_MAIN_TAG = "losses/all"
SCALARS_DICTS: list[dict[str, Any]] = [
    {"train": 1.5 - 0.25 * s, "val": np.float32(2.25 + s)} for s in range(3)
]
TEXTS = [(3, "hello **world**"), (4, "first line\nsecond line"), (9, "ünïcødé ✓")]
HIST_TORCH = torch.randn(1000, generator=torch.Generator().manual_seed(1234))
HIST_NUMPY = np.arange(20, dtype=np.float64)
LAYOUT: dict[str, dict[str, Any]] = {
    "Losses": {
        "train vs val": ["Multiline", [r"losses/all", r"scalars/.*"]],
        "mixed": ["Multiline", [r"scalars/mixed"]],
    },
    "Other": {"texts": ["Multiline", [r"notes.*"]]},
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A log directory written with every EventWriter method, and what was written."""
    log_dir = tmp_path_factory.mktemp("gpuscope_written")
    inputs = _scalar_inputs()
    before = time.time()
    with gpuscope.EventWriter(log_dir, flush_secs=0.5) as w:
        with warnings.catch_warnings():
            # torch warns when __float__ is called on a tensor requiring grad; whether
            # gpuscope should trigger that is test_tensor_requiring_grad_without_warning's.
            warnings.simplefilter("ignore", UserWarning)
            for step, (value, _) in enumerate(inputs):
                # Every other value with an explicit walltime, the rest with "now".
                walltime = WALL + step if step % 2 else None
                w.add_scalar(SCALAR_TAG, value, step, walltime)
        for step, values in enumerate(SCALARS_DICTS):
            w.add_scalars(SCALARS_MAIN_TAG, values, step, WALL + 100 + step)
        for step, text in TEXTS:
            w.add_text("notes", text, step)
        w.add_histogram("weights/torch", HIST_TORCH, 1, bins=64)
        w.add_histogram("weights/numpy", HIST_NUMPY, 2, bins=5)
        w.add_custom_scalars(LAYOUT)
    after = time.time()
    return {"dir": log_dir, "scalars": inputs, "before": before, "after": after}


def test_scalars_of_every_input_type(written: dict[str, Any]) -> None:
    expected = [v for _, v in written["scalars"]]
    acc = accumulator(written["dir"])
    assert acc.Tags()["scalars"] == [SCALAR_TAG]
    events = acc.Scalars(SCALAR_TAG)
    assert [e.step for e in events] == list(range(len(expected)))
    assert [e.value for e in events] == expected
    for e in events:
        if e.step % 2:
            assert e.wall_time == WALL + e.step
        else:
            assert written["before"] <= e.wall_time <= written["after"]

    frame = tbparse_frame(written["dir"], "scalars")
    rows = frame[(frame["dir_name"] == "") & (frame["tag"] == SCALAR_TAG)]
    assert list(rows["step"]) == [e.step for e in events]
    assert list(rows["value"]) == [e.value for e in events]
    assert list(rows["wall_time"]) == [e.wall_time for e in events]


def test_add_scalars_writes_summarywriter_sub_runs(written: dict[str, Any]) -> None:
    log_dir: Path = written["dir"]
    runs = {p.name for p in log_dir.iterdir() if p.is_dir()}
    assert runs == {"losses_all_train", "losses_all_val"}
    assert SCALARS_MAIN_TAG not in accumulator(log_dir).Tags()["scalars"]

    frame = tbparse_frame(log_dir, "scalars")
    for key in ("train", "val"):
        acc = accumulator(log_dir / f"losses_all_{key}")
        assert acc.Tags()["scalars"] == [SCALARS_MAIN_TAG]
        events = acc.Scalars(SCALARS_MAIN_TAG)
        assert [e.step for e in events] == [0, 1, 2]
        assert [e.value for e in events] == [f32(d[key]) for d in SCALARS_DICTS]
        assert [e.wall_time for e in events] == [WALL + 100 + s for s in range(3)]
        rows = frame[frame["dir_name"] == f"losses_all_{key}"]
        assert set(rows["tag"]) == {SCALARS_MAIN_TAG}
        assert list(rows["step"]) == [0, 1, 2]
        assert list(rows["value"]) == [e.value for e in events]


def test_text_is_summarywriter_text(written: dict[str, Any]) -> None:
    acc = accumulator(written["dir"])
    tag = "notes/text_summary"
    assert tag in acc.Tags()["tensors"]
    assert acc.SummaryMetadata(tag).plugin_data.plugin_name == "text"
    events = acc.Tensors(tag)
    assert [e.step for e in events] == [s for s, _ in TEXTS]
    texts = [b"\n".join(e.tensor_proto.string_val).decode() for e in events]
    assert texts == [t for _, t in TEXTS]

    frame = tbparse_frame(written["dir"], "text")
    # tbparse strips SummaryWriter's /text_summary suffix (it does so for SummaryWriter too).
    assert set(frame["tag"]) == {"notes"}
    assert list(frame["step"]) == [s for s, _ in TEXTS]
    assert list(frame["value"]) == texts


def _check_histogram(hist: Any, values: np.ndarray, bins: int) -> None:
    """TensorBoard's histogram semantics, computed from the values themselves: bucket i
    counts the values in (limit[i-1], limit[i]]."""
    values = values.astype(np.float64)
    assert hist.num == len(values)
    assert hist.min == values.min()
    assert hist.max == values.max()
    assert hist.sum == pytest.approx(values.sum(), rel=1e-12, abs=1e-9)
    assert hist.sum_squares == pytest.approx((values**2).sum(), rel=1e-12)
    limits = np.asarray(hist.bucket_limit)
    assert len(limits) == len(hist.bucket) == bins
    assert np.all(np.diff(limits) > 0)
    assert limits[-1] == pytest.approx(values.max(), rel=1e-12)
    index = np.minimum(np.searchsorted(limits, values, side="left"), bins - 1)
    assert list(hist.bucket) == list(np.bincount(index, minlength=bins).astype(float))


def test_default_histogram_buckets_are_tensorflows(tmp_path: Path) -> None:
    """The default, like SummaryWriter's, uses TensorFlow's exponential bucket edges."""
    values = np.random.default_rng(3).normal(size=2000)
    with gpuscope.EventWriter(tmp_path) as w:
        w.add_histogram("h", values, 0)
    (event,) = accumulator(tmp_path).Histograms("h")
    hist = event.histogram_value
    with SummaryWriter(str(tmp_path / "sw")) as sw:
        edges = set(sw.default_bins)  # the edges SummaryWriter uses for bins="tensorflow"
    assert all(limit in edges for limit in hist.bucket_limit[:-1])
    assert hist.num == len(values) and sum(hist.bucket) == len(values)
    limits = np.asarray(hist.bucket_limit)
    index = np.minimum(np.searchsorted(limits, values, side="left"), len(limits) - 1)
    assert list(hist.bucket) == list(np.bincount(index, minlength=len(limits)).astype(float))
    assert hist.bucket[0] > 0 and hist.bucket[-1] > 0


HUGE_BINS = """if True:
    import json, sys
    import gpuscope, numpy as np
    cap = int(sys.argv[2])
    values = np.linspace(-1.0, 1.0, 50_000)
    messages = []
    with gpuscope.EventWriter(sys.argv[1]) as w:
        for bins in (cap + 1, 10**8, 10**30):
            try:
                w.add_histogram("h", values, 1, bins=bins)
                messages.append(None)
            except ValueError as e:
                messages.append(str(e))
    print(json.dumps(messages))
"""


def test_histogram_bins_are_capped_with_a_clear_error(tmp_path: Path) -> None:
    """bins=10**8 used to build 10**8 buckets (gigabytes) before writing: more than
    MAX_HISTOGRAM_BINS equal-width buckets is a ValueError naming the value and the cap."""
    cap = gpuscope.events.MAX_HISTOGRAM_BINS
    assert cap == 10_000
    values = np.linspace(-1.0, 1.0, 50_000)
    # In a child under a timeout, so that building the buckets before refusing them fails
    # the test instead of hanging it.
    refused = run([sys.executable, "-c", HUGE_BINS, str(tmp_path / "huge"), str(cap)], timeout=60)
    assert refused.returncode == 0, refused.stderr[-3000:]
    messages = json.loads(refused.stdout)
    for bins, message in zip((cap + 1, 10**8, 10**30), messages, strict=True):
        assert message is not None and re.search(
            rf"bins={bins}: at most {cap} equal-width", message
        ), (bins, message)
    with gpuscope.EventWriter(tmp_path) as w:
        for bins in (0, -3, "auto", 2.5):
            with pytest.raises(ValueError, match=r"bins=.*'tensorflow' or a positive number"):
                w.add_histogram("h", values, 1, bins=bins)
        w.add_histogram("h", values, 2, bins=cap)  # the cap itself is fine
    (event,) = accumulator(tmp_path).Histograms("h")
    assert event.step == 2
    _check_histogram(event.histogram_value, values, cap)


def test_histogram_max_bins_merges_adjacent_buckets(tmp_path: Path) -> None:
    """SummaryWriter's max_bins: adjacent buckets merged, here to at most that many."""
    values = np.random.default_rng(5).normal(size=3000)
    with gpuscope.EventWriter(tmp_path) as w:
        w.add_histogram("equal", values, 0, bins=100, max_bins=10)
        w.add_histogram("uneven", values, 0, bins=100, max_bins=30)
        w.add_histogram("tf", values, 0, max_bins=20)
        with pytest.raises(ValueError, match="max_bins=0: expected a positive number"):
            w.add_histogram("bad", values, 0, max_bins=0)
    acc = accumulator(tmp_path)
    assert "bad" not in acc.Tags()["histograms"]
    (equal,) = acc.Histograms("equal")
    _check_histogram(equal.histogram_value, values, 10)
    # Ten equal-width buckets of the range: each merged bucket spans ten of the hundred.
    width = (values.max() - values.min()) / 10
    edges = values.min() + width * np.arange(1, 11)
    assert np.allclose(equal.histogram_value.bucket_limit, edges, rtol=0, atol=1e-12)
    (uneven,) = acc.Histograms("uneven")
    _check_histogram(uneven.histogram_value, values, 25)  # groups of 4: 100 / 4
    (tf,) = acc.Histograms("tf")
    hist = tf.histogram_value
    assert 0 < len(hist.bucket) <= 20 and sum(hist.bucket) == len(values)
    limits = np.asarray(hist.bucket_limit)
    index = np.minimum(np.searchsorted(limits, values, side="left"), len(limits) - 1)
    assert list(hist.bucket) == list(np.bincount(index, minlength=len(limits)).astype(float))


def test_histograms_from_tensor_and_array(written: dict[str, Any]) -> None:
    acc = accumulator(written["dir"])
    assert set(acc.Tags()["histograms"]) == {"weights/torch", "weights/numpy"}
    (torch_event,) = acc.Histograms("weights/torch")
    (numpy_event,) = acc.Histograms("weights/numpy")
    assert (torch_event.step, numpy_event.step) == (1, 2)
    _check_histogram(torch_event.histogram_value, HIST_TORCH.double().numpy(), 64)
    _check_histogram(numpy_event.histogram_value, HIST_NUMPY, 5)
    # Integer data on exact boundaries: (-inf,3.8] holds 0..3, (3.8,7.6] holds 4..7, ...
    assert list(numpy_event.histogram_value.bucket) == [4.0, 4.0, 4.0, 4.0, 4.0]

    frame = tbparse_frame(written["dir"], "histograms").set_index("tag")
    for tag, event in (("weights/torch", torch_event), ("weights/numpy", numpy_event)):
        row = frame.loc[tag]
        assert row["step"] == event.step
        assert list(row["counts"]) == list(event.histogram_value.bucket)
        assert list(row["limits"]) == list(event.histogram_value.bucket_limit)


def _layout_of(run_dir: Path) -> Any:
    acc = accumulator(run_dir)
    tag = "custom_scalars__config__"
    assert tag in acc.Tags()["tensors"]
    assert acc.SummaryMetadata(tag).plugin_data.plugin_name == "custom_scalars"
    (event,) = acc.Tensors(tag)
    return layout_pb2.Layout.FromString(event.tensor_proto.string_val[0])


def test_custom_scalars_layout(written: dict[str, Any], tmp_path: Path) -> None:
    layout = _layout_of(written["dir"])
    got = {
        category.title: {
            chart.title: ("Multiline", list(chart.multiline.tag)) for chart in category.chart
        }
        for category in layout.category
    }
    assert got == {g: {c: (k, p) for c, (k, p) in charts.items()} for g, charts in LAYOUT.items()}
    assert [c.title for c in layout.category] == list(LAYOUT)

    # The very layout SummaryWriter writes for the same dict.
    with SummaryWriter(str(tmp_path)) as sw:
        sw.add_custom_scalars(LAYOUT)
    assert layout == _layout_of(tmp_path)


def test_margin_charts_match_summarywriter(tmp_path: Path) -> None:
    margin: dict[str, dict[str, Any]] = {"G": {"m": ["Margin", ["x", "lo", "hi"]]}}
    with gpuscope.EventWriter(tmp_path / "ours") as w:
        w.add_custom_scalars(margin)
    with SummaryWriter(str(tmp_path / "theirs")) as sw:
        sw.add_custom_scalars(margin)
    assert _layout_of(tmp_path / "ours") == _layout_of(tmp_path / "theirs")


def test_custom_scalars_rejects_unknown_chart_kind(tmp_path: Path) -> None:
    with gpuscope.EventWriter(tmp_path) as w, pytest.raises(ValueError, match="Multiline"):
        w.add_custom_scalars({"G": {"m": ["Pie", ["x"]]}})


def test_non_finite_scalars(tmp_path: Path, run_cli: CliRunner) -> None:
    values = [math.nan, math.inf, -math.inf, 0.0, -0.0]
    with gpuscope.EventWriter(tmp_path) as w:
        for step, v in enumerate(values):
            w.add_scalar("odd", v, step)
    got = [e.value for e in accumulator(tmp_path).Scalars("odd")]
    assert math.isnan(got[0]) and got[1:] == values[1:]
    assert math.copysign(1.0, got[4]) == -1.0

    read: list[Any] = gpuscope.read_events(tmp_path)["tags"]["odd"]["values"]
    assert math.isnan(read[0]) and read[1:] == values[1:]
    cli = run_cli("module", "tb", tmp_path, "--format", "json")
    assert cli.returncode == 0, cli.stderr
    points = json.loads(cli.stdout)["tags"]["odd"]["points"]
    assert [p["value"] for p in points] == [None, None, None, 0.0, -0.0]
    as_csv = run_cli("module", "tb", tmp_path, "--format", "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert rows[0]["value"] == "NaN"  # README: non-finite values are NaN in CSV
    got_csv = [float(r["value"]) for r in rows]
    assert math.isnan(got_csv[0]) and got_csv[1:] == values[1:]


def test_tensor_requiring_grad_without_warning(tmp_path: Path) -> None:
    """SummaryWriter takes a loss tensor that requires grad silently (it detaches it);
    a drop-in replacement must not warn, nor fail when warnings are errors (as under
    ``-W error`` or pytest's ``filterwarnings = error``). torch emits that warning once
    per process, so gpuscope's side runs in a fresh interpreter."""
    with SummaryWriter(str(tmp_path / "sw")) as sw, warnings.catch_warnings():
        warnings.simplefilter("error")
        sw.add_scalar("loss", torch.tensor(0.5, requires_grad=True) * 3, 1)
    script = """if True:
        import sys, torch, gpuscope
        with gpuscope.EventWriter(sys.argv[1]) as w:
            w.add_scalar("loss", torch.tensor(0.5, requires_grad=True) * 3, 1)
    """
    result = run([sys.executable, "-W", "error", "-c", script, str(tmp_path / "gs")])
    assert result.returncode == 0 and result.stderr == "", result.stderr
    for side in ("sw", "gs"):
        assert [e.value for e in accumulator(tmp_path / side).Scalars("loss")] == [1.5]


def test_steps_beyond_32_bits_and_negative(tmp_path: Path) -> None:
    steps = [2**40, -5, 0, 2**62]
    with gpuscope.EventWriter(tmp_path) as w:
        for k, step in enumerate(steps):
            w.add_scalar("s", float(k), step)
    assert [e.step for e in accumulator(tmp_path).Scalars("s")] == steps
    assert gpuscope.read_events(tmp_path)["tags"]["s"]["steps"] == steps


def test_default_log_dir_comment_and_suffix_like_summarywriter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket
    from datetime import datetime

    def summarywriter_name(at: datetime) -> str:
        # SummaryWriter's default: runs/<%b%d_%H-%M-%S>_<hostname><comment>
        return str(Path("runs") / f"{at.strftime('%b%d_%H-%M-%S')}_{socket.gethostname()}_exp")

    (tmp_path / "sw").mkdir()
    (tmp_path / "gs").mkdir()
    before = datetime.now()
    monkeypatch.chdir(tmp_path / "sw")
    with SummaryWriter(comment="_exp", filename_suffix=".sfx") as sw:
        sw_dir, sw_file = sw.log_dir, Path(sw.file_writer.event_writer._file_name)
    monkeypatch.chdir(tmp_path / "gs")
    with gpuscope.EventWriter(comment="_exp", filename_suffix=".sfx") as w:
        gs_dir, gs_file = str(w.get_logdir()), Path(w.path)
        w.add_scalar("x", 1.0, 1)
    candidates = {summarywriter_name(before), summarywriter_name(datetime.now())}
    assert sw_dir in candidates and gs_dir in candidates
    assert sw_file.name.endswith(".sfx") and gs_file.name.endswith(".sfx")
    assert gs_file.name.startswith("events.out.tfevents.")
    assert [e.value for e in accumulator(tmp_path / "gs" / gs_dir).Scalars("x")] == [1.0]


@pytest.mark.parametrize("as_path", [False, True], ids=["str", "Path"])
def test_log_dir_path_and_get_logdir_are_str_like_summarywriter(
    tmp_path: Path, as_path: bool
) -> None:
    """SummaryWriter's ``log_dir`` and ``get_logdir()`` are ``str`` (code does
    ``w.get_logdir() + "/sub"``); EventWriter's, and its ``path``, are too."""
    with SummaryWriter(str(tmp_path / "sw")) as sw:
        assert type(sw.log_dir) is str and type(sw.get_logdir()) is str
    log_dir = tmp_path / "gs"
    with gpuscope.EventWriter(log_dir if as_path else str(log_dir)) as w:
        assert type(w.log_dir) is str and type(w.get_logdir()) is str and type(w.path) is str
        assert w.log_dir == w.get_logdir() == str(log_dir)
        assert os.path.dirname(w.path) == w.get_logdir()
        w.add_scalar("x", 1.0, 1)
    assert Path(w.path).is_file()
    assert [e.value for e in accumulator(w.get_logdir() + "/").Scalars("x")] == [1.0]


# --------------------------------------------------------------------------------------
# SummaryWriter's keyword names.
# --------------------------------------------------------------------------------------


def _log_with_keywords(w: Any) -> None:
    """The same calls, by keyword, on a SummaryWriter or an EventWriter."""
    w.add_scalar(tag="kw/scalar", scalar_value=0.5, global_step=3, walltime=WALL + 0.25)
    w.add_scalar(tag="kw/scalar", scalar_value=0.75, global_step=4)
    w.add_scalars(
        main_tag="kw/multi",
        tag_scalar_dict={"a": 1.0, "b": 2.0},
        global_step=5,
        walltime=WALL + 1.5,
    )
    w.add_text(tag="kw/text", text_string="hi there", global_step=6, walltime=WALL + 2.75)
    w.add_histogram(tag="kw/hist", values=np.ones(4), global_step=7, walltime=WALL + 3.0)


def _summary_of(log_dir: Path) -> dict[str, Any]:
    """Tags, steps, values and explicit wall times of a log directory, via TensorBoard."""
    out: dict[str, Any] = {}
    runs = [log_dir, *sorted(p for p in log_dir.iterdir() if p.is_dir())]
    for run_dir in runs:
        acc = accumulator(run_dir)
        run = run_dir.name if run_dir != log_dir else "."
        for tag in acc.Tags()["scalars"]:
            out[f"{run}/{tag}"] = [(e.step, e.value, e.wall_time) for e in acc.Scalars(tag)]
        for tag in acc.Tags()["tensors"]:
            out[f"{run}/{tag}"] = [
                (e.step, e.tensor_proto.string_val, e.wall_time) for e in acc.Tensors(tag)
            ]
        for tag in acc.Tags()["histograms"]:
            out[f"{run}/{tag}"] = [
                (e.step, e.histogram_value.num, e.wall_time) for e in acc.Histograms(tag)
            ]
    return out


def test_summarywriter_keyword_names(tmp_path: Path) -> None:
    before = time.time()
    with SummaryWriter(str(tmp_path / "sw")) as sw:
        _log_with_keywords(sw)
    with gpuscope.EventWriter(log_dir=tmp_path / "gs", flush_secs=1.0) as w:
        _log_with_keywords(w)
    after = time.time()
    expected, got = _summary_of(tmp_path / "sw"), _summary_of(tmp_path / "gs")

    # The one call without walltime is stamped "now"; the others are honoured exactly.
    (_, _, now_sw), (_, _, now_gs) = expected["./kw/scalar"][1], got["./kw/scalar"][1]
    assert before <= now_gs <= after and before <= now_sw <= after
    expected["./kw/scalar"][1] = got["./kw/scalar"][1] = None
    assert got == expected
    assert got["./kw/scalar"][0] == (3, 0.5, WALL + 0.25)
    assert got["kw_multi_a/kw/multi"] == [(5, 1.0, WALL + 1.5)]
    assert got["./kw/text/text_summary"] == [(6, [b"hi there"], WALL + 2.75)]
    assert got["./kw/hist"] == [(7, 4.0, WALL + 3.0)]


# --------------------------------------------------------------------------------------
# torch.utils.tensorboard.SummaryWriter writes; gpuscope.read_events and the CLI read.
# --------------------------------------------------------------------------------------

SW_LOSS = [(s, 1.0 / (s + 1)) for s in range(10)]
SW_LR = [(s * 100, 0.1 * 0.5**s) for s in range(5)]  # written with new_style=True
SW_TEXT = [(0, "run started"), (7, "line one\nline two")]
SW_PAIR = [(s, {"x": s * 0.5, "y": -s * 1.5}) for s in range(4)]


@pytest.fixture(scope="module")
def sw_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log_dir = tmp_path_factory.mktemp("summarywriter")
    with SummaryWriter(str(log_dir)) as sw:
        for step, v in SW_LOSS:
            sw.add_scalar("loss", torch.tensor(v), step, walltime=WALL + step)
        for step, v in SW_LR:
            sw.add_scalar("train/lr", v, step, walltime=WALL + step, new_style=True)
        for step, text in SW_TEXT:
            sw.add_text("notes", text, step, walltime=WALL + 50 + step)
        for step in range(3):
            sw.add_histogram("weights", np.linspace(-1, 1, 50) * (step + 1), step)
        for step, d in SW_PAIR:
            sw.add_scalars("pair", d, step, walltime=WALL + 200 + step)
    return log_dir


def _expected_from_sw() -> dict[str, dict[str, Any]]:
    """What SW_* wrote: key -> run, tag, kind, steps, wall_times, values."""

    def scalars(run: str, tag: str, points: list[tuple[int, float]], wall: float) -> Any:
        return {
            "run": run,
            "tag": tag,
            "kind": "scalar",
            "steps": [s for s, _ in points],
            "wall_times": [wall + s for s, _ in points],
            "values": [f32(v) for _, v in points],
        }

    expected = {
        "loss": scalars(".", "loss", SW_LOSS, WALL),
        "train/lr": scalars(".", "train/lr", SW_LR, WALL),
        "notes/text_summary": {
            "run": ".",
            "tag": "notes/text_summary",
            "kind": "text",
            "steps": [s for s, _ in SW_TEXT],
            "wall_times": [WALL + 50 + s for s, _ in SW_TEXT],
            "values": [t for _, t in SW_TEXT],
        },
        "weights": {"run": ".", "tag": "weights", "kind": "histogram", "steps": [0, 1, 2]},
    }
    for key in ("x", "y"):
        points = [(s, d[key]) for s, d in SW_PAIR]
        expected[f"pair_{key}/pair"] = scalars(f"pair_{key}", "pair", points, WALL + 200)
    return expected


def test_read_events_reads_summarywriter(sw_logdir: Path) -> None:
    data = gpuscope.read_events(sw_logdir)
    expected = _expected_from_sw()
    assert set(data["tags"]) == set(expected)
    for key, want in expected.items():
        got = data["tags"][key]
        assert (got["run"], got["tag"], got["kind"]) == (want["run"], want["tag"], want["kind"])
        assert got["count"] == len(want["steps"])
        assert (got["first_step"], got["last_step"]) == (want["steps"][0], want["steps"][-1])
        if "values" in want:
            assert got["steps"] == want["steps"], key
            assert got["wall_times"] == want["wall_times"], key
            assert got["values"] == want["values"], key
    runs = sorted(f["run"] for f in data["files"])
    assert runs == [".", "pair_x", "pair_y"]
    for f in data["files"]:
        assert f["truncated_at_byte"] is None and f["damaged"] is None
        assert f["event_kinds"]["file_version"] == 1


def test_read_events_gives_histograms_steps_and_summaries(sw_logdir: Path) -> None:
    """A histogram tag has its steps, wall times and, per step, the min / max / num / sum /
    sum_squares that SummaryWriter stored: compared with TensorBoard's reading of the same
    file and with the values SummaryWriter was given."""
    expected = [
        (e.step, e.wall_time, e.histogram_value)
        for e in accumulator(sw_logdir).Histograms("weights")
    ]
    assert [step for step, _, _ in expected] == [0, 1, 2]
    for data in (gpuscope.read_events(sw_logdir), gpuscope.read_events(sw_logdir, ["weights"])):
        got = data["tags"]["weights"]
        assert got["kind"] == "histogram" and got["count"] == 3
        assert got["steps"] == [step for step, _, _ in expected]
        assert got["wall_times"] == pytest.approx([t for _, t, _ in expected], abs=1e-6)
        assert len(got["values"]) == 3
        for step, (summary, (_, _, hist)) in enumerate(zip(got["values"], expected, strict=True)):
            assert summary == {
                "min": hist.min,
                "max": hist.max,
                "num": hist.num,
                "sum": hist.sum,
                "sum_squares": hist.sum_squares,
            }
            values = np.linspace(-1, 1, 50) * (step + 1)  # what the fixture wrote
            assert (summary["min"], summary["max"], summary["num"]) == (-step - 1, step + 1, 50)
            assert summary["sum_squares"] == pytest.approx((values**2).sum())
    json.dumps(gpuscope.read_events(sw_logdir))  # still plain data


def test_read_events_selects_tags(sw_logdir: Path) -> None:
    """``tags=`` returns those tags only, in every run; a tag found nowhere is a KeyError."""
    data = gpuscope.read_events(str(sw_logdir), tags=["loss", "pair"])
    expected = _expected_from_sw()
    assert set(data["tags"]) == {"loss", "pair_x/pair", "pair_y/pair"}
    for key, series in data["tags"].items():
        assert series["steps"] == expected[key]["steps"], key
        assert series["values"] == expected[key]["values"], key
    assert len(data["files"]) == 3
    with pytest.raises(KeyError, match="no/such/tag"):
        gpuscope.read_events(sw_logdir, tags=["loss", "no/such/tag"])


def test_read_events_returns_plain_data(sw_logdir: Path) -> None:
    """Plain dicts, lists, str and numbers, as documented (``EventFileInfo.path: str``):
    the result can go straight to json.dumps."""
    data = gpuscope.read_events(sw_logdir)
    for info in data["files"]:
        assert type(info["path"]) is str, type(info["path"])
    json.dumps(data)


def _check_json_doc(doc: dict[str, Any], expected: dict[str, dict[str, Any]]) -> None:
    assert doc["schema"] == "gpuscope.tb/1"
    assert set(doc["tags"]) == set(expected)
    for key, want in expected.items():
        got = doc["tags"][key]
        assert (got["run"], got["tag"], got["kind"]) == (want["run"], want["tag"], want["kind"])
        assert got["count"] == len(want["steps"])
        assert (got["first_step"], got["last_step"]) == (want["steps"][0], want["steps"][-1])
        if want["kind"] == "scalar":
            assert got["points"] == [
                {"step": s, "wall_time": t, "value": v}
                for s, t, v in zip(want["steps"], want["wall_times"], want["values"])
            ]
        elif want["kind"] == "text":
            assert got["texts"] == [
                {"step": s, "wall_time": t, "text": v}
                for s, t, v in zip(want["steps"], want["wall_times"], want["values"])
            ]


@pytest.mark.parametrize("via", VIAS)
def test_cli_json_reads_summarywriter(
    sw_logdir: Path, run_cli: CliRunner, via: str, tmp_path: Path
) -> None:
    result = run_cli(via, "tb", sw_logdir, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    _check_json_doc(doc, _expected_from_sw())
    assert sorted(f["run"] for f in doc["files"]) == [".", "pair_x", "pair_y"]

    out = tmp_path / "out.json"
    to_file = run_cli(via, "tb", sw_logdir, "--format", "json", "-o", out)
    assert to_file.returncode == 0 and to_file.stdout == ""
    assert json.loads(out.read_text()) == doc


@pytest.mark.parametrize("via", VIAS)
def test_cli_single_tag_json_and_csv(sw_logdir: Path, run_cli: CliRunner, via: str) -> None:
    want = _expected_from_sw()["loss"]
    result = run_cli(via, "tb", sw_logdir, "--tag", "loss", "--format", "json")
    assert result.returncode == 0, result.stderr
    tags = json.loads(result.stdout)["tags"]
    assert list(tags) == ["loss"]
    assert [p["value"] for p in tags["loss"]["points"]] == want["values"]

    result = run_cli(via, "tb", sw_logdir, "--tag", "loss", "--format", "csv")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["run"], r["tag"], r["kind"]) for r in rows] == [(".", "loss", "scalar")] * 10
    assert [int(r["step"]) for r in rows] == want["steps"]
    assert [float(r["wall_time"]) for r in rows] == want["wall_times"]
    assert [float(r["value"]) for r in rows] == want["values"]

    missing = run_cli(via, "tb", sw_logdir, "--tag", "loss", "--tag", "no/such/tag")
    _assert_one_error_line(missing, "no/such/tag")


# --------------------------------------------------------------------------------------
# Real files from other people's training runs, against TensorBoard's reading of them.
# --------------------------------------------------------------------------------------

# reference.json names kinds after the protobuf fields; gpuscope after what they mean.
EVENT_KIND = {"null": "empty"}
TAG_KIND = {"simple_value": "scalar", "tensor": "text", "histo": "histogram"}


def _check_against_reference(files: Any, tags: Any, ref: dict[str, Any], values: str) -> None:
    (info,) = files
    assert info["records"] == ref["records"]
    assert info["event_kinds"] == {EVENT_KIND.get(k, k): n for k, n in ref["event_kinds"].items()}
    assert info["truncated_at_byte"] is None and info["damaged"] is None
    assert set(tags) == set(ref["tags"])
    for tag, want in ref["tags"].items():
        got = tags[tag]
        assert (got["run"], got["tag"]) == (".", tag)
        assert got["kind"] == TAG_KIND[want["kind"]], tag
        assert got["count"] == want["count"], tag
        assert (got["first_step"], got["last_step"]) == (want["first_step"], want["last_step"])
        if "first_value" in want:
            series = [p["value"] for p in got[values]] if values == "points" else got[values]
            assert len(series) == want["count"]
            assert (series[0], series[-1]) == (want["first_value"], want["last_value"]), tag


def test_real_file_read_events(
    real_event_name: str, tfevents_data: Path, reference: dict[str, Any]
) -> None:
    data = gpuscope.read_events(tfevents_data / real_event_name)
    _check_against_reference(data["files"], data["tags"], reference[real_event_name], "values")
    for series in data["tags"].values():
        if series["kind"] in ("scalar", "text"):
            assert len(series["steps"]) == len(series["values"]) == series["count"]


def test_real_file_cli_json(
    real_event_name: str, tfevents_data: Path, reference: dict[str, Any], run_cli: CliRunner
) -> None:
    result = run_cli("module", "tb", tfevents_data / real_event_name, "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpuscope.tb/1"
    _check_against_reference(doc["files"], doc["tags"], reference[real_event_name], "points")


# --------------------------------------------------------------------------------------
# Bad inputs.
# --------------------------------------------------------------------------------------


def _assert_one_error_line(result: Any, *fragments: str, code: int = 2) -> None:
    """One ``error:`` line naming ``fragments``, nothing on stdout, exit ``code`` (2 for
    input that cannot be used, 1 for output that cannot be written)."""
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert result.stdout == ""


@pytest.fixture
def json_as_event_file(tmp_path: Path) -> Path:
    path = tmp_path / "events.out.tfevents.x"
    path.write_text(json.dumps({"loss": [0.5, 0.25], "note": "not an event file"}))
    return path


def test_non_event_file_read_events(json_as_event_file: Path) -> None:
    with pytest.raises(gpuscope.BadInputError, match="not a TensorBoard event file") as info:
        gpuscope.read_events(json_as_event_file)
    assert isinstance(info.value, gpuscope.GpuscopeError)
    assert str(json_as_event_file) in str(info.value)
    # A directory holding it fails the same way.
    with pytest.raises(gpuscope.BadInputError):
        gpuscope.read_events(json_as_event_file.parent)


def test_errors_survive_pickling(json_as_event_file: Path) -> None:
    """Errors cross process boundaries (multiprocessing, ProcessPoolExecutor, DataLoader
    workers) by pickling; the classes must be importable under the module they claim."""
    with pytest.raises(gpuscope.BadInputError) as info:
        gpuscope.read_events(json_as_event_file)
    error = info.value
    assert type(error).__module__ in ("gpuscope", "gpuscope._native"), type(error).__module__
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is gpuscope.BadInputError and str(copy) == str(error)
    for cls in (gpuscope.GpuscopeError, gpuscope.WriterError):
        assert type(pickle.loads(pickle.dumps(cls("x")))) is cls


@pytest.mark.parametrize("via", VIAS)
def test_non_event_file_cli(json_as_event_file: Path, run_cli: CliRunner, via: str) -> None:
    for fmt in ("text", "json"):
        result = run_cli(via, "tb", json_as_event_file, "--format", fmt)
        _assert_one_error_line(result, str(json_as_event_file), "not a TensorBoard event file")


@pytest.mark.parametrize("via", VIAS)
def test_missing_path(tmp_path: Path, run_cli: CliRunner, via: str) -> None:
    missing = tmp_path / "no" / "such" / "run"
    with pytest.raises(OSError):
        gpuscope.read_events(missing)
    _assert_one_error_line(run_cli(via, "tb", missing), str(missing))


@pytest.mark.parametrize(
    "value",
    ["1.0", None, [1.0], {"v": 1.0}, torch.tensor([1.0, 2.0]), object()],
    ids=["str", "None", "list", "dict", "2-element tensor", "object"],
)
def test_wrong_value_type(tmp_path: Path, value: Any) -> None:
    with gpuscope.EventWriter(tmp_path) as w:
        with pytest.raises(TypeError):
            w.add_scalar("x", value, 1)
        with pytest.raises(TypeError):
            w.add_scalars("m", {"a": 1.0, "b": value}, 1)
        w.add_scalar("x", 2.0, 2)  # the writer is still usable
    assert [(e.step, e.value) for e in accumulator(tmp_path).Scalars("x")] == [(2, 2.0)]


@pytest.mark.parametrize(
    "values",
    [["a"], [1.0, None], "text", object(), torch.tensor([1.0]).to_sparse()],
    ids=["strings", "None", "str", "object", "sparse tensor"],
)
def test_histogram_of_what_is_not_numbers_is_a_type_error(tmp_path: Path, values: Any) -> None:
    with gpuscope.EventWriter(tmp_path) as w:
        with pytest.raises(TypeError, match="histogram values must be numbers"):
            w.add_histogram("h", values, 1)
        w.add_histogram("h", [1.0, 2.0], 2)  # the writer is still usable
    assert [e.step for e in accumulator(tmp_path).Histograms("h")] == [2]


@pytest.mark.parametrize(
    "value", [10**400, -(10**400), 2**1024], ids=["1e400", "-1e400", "2**1024"]
)
def test_int_beyond_a_float_is_an_overflow_error_saying_so(tmp_path: Path, value: int) -> None:
    """SummaryWriter raises OverflowError ('int too large to convert to float'): so does
    EventWriter, with a message naming the argument, the value's size and why (it was a
    TypeError saying the int was not a number)."""
    with pytest.raises(OverflowError):
        float(value)  # what SummaryWriter does with it
    digits = len(str(abs(value)))
    size = r"an integer of about (\d+) digits, too large for a float"
    with gpuscope.EventWriter(tmp_path) as w:
        with pytest.raises(OverflowError, match=rf"^scalar_value is {size}") as info:
            w.add_scalar("x", value, 1)
        message = str(info.value)
        assert "1.8e308" in message
        match = re.search(size, message)
        assert match is not None and abs(int(match[1]) - digits) <= 1, message
        with pytest.raises(OverflowError, match=rf"^each value is {size}"):
            w.add_scalars("m", {"a": 1.0, "b": value}, 1)
        w.add_scalar("x", 10**20, 2)  # large, but a float: written
    assert [(e.step, e.value) for e in accumulator(tmp_path).Scalars("x")] == [(2, f32(1e20))]


METHODS_AFTER_CLOSE: dict[str, Callable[[Any], None]] = {
    "add_scalar": lambda w: w.add_scalar("x", 1.0, 1),
    "add_scalars": lambda w: w.add_scalars("m", {"a": 1.0}, 1),
    "add_text": lambda w: w.add_text("t", "text", 1),
    "add_histogram": lambda w: w.add_histogram("h", np.ones(3), 1),
    "add_custom_scalars": lambda w: w.add_custom_scalars({"G": {"c": ["Multiline", ["x"]]}}),
}


@pytest.mark.parametrize("method", list(METHODS_AFTER_CLOSE))
def test_methods_after_close(tmp_path: Path, method: str) -> None:
    w = gpuscope.EventWriter(tmp_path)
    w.add_scalars("m", {"a": 0.0}, 0)  # a sub-run too, so close() has several files
    w.close()
    with pytest.raises(gpuscope.WriterError):
        METHODS_AFTER_CLOSE[method](w)
    w.close()  # closing twice is fine

    with gpuscope.EventWriter(tmp_path / "ctx") as ctx:
        ctx.add_scalar("x", 0.0, 0)
    with pytest.raises(gpuscope.WriterError):
        METHODS_AFTER_CLOSE[method](ctx)


def test_flush_after_close_does_nothing_as_in_summarywriter(tmp_path: Path) -> None:
    """SummaryWriter.flush() after close() is a no-op; EventWriter's too (it raised
    WriterError), while writes after close() still raise."""
    with SummaryWriter(str(tmp_path / "sw")) as sw:
        sw.add_scalar("x", 1.0, 1)
    sw.flush()  # torch: nothing happens

    w = gpuscope.EventWriter(tmp_path / "ours")
    w.add_scalar("x", 1.0, 1)
    w.close()
    w.flush()
    w.flush()
    with pytest.raises(gpuscope.WriterError):
        w.add_scalar("x", 2.0, 2)
    with gpuscope.EventWriter(tmp_path / "ctx") as ctx:
        ctx.add_scalar("x", 0.0, 0)
    ctx.flush()
    assert [(e.step, e.value) for e in accumulator(tmp_path / "ours").Scalars("x")] == [(1, 1.0)]


@pytest.mark.parametrize("via", VIAS)
def test_directory_without_event_files(tmp_path: Path, run_cli: CliRunner, via: str) -> None:
    (tmp_path / "notes.txt").write_text("no events here")
    with pytest.raises(gpuscope.BadInputError):
        gpuscope.read_events(tmp_path)
    _assert_one_error_line(run_cli(via, "tb", tmp_path), str(tmp_path))


@pytest.mark.parametrize("via", VIAS)
def test_output_file_that_cannot_be_created(
    sw_logdir: Path, tmp_path: Path, run_cli: CliRunner, via: str
) -> None:
    out = tmp_path / "missing_dir" / "out.json"
    result = run_cli(via, "tb", sw_logdir, "--format", "json", "-o", out)
    _assert_one_error_line(result, str(out), "cannot write", code=1)


def test_log_dir_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "taken"
    path.write_text("a file, not a directory")
    with pytest.raises(OSError):
        gpuscope.EventWriter(path)


@pytest.fixture
def flipped(tmp_path: Path) -> dict[str, Any]:
    """A 100-scalar file with one byte flipped in its middle, and where that byte is."""
    with gpuscope.EventWriter(tmp_path) as w:
        for step in range(100):
            w.add_scalar("x", step * 0.25, step)
    path = only_event_file(tmp_path)
    spans, tail = record_spans(path)
    assert tail is None and len(spans) == 101
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0x5A
    path.write_bytes(bytes(data))
    index = next(i for i, (start, end) in enumerate(spans) if start <= middle < end)
    assert index > 1
    # Records before the damaged one: the file_version record and index - 1 scalars.
    return {"path": path, "offset": spans[index][0], "good_records": index}


def test_flipped_byte_read_events(flipped: dict[str, Any]) -> None:
    with pytest.raises(gpuscope.BadInputError) as info:
        gpuscope.read_events(flipped["path"])
    assert f"byte offset {flipped['offset']}" in str(info.value)

    data = gpuscope.read_events(flipped["path"], keep_going=True)
    (info_,) = data["files"]
    assert info_["records"] == flipped["good_records"]
    assert info_["damaged"] is not None
    assert f"byte offset {flipped['offset']}" in info_["damaged"]
    steps = list(range(flipped["good_records"] - 1))
    assert data["tags"]["x"]["steps"] == steps
    assert data["tags"]["x"]["values"] == [s * 0.25 for s in steps]


@pytest.mark.parametrize("via", VIAS)
def test_flipped_byte_cli(flipped: dict[str, Any], run_cli: CliRunner, via: str) -> None:
    offset = f"byte offset {flipped['offset']}"
    _assert_one_error_line(run_cli(via, "tb", flipped["path"]), offset)
    _assert_one_error_line(run_cli(via, "tb", flipped["path"], "--format", "json"), offset)

    result = run_cli(via, "tb", flipped["path"], "--keep-going", "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert offset in doc["files"][0]["damaged"]
    steps = list(range(flipped["good_records"] - 1))
    assert [p["step"] for p in doc["tags"]["x"]["points"]] == steps

    text = run_cli(via, "tb", flipped["path"], "--keep-going")
    assert text.returncode == 0, text.stderr
    assert "warning:" in text.stdout and offset in text.stdout
