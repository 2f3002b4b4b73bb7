//! The HTML report: one self-contained page (inline CSS and SVG, no script, nothing
//! fetched) with each run's facts, verdicts and charts — categories over iterations,
//! allocated vs reserved, fragmentation, tensor count, loss components with their phases
//! and spikes — then the ranks' spread and the comparison of runs. Every string that came
//! from the input is escaped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use html_escape::encode_text as text;

use crate::analysis::report::allocator_verdict::Verdict;
use crate::analysis::report::compare::Comparison;
use crate::analysis::report::spread::RankSpread;
use crate::analysis::report::summary::Figures;
use crate::analysis::report::timeline::{Timeline, Unit};
use crate::analysis::report::{Report, RunReport};
use crate::model::memory::percent;
use crate::model::units::counted;
use crate::model::units::ByteUnit;
use crate::render::html::{page_end, page_start, table};
use crate::render::units::in_unit;

use super::health::{gradients_table, nonfinite_list, sections_table};
use super::text::{caught_oom, verdict_word};
use crate::render::svg::{chart, Chart, Line, Marker};

/// Writes the report as one HTML page.
pub fn html(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let mut page = page_start("gpuscope report", &counted(report.runs.len(), "run"));
    super::diagnosis::html_findings(&mut page, report);
    for (i, run) in report.runs.iter().enumerate() {
        run_section(&mut page, run, i);
    }
    super::diagnosis::html_evidence(&mut page, &report.diagnoses);
    for s in &report.rank_spread {
        spread_section(&mut page, s);
    }
    if let Some(c) = &report.comparison {
        comparison_section(&mut page, c);
    }
    page_end(&mut page);
    out.write_all(page.as_bytes())
}

/// What the allocator's counters say, the out-of-memory errors with their iterations and
/// the ones `oom_guard` caught, and growing host memory: near the top, since they cost
/// batches or the run.
fn allocator_verdict(page: &mut String, run: &RunReport) {
    if let Some(f) = &run.fragmentation {
        let class = match f.verdict {
            Verdict::Fragmented | Verdict::Pressure => "leak",
            Verdict::Cache | Verdict::None => "ok",
        };
        let _ = write!(
            page,
            "<div class=\"verdict {class}\"><b>Allocator: {}</b> — {}",
            verdict_word(f.verdict),
            text(&f.reason)
        );
        if !f.rose_at.is_empty() {
            page.push_str("<table><tr><th>iteration</th><th>OOMs</th><th>retries</th></tr>");
            for r in &f.rose_at {
                let _ = write!(
                    page,
                    "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                    r.iteration, r.ooms, r.alloc_retries
                );
            }
            page.push_str("</table>");
        }
        page.push_str("</div>");
    }
    for e in &run.oom_events {
        let class = if e.impossible { "ok" } else { "leak" };
        let _ = write!(
            page,
            "<div class=\"verdict {class}\">{}</div>",
            text(&caught_oom(e))
        );
    }
    if let Some(h) = run.host_memory.as_ref().filter(|h| h.growing) {
        let _ = write!(
            page,
            "<div class=\"verdict leak\"><b>Host memory grows</b> — {}</div>",
            text(&h.reason)
        );
    }
}

/// One start/end figure as text, `None` when not measured.
type FigureText = fn(&Figures) -> Option<String>;

