//! `gpuscope snapshot --format html`: one self-contained page — the state at the dump,
//! the memory timeline stacked by call site with the peak marked, what was alive at the
//! peak and at the dump, leak candidates, churn, OOMs, fragmentation and a map of the
//! largest segments' blocks; and the page of `--diff`, two snapshots by call site. Inline
//! SVG, no script, nothing fetched.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};

use super::{
    diff_sums, split_accumulating, ACCUMULATING, NONE_ACCUMULATING, NOT_ACCUMULATING, SIZES_DIFFER,
    TRACE_SKIPPED,
};
use crate::analysis::report::timeline::Unit;
use crate::analysis::snapshot::diff::SnapshotDiff;
use crate::analysis::snapshot::report::SegmentLayout;
use crate::analysis::snapshot::sites::SiteBytes;
use crate::analysis::snapshot::SnapshotReport;
use crate::model::snapshot::BlockState;
use crate::render::html::{page_end, page_start, table};
use crate::render::svg::{chart, Chart, Line, Marker};
use crate::render::units::{bytes, signed_bytes};

/// Writes the page of `gpuscope snapshot A --diff B`: the sums of both, then every call
/// site whose bytes changed, growth first (the text shows the first 20).
pub fn diff_html(a: &Path, b: &Path, d: &SnapshotDiff, out: &mut dyn Write) -> io::Result<()> {
    let meta = format!(
        "A: {} · B: {}",
        text(&a.display().to_string()),
        text(&b.display().to_string())
    );
    let mut page = page_start("gpuscope snapshot diff", &meta);
    table(&mut page, &["", "A", "B", "B − A"], &diff_sums(d));
    page.push_str("<h2>Call sites that changed, growth first</h2>");
    if d.changed.is_empty() {
        page.push_str("<p>The same bytes at every call site.</p>");
    } else {
        let rows: Vec<Vec<String>> = d
            .changed
            .iter()
            .map(|c| {
                vec![
                    c.site.clone(),
                    bytes(c.before_bytes),
                    bytes(c.after_bytes),
                    signed_bytes(c.delta_bytes),
                    format!("{} → {}", c.before_count, c.after_count),
                ]
            })
            .collect();
        table(
            &mut page,
            &["call site", "A", "B", "B − A", "allocations"],
            &rows,
        );
    }
    let _ = write!(
        page,
        "<p class=\"meta\">{} call sites with the same bytes in both.</p>",
        d.unchanged_sites
    );
    page_end(&mut page);
    out.write_all(page.as_bytes())
}

/// Writes the page.
pub fn html(r: &SnapshotReport, out: &mut dyn Write) -> io::Result<()> {
    let mut page = page_start("gpuscope snapshot", &text(&r.path.display().to_string()));
    state(&mut page, r);
    timeline(&mut page, r);
    if let Some(peak) = &r.peak {
        sites(
            &mut page,
            &format!("Alive at the peak ({})", bytes(peak.bytes)),
            &peak.by_site,
        );
    }
    sites(
        &mut page,
        &format!("Alive at the dump ({})", bytes(r.now.bytes)),
        &r.now.by_site,
    );
    if r.peak.is_some() && !r.now.by_site.is_empty() {
        let _ = write!(page, "<p>{}</p>", text(SIZES_DIFFER));
    }
    if !r.devices.is_empty() {
        let (growing, rest) = split_accumulating(&r.never_freed);
        if growing.is_empty() {
            let _ = write!(page, "<p>{}</p>", text(NONE_ACCUMULATING));
        }
        sites(&mut page, ACCUMULATING, &growing);
        sites(&mut page, NOT_ACCUMULATING, &rest);
    }
    sites(
        &mut page,
        "Churn: allocated and freed within the trace",
        &r.churn,
    );
    for oom in &r.ooms {
        let _ = write!(
            page,
            "<div class=\"verdict leak\"><b>Out of memory</b> at entry {}: {} requested at {} \
             with {} allocated and {} reserved</div>",
            oom.index,
            bytes(oom.requested_bytes),
            text(&oom.site),
            bytes(oom.allocated_bytes),
            bytes(oom.reserved_bytes)
        );
        sites(&mut page, "Alive just before it", &oom.alive_by_site);
    }
    fragmentation(&mut page, r);
    page_end(&mut page);
    out.write_all(page.as_bytes())
}

