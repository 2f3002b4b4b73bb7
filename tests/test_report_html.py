"""`gpuscope report --format html` rendered by headless Chromium with networking off.

The inputs are real: a CPU training run recorded by ``gpuscope.MemoryProfiler`` whose loss
components change phase and which leaks activations, and the ``tensor_profile_<ts>.log``
text log of a real GPU run (allocator figures, so a fragmentation chart). What each chart must plot is taken from
the run's JSON report (``runs[i].timeline.series[j].name``), never from the HTML; the page
is read back from the DOM that Chromium dumps after rendering, parsed with the standard
library's ``html.parser``, and from Chromium's screenshot, read with Pillow.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _chromium import (
    PageParser,
    assert_not_blank,
    assert_self_contained,
    dump_dom,
    network_off,
    points,
    screenshot,
)
from _helpers import SHARED_DATA, gpuscope_cli
from torch import nn

ITERATIONS = 120
EVERY = 5
# The depth component joins the loss here: the start of the run's second loss phase.
DEPTH_FROM = 60
TEXT_LOG = SHARED_DATA / "logs" / "tensor_profile_20260128_140205.log"
WINDOW = (1200, 2400)
# A run directory's name cannot hold "/", so this path is two directories deep
# ("<script>alert(1)<" / "script>&\""); the run's path, which the heading shows, spells the
# whole string.
HOSTILE_NAME = '<script>alert(1)</script>&"'

# Chart title -> how its expected series follow from the JSON timeline's series names.
CATEGORY_CHART = "Memory by category (stacked)"
# The totals chart's title names the lines it draws, in these words: on a GPU run, with
# allocator figures, it is TOTALS_CHART; a CPU run has no allocated or reserved line.
TOTALS_WORDS = {
    "allocated": "allocated",
    "reserved": "reserved",
    "census": "counted tensors",
    "heap": "C heap",
}
TOTALS_CHART = "Allocated, reserved and counted tensors"
FRAGMENTATION_CHART = "Fragmentation"
COUNT_CHART = "Tensor count"
LOSS_CHART = "Loss components"
# A run with a model and an optimizer measures its gradients without a call (zero-touch).
GRADIENT_CHART = "Gradient norms (global and per module)"
CHART_TITLES = (CATEGORY_CHART, TOTALS_CHART, FRAGMENTATION_CHART, COUNT_CHART, LOSS_CHART)

# Attributes through which a page makes the browser fetch something.
# Elements that have no end tag (in the file as written; Chromium's dump closes the rest).


# ---------------------------------------------------------------------------- inputs


def train_phased_leaking_run(run_dir: Path) -> None:
    """A small model trained on CPU: an "rgb" loss from the start, a "depth" loss joining
    at ``DEPTH_FROM`` (a new loss phase), and every iteration's output kept alive with its
    graph (a leak of activations)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 512), nn.ReLU(), nn.Linear(512, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 32)
    kept: list[torch.Tensor] = []
    with gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=EVERY) as scope:
        for it in range(ITERATIONS):
            out = model(x)
            parts = {"rgb": out.pow(2).mean()}
            if it >= DEPTH_FROM:
                parts["depth"] = (out - 1).abs().mean()
            loss = sum(parts.values(), torch.zeros(()))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            kept.append(model(x))  # an output and its graph, every iteration
            scope.step(it, losses=parts)