fn run_section(page: &mut String, run: &RunReport, index: usize) {
    let s = &run.summary;
    let _ = write!(
        page,
        "<section class=\"run\" id=\"{}\"><h2>{} (rank {})</h2><table class=\"facts\">\
         <tr><th></th><th>start</th><th>end</th></tr>\
         <tr><td>iteration</td><td>{}</td><td>{}</td></tr>",
        super::diagnosis::run_id(index),
        text(&run.path.display().to_string()),
        run.rank,
        s.iterations[0],
        s.iterations[1]
    );
    let rows: [(&str, FigureText); 5] = [
        ("allocated", |f| f.allocated_bytes.map(mb_text)),
        ("reserved", |f| f.reserved_bytes.map(mb_text)),
        ("fragmentation", |f| {
            f.fragmentation_percent.map(|p| format!("{p:.1}%"))
        }),
        ("census", |f| Some(mb_text(f.census_bytes))),
        ("tensors", |f| Some(f.tensor_count.to_string())),
    ];
    for (name, figure) in rows {
        if let (Some(a), Some(b)) = (figure(&s.start), figure(&s.end)) {
            let _ = write!(page, "<tr><td>{name}</td><td>{a}</td><td>{b}</td></tr>");
        }
    }
    let threshold = s
        .end
        .large_threshold_bytes
        .map(|b| format!(" (&gt;{:.0} MB)", ByteUnit::Mib.of(b)))
        .unwrap_or_default();
    let _ = write!(
        page,
        "</table><p>{} records · {} large tensors{threshold} at the end</p>",
        s.records, s.end.large_tensor_count,
    );
    let leak = &run.leak.leak;
    let (class, verdict) = match (leak.judged, leak.suspected) {
        (false, _) => ("unjudged", "Leak not judged"),
        (true, true) => ("leak", "Leak suspected"),
        (true, false) => ("ok", "No leak"),
    };
    let _ = write!(
        page,
        "<div class=\"verdict {class}\"><b>{verdict}</b> — {}",
        text(&run.leak.leak.reason)
    );
    if let Some(e) = &run.oom_estimate {
        let _ = write!(
            page,
            "<br><b>Out of memory</b> near iteration {}: {} grows {:+.1} MB per 1000 \
             iterations from {} towards the device's {}",
            e.iteration,
            e.series,
            ByteUnit::Mib.of_f64(e.slope_bytes_per_1k_iters),
            mb_text(e.current_bytes),
            mb_text(e.device_total_bytes)
        );
    }
    page.push_str("</div>");
    allocator_verdict(page, run);
    if !run.advice.is_empty() {
        page.push_str("<ul class=\"advice\">");
        for a in &run.advice {
            let _ = write!(
                page,
                "<li><b>{}</b>: {}</li>",
                text(&a.figure.reading(a.value)),
                text(&a.advice)
            );
        }
        page.push_str("</ul>");
    }
    charts(page, run);
    shares_table(page, "Categories at the end", &s.end.categories_bytes);
    shares_table(page, "Data types at the end", &s.end.dtypes_bytes);
    trends_table(page, run);
    phases_table(page, run);
    sections_table(page, &run.sections);
    if let Some(g) = &run.gradients {
        gradients_table(page, g);
    }
    nonfinite_list(page, &run.nonfinite);
    if !run.skipped.is_empty() {
        let _ = write!(
            page,
            "<h3>Skipped</h3><ul class=\"skipped\">{}</ul>",
            run.skipped
                .iter()
                .take(20)
                .map(|l| format!("<li>{}</li>", text(l)))
                .collect::<String>()
        );
    }
    page.push_str("</section>");
}