fn state(page: &mut String, r: &SnapshotReport) {
    let s = &r.stats;
    page.push_str("<h2>At the dump</h2>");
    let mut rows = vec![
        vec!["segments".to_owned(), s.total.segments.to_string()],
        vec!["reserved".to_owned(), bytes(s.total.reserved_bytes)],
        vec!["allocated".to_owned(), bytes(s.total.allocated_bytes)],
        vec!["requested".to_owned(), bytes(s.total.requested_bytes)],
        vec![
            "free (% internal)".to_owned(),
            format!(
                "{} ({})",
                bytes(s.free_bytes),
                s.internal_free_percent
                    .map_or("–".to_owned(), |p| format!("{p:.1} %"))
            ),
        ],
    ];
    for (state, n) in &s.block_counts {
        rows.push(vec![
            format!("{state} blocks"),
            format!("{n} ({})", bytes(s.block_bytes[state])),
        ]);
    }
    table(page, &["", ""], &rows);
    if let Some(t) = &r.trace {
        let _ = write!(
            page,
            "<div class=\"verdict ok\">Peak allocated <b>{}</b> on device {}: {} alive \
             before the trace + {} at most within it. cudaMalloc {} times, cudaFree {} \
             times.</div>",
            bytes(t.peak_allocated_bytes.max(0) as u64),
            t.device,
            bytes(t.allocated_before_trace_bytes.max(0) as u64),
            bytes(t.trace_live_delta_peak_bytes.max(0) as u64),
            t.cuda_malloc_calls,
            t.cuda_free_calls
        );
    } else if r.trace_skipped {
        let _ = write!(page, "<p>{}</p>", text(TRACE_SKIPPED));
    } else {
        page.push_str(
            "<p>No allocator trace in this snapshot: record one with \
             <code>torch.cuda.memory._record_memory_history()</code> before the dump.</p>",
        );
    }
}

pub(crate) fn timeline(page: &mut String, r: &SnapshotReport) {
    let (Some(st), Some(t)) = (&r.stacked, &r.trace) else {
        return;
    };
    if st.x.is_empty() {
        return;
    }
    let _ = write!(
        page,
        "<h2>Memory over the trace, by call site (device {})</h2>",
        t.device
    );
    let values: Vec<Vec<Option<f64>>> = st
        .series
        .iter()
        .map(|s| s.bytes.iter().map(|&b| Some(b as f64)).collect())
        .collect();
    let labels: Vec<String> = st.series.iter().map(|s| short_site(&s.site)).collect();
    let lines = labels
        .iter()
        .zip(&values)
        .map(|(name, v)| Line {
            name,
            dashed: false,
            values: v,
        })
        .collect();
    let markers = st
        .peak_x
        .map(|x| Marker {
            x,
            label: format!("peak {}", bytes(t.peak_allocated_bytes.max(0) as u64)),
            alert: true,
        })
        .into_iter()
        .collect();
    chart(
        &Chart {
            title: "allocated bytes by call site",
            x_label: if st.has_time {
                "ms since the trace began"
            } else {
                "trace entry"
            },
            x: &st.x,
            lines,
            stacked: true,
            unit: Unit::Bytes,
            iec_bytes: true,
            markers,
        },
        page,
    );
}

