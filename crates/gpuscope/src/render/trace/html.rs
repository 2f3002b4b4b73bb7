//! `gpuscope trace --format html`: one self-contained page per set of traces — the trace
//! health, then for each rank the GPU time breakdown, the steps as a stacked chart with their verdicts, the
//! memory timeline per device, the largest gaps, top kernels, operators, idle time,
//! launches and copies — then the ranks side by side. Kernel and operator names that run to
//! thousands of characters are shortened in their cells, whole on hover.

use std::fmt::Write as _;
use std::io::{self, Write};

use html_escape::encode_text as text;

use super::{memory_summary, stream_label};
use crate::analysis::report::timeline::Unit;
use crate::analysis::trace::health::HealthIssue;
use crate::analysis::trace::ranks::RankComparison;
use crate::analysis::trace::report::RankReport;
use crate::analysis::trace::steps::Category;
use crate::model::units::counted;
use crate::render::html::{page_end, page_start, table, table_of_names};
use crate::render::svg::{chart, Chart, Line};
use crate::render::units::{figure, ByteUnit};

/// Writes the page.
pub fn html(
    health: &[HealthIssue],
    ranks: &[RankReport],
    comparison: Option<&RankComparison>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut page = page_start("gpuscope trace", &counted(ranks.len(), "rank"));
    health_section(&mut page, health);
    for r in ranks {
        rank_section(&mut page, r);
    }
    if let Some(c) = comparison {
        page.push_str("<h2>Ranks side by side</h2>");
        let rows: Vec<Vec<String>> = c
            .ranks
            .iter()
            .map(|r| {
                vec![
                    r.rank.to_string(),
                    r.mean_step_us.map_or("–".into(), ms),
                    ms(r.compute_us),
                    ms(r.communication_us),
                    ms(r.idle_us),
                ]
            })
            .collect();
        table(
            &mut page,
            &["rank", "step ms", "compute ms", "comm ms", "idle ms"],
            &rows,
        );
        for s in &c.stragglers {
            let _ = write!(
                page,
                "<div class=\"verdict leak\"><b>Straggler</b>: rank {} computes {:.0} % longer \
                 than the ranks' median</div>",
                s.rank, s.compute_over_median_percent
            );
        }
    }
    page_end(&mut page);
    out.write_all(page.as_bytes())
}

/// Each issue as a verdict box: its kind, the rank it concerns, what is wrong.
fn health_section(page: &mut String, health: &[HealthIssue]) {
    page.push_str("<h2>Trace health</h2>");
    if health.is_empty() {
        page.push_str("<p>Nothing found that makes these figures incomplete.</p>");
        return;
    }
    for issue in health {
        let rank = issue
            .rank
            .map_or_else(String::new, |r| format!(" (rank {r})"));
        let _ = write!(
            page,
            "<div class=\"verdict\"><b>{}</b>{rank}: {}</div>",
            issue.kind,
            text(&issue.detail)
        );
    }
}

fn ms(us: f64) -> String {
    format!("{:.2}", us / 1000.0)
}