fn charts(page: &mut String, run: &RunReport) {
    let t = &run.timeline;
    // A category that holds nothing adds no area to the stack, only a legend entry.
    let categories: Vec<Line> = prefixed_lines(t, "category/")
        .into_iter()
        .filter(|l| l.values.iter().flatten().any(|v| *v > 0.0))
        .collect();
    titled_chart(
        page,
        "Memory by category (stacked)",
        t,
        categories,
        true,
        Unit::Bytes,
        Vec::new(),
    );
    let totals = lines(t, &["allocated", "reserved", "census", "heap"]);
    let title = totals_title(&totals);
    // The text report's rule: no allocator figure, a CPU run.
    let on_cpu = run.summary.end.allocated_bytes.is_none();
    let drawn = titled_chart(page, &title, t, totals, false, Unit::Bytes, Vec::new());
    if drawn && on_cpu {
        page.push_str(
            "<p class=\"meta\">No allocated or reserved line: they are the CUDA caching \
             allocator's figures, and this CPU run has no such allocator.</p>",
        );
    }
    let fragmentation = lines(t, &["fragmentation"]);
    titled_chart(
        page,
        "Fragmentation",
        t,
        fragmentation,
        false,
        Unit::Percent,
        Vec::new(),
    );
    titled_chart(
        page,
        "Tensor count",
        t,
        lines(t, &["tensors"]),
        false,
        Unit::Count,
        Vec::new(),
    );
    let losses = prefixed_lines(t, "loss/");
    let markers = run
        .losses
        .phases
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, p)| Marker {
            x: p.from,
            label: format!("phase {}", i + 1),
            alert: false,
        })
        .chain(run.losses.spikes.iter().map(|s| Marker {
            x: s.iteration,
            label: "spike".into(),
            alert: true,
        }))
        .collect();
    titled_chart(
        page,
        "Loss components",
        t,
        losses,
        false,
        Unit::Loss,
        markers,
    );
    titled_chart(
        page,
        "Timed sections (ms per call)",
        t,
        prefixed_lines(t, "section/"),
        false,
        Unit::Milliseconds,
        Vec::new(),
    );
    let norms = prefixed_lines(t, "grad/");
    let nonfinite = run
        .nonfinite
        .iter()
        .map(|e| Marker {
            x: e.event.iteration,
            label: "NaN/Inf".into(),
            alert: true,
        })
        .collect();
    titled_chart(
        page,
        "Gradient norms (global and per module)",
        t,
        norms,
        false,
        Unit::Norm,
        nonfinite,
    );
}

/// Lines that sum or repeat others (a loss total, the census that equals allocated when
/// every tensor is counted) are dashed, so the line under them stays visible.
fn dashed(name: &str) -> bool {
    matches!(name, "total" | "census")
}

/// The series whose names start with `prefix`, named without it.
fn prefixed_lines<'a>(t: &'a Timeline, prefix: &str) -> Vec<Line<'a>> {
    t.series
        .iter()
        .filter_map(|s| {
            let name = s.name.strip_prefix(prefix)?;
            Some(Line {
                name,
                dashed: dashed(name),
                values: &s.values,
            })
        })
        .collect()
}