/// A site's frames without their directories, for a legend: `optimizers.py:82 step`.
fn short_site(site: &str) -> String {
    site.split(" < ")
        .map(|frame| match frame.split_once(' ') {
            Some((place, function)) => {
                let file = place.rsplit('/').next().unwrap_or(place);
                format!("{file} {function}")
            }
            None => frame.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" < ")
}

fn sites(page: &mut String, title: &str, list: &[SiteBytes]) {
    if list.is_empty() {
        return;
    }
    let _ = write!(page, "<h3>{}</h3>", text(title));
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| vec![s.site.clone(), bytes(s.bytes), s.count.to_string()])
        .collect();
    table(page, &["call site", "bytes", "allocations"], &rows);
}

fn fragmentation(page: &mut String, r: &SnapshotReport) {
    let f = &r.fragmentation;
    page.push_str("<h2>Fragmentation</h2>");
    let _ = write!(
        page,
        "<p>{} free in cached blocks, the largest {}; {} of it outside each segment's \
         largest free block; {} lost to rounding.</p>",
        bytes(f.free_bytes),
        bytes(f.largest_free_block_bytes),
        f.fragmented_percent
            .map_or("none".to_owned(), |p| format!("{p:.1} %")),
        bytes(f.rounding_loss_bytes)
    );
    let rows: Vec<Vec<String>> = f
        .requests
        .iter()
        .map(|q| {
            vec![
                bytes(q.request_bytes),
                bytes(q.usable_free_bytes),
                bytes(q.unusable_free_bytes),
                if q.fits_without_cuda_malloc {
                    "no"
                } else {
                    "yes"
                }
                .to_owned(),
            ]
        })
        .collect();
    table(
        page,
        &[
            "request",
            "free that fits",
            "free too small",
            "needs cudaMalloc",
        ],
        &rows,
    );
    segment_map(page, &r.segment_map, r.stats.total.segments);
}

const MAP_WIDTH: f64 = 940.0;
const MAP_LABEL: f64 = 170.0;
const MAP_ROW: f64 = 12.0;

fn colour(state: &BlockState) -> &'static str {
    match state {
        BlockState::ActiveAllocated => "#4e79a7",
        BlockState::ActivePendingFree => "#f28e2b",
        BlockState::Inactive => "#e4e4ea",
        BlockState::Other(_) => "#b07aa1",
    }
}

/// The largest segments, one row each, their blocks drawn to scale within the row.
fn segment_map(page: &mut String, map: &[SegmentLayout], segments: u64) {
    if map.is_empty() {
        return;
    }
    let _ = write!(
        page,
        "<h3>Segment map: the {} largest of {segments} segments</h3><p class=\"meta\">\
         <span style=\"color:#4e79a7\">■</span> allocated \
         <span style=\"color:#f28e2b\">■</span> pending free \
         <span style=\"color:#bbb\">■</span> free</p>",
        map.len()
    );
    let height = map.len() as f64 * MAP_ROW + 4.0;
    let _ = write!(
        page,
        "<svg class=\"chart segment-map\" viewBox=\"0 0 {MAP_WIDTH} {height}\" \
         width=\"{MAP_WIDTH}\" height=\"{height}\" role=\"img\"><title>segment map</title>"
    );
    let bar = MAP_WIDTH - MAP_LABEL - 4.0;
    for (row, s) in map.iter().enumerate() {
        let y = row as f64 * MAP_ROW + 2.0;
        let _ = write!(
            page,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"tick\">{} @ {:#x}</text>",
            MAP_LABEL - 6.0,
            y + MAP_ROW - 3.0,
            text(&bytes(s.total_bytes)),
            s.address
        );
        let mut x = MAP_LABEL;
        for (state, size) in &s.runs {
            let w = *size as f64 / s.total_bytes.max(1) as f64 * bar;
            let _ = write!(
                page,
                "<rect class=\"block\" data-state=\"{}\" x=\"{x:.2}\" y=\"{y:.1}\" \
                 width=\"{w:.2}\" height=\"{}\" fill=\"{}\"><title>{} {}</title></rect>",
                attr(state.as_str()),
                MAP_ROW - 2.0,
                colour(state),
                text(state.as_str()),
                text(&bytes(*size))
            );
            x += w;
        }
    }
    page.push_str("</svg>");
}