fn rank_section(page: &mut String, r: &RankReport) {
    let _ = write!(
        page,
        "<section class=\"rank\"><h2>rank {} — {}</h2>",
        r.rank,
        text(&r.path.display().to_string())
    );
    let Some(t) = &r.temporal else {
        page.push_str("<p>No GPU activity in this trace: all its events are on the CPU.</p>");
        steps(page, r);
        memory(page, r);
        operators(page, r);
        page.push_str("</section>");
        return;
    };
    for note in &r.notes {
        let _ = write!(page, "<p>{}</p>", text(note));
    }
    page.push_str("<h3>GPU time</h3>");
    table(
        page,
        &["", "ms", "%"],
        &[
            vec![
                "kernel time (span)".into(),
                ms(t.kernel_time_us),
                "100.0".into(),
            ],
            vec![
                "idle".into(),
                ms(t.idle_time_us),
                format!("{:.1}", t.idle_time_percent),
            ],
            vec![
                "compute".into(),
                ms(t.compute_time_us),
                format!("{:.1}", t.compute_time_percent),
            ],
            vec![
                "non-compute".into(),
                ms(t.non_compute_time_us),
                format!("{:.1}", t.non_compute_time_percent),
            ],
        ],
    );
    page.push_str("<h3>Kernel types</h3>");
    let rows: Vec<Vec<String>> = r
        .kernel_types
        .iter()
        .map(|k| {
            vec![
                k.kernel_type.clone(),
                ms(k.sum_us),
                format!("{:.1}", k.percentage),
            ]
        })
        .collect();
    table(page, &["type", "ms", "%"], &rows);
    steps(page, r);
    memory(page, r);
    if !r.largest_gaps.is_empty() {
        page.push_str("<h3>Largest GPU gaps, and what the CPU was doing</h3>");
        let rows: Vec<Vec<String>> = r
            .largest_gaps
            .iter()
            .map(|g| {
                let doing: Vec<String> = g
                    .cpu
                    .iter()
                    .map(|c| format!("{} ({:.0} µs)", c.name, c.overlap_us))
                    .collect();
                vec![
                    doing.join("; "),
                    format!("{:.1}", g.duration_us),
                    format!("{:.1}", g.start_us / 1000.0),
                ]
            })
            .collect();
        table(page, &["CPU during the gap", "gap µs", "at ms"], &rows);
    }
    page.push_str("<h3>Top kernels</h3>");
    let rows: Vec<Vec<String>> = r
        .top_kernels
        .iter()
        .map(|k| {
            vec![
                k.name.clone(),
                k.count.to_string(),
                ms(k.sum_us),
                format!("{:.1}", k.mean_us),
                format!("{:.1}", k.max_us),
                format!("{:.1}", k.percentage),
            ]
        })
        .collect();
    table_of_names(
        page,
        &["kernel", "n", "total ms", "mean µs", "max µs", "%"],
        &rows,
    );
    operators(page, r);
    if !r.idle_by_stream.is_empty() {
        page.push_str("<h3>Idle time by stream</h3>");
        let rows: Vec<Vec<String>> = r
            .idle_by_stream
            .iter()
            .map(|s| {
                vec![
                    stream_label(s.stream),
                    ms(s.host_wait_us),
                    ms(s.kernel_wait_us),
                    ms(s.other_us),
                ]
            })
            .collect();
        table(
            page,
            &["stream", "host wait ms", "kernel wait ms", "other ms"],
            &rows,
        );
    }
    if let Some(l) = &r.launches {
        let _ = write!(page, "<h3>Kernel launches ({})</h3>", l.count);
        let rows: Vec<Vec<String>> = [
            ("launch call (CPU)", &l.cpu_duration),
            ("work (GPU)", &l.gpu_duration),
            ("launch delay", &l.launch_delay),
        ]
        .iter()
        .map(|(name, d)| {
            vec![
                (*name).to_owned(),
                format!("{:.1}", d.mean_us),
                format!("{:.1}", d.p50_us),
                format!("{:.1}", d.p95_us),
                format!("{:.1}", d.max_us),
            ]
        })
        .collect();
        table(page, &["µs", "mean", "median", "p95", "max"], &rows);
    }
    if let Some(g) = &r.graph_replays {
        if r.launches.is_none() {
            page.push_str("<h3>Kernel launches</h3>");
        }
        let _ = write!(page, "<p>{}</p>", text(&g.unpaired_note()));
    }
    if !r.copies.is_empty() {
        page.push_str("<h3>Copies and memsets</h3>");
        let rows: Vec<Vec<String>> = r
            .copies
            .iter()
            .map(|c| {
                vec![
                    c.direction.clone(),
                    c.count.to_string(),
                    figure(c.bytes as f64, ByteUnit::DecimalMb, 1),
                    format!("{:.1}", c.gb_per_s),
                    c.pageable_count.to_string(),
                ]
            })
            .collect();
        table(
            page,
            &["direction", "count", "MB", "GB/s", "pageable"],
            &rows,
        );
    }
    page.push_str("</section>");
}