def report_json(*paths: Path) -> dict[str, Any]:
    out = gpuscope_cli("report", *map(str, paths), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def report_html(out_file: Path, *paths: Path) -> str:
    out = gpuscope_cli("report", *map(str, paths), "--format", "html", "-o", str(out_file))
    assert out.returncode == 0, out.stderr
    return out_file.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- chromium


# ------------------------------------------------------------------------ page model


@dataclass
class Chart:
    title: str
    series: list[tuple[str, str]] = field(default_factory=list)  # (data-series, d)
    markers: list[float] = field(default_factory=list)  # x of each line.marker
    tick_labels: list[str] = field(default_factory=list)

    def path(self, name: str) -> str:
        (d,) = [d for n, d in self.series if n == name]
        return d


@dataclass
class Section:
    heading: str = ""
    charts: list[Chart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # text of each <p class="meta">

    def chart(self, title: str) -> Chart:
        (c,) = [c for c in self.charts if c.title == title]
        return c


class ReportPage(PageParser):
    """The run sections with their charts, every other h2, every element with its
    attributes, and the text of <style> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[Section] = []
        self.other_headings: list[str] = []
        self._section: Section | None = None
        self._section_depth = 0
        self._chart: Chart | None = None
        self._last_h3 = ""

    def start(self, tag: str, a: dict[str, str], classes: list[str]) -> None:
        if tag == "section" and "run" in classes:
            self._section = Section()
            self.sections.append(self._section)
            self._section_depth = self.depth
        is_note = tag == "p" and "meta" in classes and self._section is not None
        if tag in ("h2", "h3") or (tag == "text" and "tick" in classes) or is_note:
            self.capture(tag)
        elif tag == "svg" and "chart" in classes:
            assert self._section is not None, "a chart outside a run's section"
            self._chart = Chart(self._last_h3)
            self._section.charts.append(self._chart)
        elif tag == "path" and "series" in classes:
            assert self._chart is not None, "a series outside a chart"
            self._chart.series.append((a.get("data-series", ""), a.get("d", "")))
        elif tag == "line" and "marker" in classes:
            assert self._chart is not None, "a marker outside a chart"
            self._chart.markers.append(float(a["x1"]))

    def captured(self, tag: str, text: str) -> None:
        if tag == "h2":
            if self._section is not None and not self._section.heading:
                self._section.heading = text
            else:
                self.other_headings.append(text)
        elif tag == "h3":
            self._last_h3 = text
        elif tag == "p":
            assert self._section is not None
            self._section.notes.append(text)
        elif self._chart is not None:
            self._chart.tick_labels.append(text)

    def end(self, tag: str) -> None:
        if tag == "svg":
            self._chart = None
        if self._section is not None and self.depth < self._section_depth:
            self._section = None


def parse(html: str) -> ReportPage:
    return ReportPage.parse(html)


def totals_title(series: list[str]) -> str:
    """The title of a totals chart that draws `series`: their words, listed."""
    words = [TOTALS_WORDS[n] for n in series]
    listed = ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]
    return listed[0].upper() + listed[1:]


def expected_charts(run: dict[str, Any]) -> dict[str, list[str]]:
    """Chart title -> the series it must plot, from the run's JSON timeline; a chart with
    nothing to plot is left out of the page, and so is a category that holds nothing over
    the whole run (no area in the stack)."""
    series = run["timeline"]["series"]
    names = [s["name"] for s in series]
    holding = [
        s["name"].removeprefix("category/")
        for s in series
        if s["name"].startswith("category/") and any(v for v in s["values"] if v is not None)
    ]
    totals = [n for n in TOTALS_WORDS if n in names]
    charts = {
        CATEGORY_CHART: holding,
        totals_title(totals): totals,
        FRAGMENTATION_CHART: [n for n in ("fragmentation",) if n in names],
        COUNT_CHART: [n for n in ("tensors",) if n in names],
        LOSS_CHART: [n.removeprefix("loss/") for n in names if n.startswith("loss/")],
        GRADIENT_CHART: [n.removeprefix("grad/") for n in names if n.startswith("grad/")],
    }
    return {title: series for title, series in charts.items() if series}


def values_of(run: dict[str, Any], chart: str, name: str) -> list[float | None]:
    """The JSON timeline's values of the series `name` that `chart` draws."""
    prefix = {CATEGORY_CHART: "category/", LOSS_CHART: "loss/", GRADIENT_CHART: "grad/"}.get(
        chart, ""
    )
    (series,) = [s for s in run["timeline"]["series"] if s["name"] == prefix + name]
    values: list[float | None] = series["values"]
    return values


# -------------------------------------------------------------------------- fixtures


@dataclass
class Page:
    inputs: list[Path]
    html_file: Path
    html: str
    doc: dict[str, Any]
    dom: str
    screenshot: Path


@pytest.fixture(scope="module")
def phased_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "phased"
    train_phased_leaking_run(run_dir)
    return run_dir


@pytest.fixture(scope="module")
def text_log() -> Path:
    assert TEXT_LOG.is_file(), f"the shared tensor_profile text log is missing: {TEXT_LOG}"
    return TEXT_LOG


@pytest.fixture(scope="module")
def pages(
    chromium: str, phased_run: Path, text_log: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Page]:
    """Both inputs on one page, then each alone: rendered, dumped and photographed."""
    work = tmp_path_factory.mktemp("pages")
    out: dict[str, Page] = {}
    for name, inputs in (
        ("both", [phased_run, text_log]),
        ("run", [phased_run]),
        ("log", [text_log]),
    ):
        html_file = work / f"{name}.html"
        html = report_html(html_file, *inputs)
        out[name] = Page(
            inputs=inputs,
            html_file=html_file,
            html=html,
            doc=report_json(*inputs),
            dom=dump_dom(chromium, html_file),
            screenshot=screenshot(chromium, html_file, WINDOW),
        )
    return out


PAGE_NAMES = ["both", "run", "log"]


# ----------------------------------------------------------------------------- tests


def test_networking_is_off_for_chromium() -> None:
    """The namespace Chromium runs in reaches nothing (skipped checks: see network_off)."""
    prefix, flags = network_off()
    if not prefix:
        pytest.skip(f"no network namespace here; Chromium runs with {flags}")
    probe = (
        "import socket\n"
        "s = socket.socket()\n"
        "s.settimeout(5)\n"
        "try:\n"
        "    s.connect(('1.1.1.1', 80))\n"
        "except OSError as e:\n"
        "    print('unreachable', e)\n"
        "else:\n"
        "    print('connected')\n"
    )
    out = subprocess.run(
        [*prefix, sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.stdout.startswith("unreachable"), out.stdout + out.stderr


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_each_run_has_its_section(pages: dict[str, Page], name: str) -> None:
    page = pages[name]
    dom = parse(page.dom)
    runs = page.doc["runs"]
    assert [Path(r["path"]).name for r in runs] == [p.name for p in page.inputs]
    assert [s.heading for s in dom.sections] == [f"{r['path']} (rank {r['rank']})" for r in runs]
    if len(runs) > 1:
        assert "Comparison" in dom.other_headings


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_charts_plot_the_series_of_the_json_timeline(pages: dict[str, Page], name: str) -> None:
    page = pages[name]
    dom = parse(page.dom)
    assert len(dom.sections) == len(page.doc["runs"])
    for section, run in zip(dom.sections, page.doc["runs"], strict=True):
        expected = expected_charts(run)
        titles = [c.title for c in section.charts]
        assert sorted(titles) == sorted(expected), section.heading
        assert len(titles) == len(set(titles)), f"a chart twice in {section.heading}: {titles}"
        for chart in section.charts:
            names = [n for n, _ in chart.series]
            want = expected[chart.title]
            assert set(names) == set(want), (section.heading, chart.title)
            assert len(names) == len(want), (section.heading, chart.title, names)
            for series_name, d in chart.series:
                measured = [v for v in values_of(run, chart.title, series_name) if v is not None]
                # one point per measured value (a stacked area also walks back along the
                # series below it, so it has more)
                if chart.title == CATEGORY_CHART:
                    assert len(points(d)) >= len(measured), (chart.title, series_name)
                else:
                    assert len(points(d)) == len(measured), (chart.title, series_name)
                assert not re.search(r"nan|inf", d, re.IGNORECASE), (chart.title, series_name)


def test_both_inputs_get_their_kind_of_charts(pages: dict[str, Page]) -> None:
    """The GPU log has allocator figures (a fragmentation chart) and no losses; the CPU run
    has losses and no allocator."""
    run, log = (parse(pages[n].dom).sections[0] for n in ("run", "log"))
    assert FRAGMENTATION_CHART in [c.title for c in log.charts]
    assert {"allocated", "reserved"} <= {n for n, _ in log.chart(TOTALS_CHART).series}
    assert LOSS_CHART not in [c.title for c in log.charts]
    assert FRAGMENTATION_CHART not in [c.title for c in run.charts]
    assert {n for n, _ in run.chart(LOSS_CHART).series} >= {"rgb", "depth"}


@pytest.mark.parametrize("name", ["both", "run"])
def test_loss_chart_marks_the_phase_change(pages: dict[str, Page], name: str) -> None:
    page = pages[name]
    section = parse(page.dom).sections[0]
    run = page.doc["runs"][0]
    phases = run["phases"]
    assert [p["from"] for p in phases] == [0, DEPTH_FROM]
    loss = section.chart(LOSS_CHART)
    assert len(loss.markers) >= 1
    assert len(loss.markers) == len(phases) - 1 + len(run["spikes"])
    # The boundary is drawn where the new component's line starts: its first point.
    (new,) = set(phases[1]["components"]) - set(phases[0]["components"])
    first_x, _ = points(loss.path(new))[0]
    assert min(abs(x - first_x) for x in loss.markers) < 0.11, (loss.markers, first_x)


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_screenshot_is_not_blank(pages: dict[str, Page], name: str) -> None:
    assert_not_blank(pages[name].screenshot, WINDOW)


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_page_is_self_contained(pages: dict[str, Page], name: str) -> None:
    for source in (pages[name].html, pages[name].dom):
        page = parse(source)
        assert_self_contained(source, page.elements, page.styles)


def test_a_hostile_run_name_is_text(chromium: str, phased_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / HOSTILE_NAME
    assert HOSTILE_NAME in str(run_dir)
    shutil.copytree(phased_run / "profiles", run_dir / "profiles")
    (run,) = report_json(run_dir)["runs"]
    html_file = tmp_path / "hostile.html"
    html = report_html(html_file, run_dir)
    dom_text = dump_dom(chromium, html_file)
    for source in (html, dom_text):
        dom = parse(source)
        assert "script" not in [tag for tag, _ in dom.elements]
        (section,) = dom.sections
        assert section.heading == f"{run['path']} (rank 0)"
        assert HOSTILE_NAME in section.heading
        # the rest of the page is still there, not swallowed by a stray tag
        assert sorted(c.title for c in section.charts) == sorted(expected_charts(run))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;" in dom_text


def test_a_hostile_loss_name_is_an_attribute_value(chromium: str, tmp_path: Path) -> None:
    """A loss component's name goes into data-series="..." and the legend."""
    name = '"><img src=x onerror=alert(1)>&'
    run_dir = tmp_path / "run"
    with gpuscope.MemoryProfiler(run_dir, every=EVERY) as scope:
        for it in range(40):
            scope.step(it, losses={name: torch.tensor(1.0 / (it + 1))})
    (run,) = report_json(run_dir)["runs"]
    html_file = tmp_path / "loss-name.html"
    report_html(html_file, run_dir)
    dom = parse(dump_dom(chromium, html_file))
    assert "img" not in [tag for tag, _ in dom.elements]
    loss = dom.sections[0].chart(LOSS_CHART)
    assert {n for n, _ in loss.series} == set(expected_charts(run)[LOSS_CHART])
    assert name in {n for n, _ in loss.series}


def test_no_tick_is_labelled_negative_zero(chromium: str, tmp_path: Path) -> None:
    """A loss falling from 1 towards 0: the axis is padded below 0, and its tick at 0
    should read 0.00."""
    run_dir = tmp_path / "run"
    with gpuscope.MemoryProfiler(run_dir, every=EVERY) as scope:
        for it in range(40):
            scope.step(it, losses={"mse": torch.tensor(1.0 / (it + 1) ** 2)})
    html_file = tmp_path / "decay.html"
    report_html(html_file, run_dir)
    dom = parse(dump_dom(chromium, html_file))
    labels = [t for c in dom.sections[0].charts for t in c.tick_labels]
    assert any(re.fullmatch(r"0(\.0+)?", t) for t in labels), labels
    negative_zero = [t for t in labels if re.fullmatch(r"-0(\.0+)?\D*", t)]
    assert negative_zero == [], negative_zero


def test_expected_series_come_from_the_inputs(pages: dict[str, Page]) -> None:
    """The JSON the other tests judge by is itself what the inputs hold: the CPU run's
    categories and losses, the text log's allocator figures."""
    run, log = (pages[n].doc["runs"][0] for n in ("run", "log"))
    run_charts, log_charts = expected_charts(run), expected_charts(log)
    assert set(run_charts[LOSS_CHART]) == {"rgb", "depth", "total"}
    assert "activations" in run_charts[CATEGORY_CHART]
    assert run["leak"]["suspected"] is True and run["leak"]["category"] == "activations"
    assert log_charts[FRAGMENTATION_CHART] == ["fragmentation"]
    assert sorted(log_charts[TOTALS_CHART]) == ["allocated", "census", "reserved"]
    assert run["records"] == ITERATIONS // EVERY


def test_totals_chart_names_only_the_lines_it_draws(pages: dict[str, Page]) -> None:
    """On the CPU run the totals chart draws the census and the C heap (no caching
    allocator, so no allocated or reserved line): its title names those two only, and a
    note under it says why allocated and reserved are missing. The GPU log's chart draws
    allocated, reserved and the census, under the title it always had, with no note."""
    run, log = (parse(pages[n].dom).sections[0] for n in ("run", "log"))
    run_doc, log_doc = (pages[n].doc["runs"][0] for n in ("run", "log"))
    drawn: dict[str, list[str]] = {}
    for name, section, doc in (("run", run, run_doc), ("log", log, log_doc)):
        (chart,) = [
            c for c in section.charts if c.series and {n for n, _ in c.series} <= set(TOTALS_WORDS)
        ]
        names = {s["name"] for s in doc["timeline"]["series"]}
        drawn[name] = [n for n, _ in chart.series]
        assert drawn[name] == [n for n in TOTALS_WORDS if n in names]
        for series, word in TOTALS_WORDS.items():
            assert (word.lower() in chart.title.lower()) == (series in drawn[name]), chart.title
    assert drawn == {"run": ["census", "heap"], "log": ["allocated", "reserved", "census"]}
    (note,) = [n for n in run.notes if "reserved" in n]
    assert "CUDA" in note and "CPU" in note, note
    assert [c.series for c in log.charts if c.title == TOTALS_CHART]
    assert [n for n in log.notes if "reserved" in n] == []


def test_allocator_verdict_and_ooms_lead_the_run(chromium: str, tmp_path: Path) -> None:
    """The H200 runs: what the allocator's counters say, the OOMs and retries with their
    iterations, and a caught impossible request, above the charts of each run."""
    h200 = SHARED_DATA / "gpu-h200"
    runs = [h200 / "lm_variable_capped", h200 / "lm_clean"]
    doc = report_json(*runs)
    html_file = tmp_path / "h200.html"
    report_html(html_file, *runs)
    dom = dump_dom(chromium, html_file)
    # The runs' sections, after the diagnoses' (which come first on the page).
    capped, clean = [s for s in dom.split("<section")[1:] if s.startswith(' class="run"')][:2]
    for section, verdict in ((capped, "fragmentation"), (clean, "cache, not fragmentation")):
        assert f"<b>Allocator: {verdict}</b>" in section
        assert section.index("Allocator: ") < section.index("<svg")
    rises = doc["runs"][0]["fragmentation"]["rose_at"]
    rows = re.findall(r"<tr><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td></tr>", capped)
    assert [tuple(map(int, r)) for r in rows[: len(rises)]] == [
        (r["iteration"], r["ooms"], r["alloc_retries"]) for r in rises
    ]
    assert sum(int(r[1]) for r in rows[: len(rises)]) == 18
    assert "an impossible request, 16.0 TiB asked of a 140 GiB device" in clean
    assert clean.index("impossible request") < clean.index("<svg")