fn lines<'a>(t: &'a Timeline, names: &[&'a str]) -> Vec<Line<'a>> {
    names
        .iter()
        .filter_map(|name| {
            Some(Line {
                name,
                dashed: dashed(name),
                values: &t.get(name)?.values,
            })
        })
        .collect()
}

/// The title of the totals chart, naming the lines it draws: `Allocated, reserved and
/// counted tensors` on CUDA, `Counted tensors and C heap` on the CPU, which has no caching
/// allocator.
fn totals_title(lines: &[Line]) -> String {
    let names: Vec<&str> = lines
        .iter()
        .map(|l| match l.name {
            "census" => "counted tensors",
            "heap" => "C heap",
            name => name,
        })
        .collect();
    let listed = match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.concat(),
    };
    let mut chars = listed.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Writes `title` and its chart, unless there is nothing to draw; whether it did.
fn titled_chart(
    page: &mut String,
    title: &str,
    t: &Timeline,
    lines: Vec<Line>,
    stacked: bool,
    unit: Unit,
    markers: Vec<Marker>,
) -> bool {
    if lines.is_empty() || t.iterations.is_empty() {
        return false;
    }
    let _ = write!(page, "<h3>{title}</h3>");
    chart(
        &Chart {
            title,
            x_label: "iteration",
            x: &t.iterations,
            lines,
            stacked,
            unit,
            iec_bytes: false,
            markers,
        },
        page,
    );
    true
}

fn shares_table(page: &mut String, title: &str, bytes: &BTreeMap<String, u64>) {
    if bytes.is_empty() {
        return;
    }
    let total: u64 = bytes.values().sum();
    let mut sorted: Vec<_> = bytes.iter().collect();
    sorted.sort_by_key(|(_, b)| std::cmp::Reverse(**b));
    let rows: Vec<Vec<String>> = sorted
        .into_iter()
        .map(|(name, b)| {
            vec![
                name.clone(),
                mb_text(*b),
                format!("{:.1}%", percent(*b, total)),
            ]
        })
        .collect();
    let _ = write!(page, "<h3>{title}</h3>");
    table(page, &["", "size", "share"], &rows);
}

fn trends_table(page: &mut String, run: &RunReport) {
    let Some(start) = run.leak.window_start else {
        return;
    };
    if run.leak.trends.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = run
        .leak
        .trends
        .iter()
        .map(|(name, t)| {
            vec![
                name.clone(),
                format!("{:+.2}", ByteUnit::Mib.of_f64(t.slope_bytes_per_1k_iters)),
                if t.flat {
                    "flat".to_owned()
                } else {
                    format!("{:.2}", t.r2)
                },
                if t.sustained { "yes" } else { "" }.to_owned(),
            ]
        })
        .collect();
    let _ = write!(page, "<h3>Trends from iteration {start}</h3>");
    table(page, &["series", "MB / 1000 it.", "r²", "sustained"], &rows);
}

fn phases_table(page: &mut String, run: &RunReport) {
    let l = &run.losses;
    if l.phases.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = l
        .phases
        .iter()
        .map(|p| vec![format!("{} – {}", p.from, p.to), p.shares_text()])
        .collect();
    page.push_str("<h3>Loss phases</h3>");
    table(page, &["iterations", "share of the components' sum"], &rows);
    if l.spikes.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = l
        .spikes
        .iter()
        .map(|s| {
            let memory = match s.allocated_change_bytes {
                Some(b) => format!("allocated {:+.1} MB", ByteUnit::Mib.of_f64(b as f64)),
                None => format!(
                    "census {:+.1} MB",
                    ByteUnit::Mib.of_f64(s.census_change_bytes as f64)
                ),
            };
            vec![
                s.iteration.to_string(),
                format!("{:.4}", s.total),
                format!("{:.4}", s.recent_median),
                s.driven_by.clone().unwrap_or_else(|| "?".into()),
                memory,
            ]
        })
        .collect();
    page.push_str("<h3>Loss spikes</h3>");
    table(
        page,
        &[
            "iteration",
            "total",
            "recent median",
            "driven by",
            "memory change",
        ],
        &rows,
    );
}

fn spread_section(page: &mut String, s: &RankSpread) {
    let _ = write!(
        page,
        "<h2>Ranks of {} ({} ranks)</h2>",
        text(&s.path),
        s.ranks.len()
    );
    let rows: Vec<Vec<String>> = s
        .figures
        .iter()
        .map(|(name, f)| {
            vec![
                name.clone(),
                format!("{} (rank {})", mb_text(f.min_bytes), f.min_rank),
                format!("{} (rank {})", mb_text(f.max_bytes), f.max_rank),
                format!("{:.1}%", f.spread_percent),
            ]
        })
        .collect();
    table(page, &["figure", "lowest", "highest", "spread"], &rows);
}

fn comparison_section(page: &mut String, c: &Comparison) {
    let _ = write!(
        page,
        "<h2>Comparison</h2><p>Against {}.</p>",
        text(&c.runs[0].label)
    );
    let rows: Vec<Vec<String>> = c
        .runs
        .iter()
        .map(|r| {
            vec![
                r.label.clone(),
                r.peak_allocated_bytes
                    .map_or_else(|| "–".to_owned(), mb_text),
                mb_text(r.peak_tensor_bytes),
                mb_text(r.end_census_bytes),
            ]
        })
        .collect();
    table(
        page,
        &["run", "peak allocated", "peak tensors", "end census"],
        &rows,
    );
    if !c.differences.is_empty() {
        page.push_str("<ul>");
        for d in &c.differences {
            let _ = write!(
                page,
                "<li>{}: {} {} vs {} ({})</li>",
                text(&d.run),
                text(&d.category),
                mb_text(d.bytes),
                mb_text(d.baseline_bytes),
                super::text::change_text(d.change_percent)
            );
        }
        page.push_str("</ul>");
    }
}

/// The report's figures: MB of 2^20 bytes, one decimal, as the text logs write them.
fn mb_text(bytes: u64) -> String {
    in_unit(bytes, ByteUnit::Mib)
}