pub(crate) fn steps(page: &mut String, r: &RankReport) {
    let Some(o) = &r.steps else {
        return;
    };
    page.push_str("<h3>Steps</h3>");
    for v in &o.verdicts {
        let _ = write!(
            page,
            "<div class=\"verdict leak\"><b>{}</b>: {}</div>",
            text(v.kind.as_str()),
            text(&v.advice)
        );
    }
    if o.verdicts.is_empty() {
        page.push_str("<div class=\"verdict ok\">Nothing stands out in the steps.</div>");
    }
    if let Some(note) = o.graph_note() {
        let _ = write!(page, "<p>{}</p>", text(&note));
    }
    let x: Vec<i64> = o
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.name
                .trim_start_matches("ProfilerStep#")
                .parse()
                .unwrap_or(i as i64)
        })
        .collect();
    let columns: Vec<Vec<Option<f64>>> = (0..Category::ALL.len())
        .map(|c| {
            o.steps
                .iter()
                .map(|s| Some(s.breakdown_us[c] / 1000.0))
                .collect()
        })
        .collect();
    let lines: Vec<Line> = Category::ALL
        .iter()
        .zip(&columns)
        .filter(|(_, values)| values.iter().flatten().any(|v| *v > 0.0))
        .map(|(category, values)| Line {
            name: category.as_str(),
            dashed: false,
            values,
        })
        .collect();
    if x.len() >= 2 {
        chart(
            &Chart {
                title: "Step time by category (ms)",
                x_label: "step",
                x: &x,
                lines,
                stacked: true,
                unit: Unit::Milliseconds,
                iec_bytes: false,
                markers: Vec::new(),
            },
            page,
        );
    }
}

fn memory(page: &mut String, r: &RankReport) {
    for m in &r.memory {
        let _ = write!(
            page,
            "<h3>Memory on {} ({} events)</h3><p>In the trace: {}.</p>",
            text(&m.device),
            m.events,
            text(&memory_summary(m))
        );
        let x: Vec<i64> = m
            .timeline
            .iter()
            .map(|(us, _)| (*us / 1000.0) as i64)
            .collect();
        let values: Vec<Option<f64>> = m.timeline.iter().map(|(_, b)| Some(*b as f64)).collect();
        chart(
            &Chart {
                title: "Allocated memory",
                x_label: "ms",
                x: &x,
                lines: vec![Line {
                    name: "allocated",
                    dashed: false,
                    values: &values,
                }],
                stacked: false,
                unit: Unit::Bytes,
                iec_bytes: false,
                markers: Vec::new(),
            },
            page,
        );
        let rows: Vec<Vec<String>> = m
            .top_allocators
            .iter()
            .map(|a| vec![a.name.clone(), figure(a.net_bytes as f64, ByteUnit::Mib, 1)])
            .collect();
        table_of_names(page, &["allocated most by the peak", "MB"], &rows);
    }
}

fn operators(page: &mut String, r: &RankReport) {
    let o = &r.operators;
    for (title, rows) in [
        ("CPU operators by self time", &o.by_self_time),
        (
            "CPU operators by the GPU time they launched",
            &o.by_gpu_time,
        ),
        ("CPU operators by input shapes", &o.by_shapes),
    ] {
        if rows.is_empty() {
            continue;
        }
        let _ = write!(page, "<h3>{title}</h3>");
        let rows: Vec<Vec<String>> = rows
            .iter()
            .map(|s| {
                let name = match &s.input_shapes {
                    Some(shapes) => format!("{} {shapes}", s.name),
                    None => s.name.clone(),
                };
                vec![
                    name,
                    s.count.to_string(),
                    ms(s.self_us),
                    ms(s.total_us),
                    s.gpu_us.map_or_else(|| "?".to_owned(), ms),
                ]
            })
            .collect();
        table_of_names(
            page,
            &["operator", "n", "self ms", "total ms", "GPU ms"],
            &rows,
        );
    }
    if let Some(g) = &o.graph_replays {
        let _ = write!(page, "<p>{}</p>", text(&g.note()));
    }
}
