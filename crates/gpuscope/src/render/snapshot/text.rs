//! `gpuscope snapshot` as text for an 80-column terminal: the state at the dump, each
//! device's timeline, peak and leak candidates by call site, fragmentation; and the text
//! of `--diff`.

use super::{
    diff_sums, split_accumulating, ACCUMULATING, NONE_ACCUMULATING, NOT_ACCUMULATING, SIZES_DIFFER,
    TRACE_SKIPPED,
};
use crate::analysis::snapshot::diff::SnapshotDiff;
use crate::analysis::snapshot::fragmentation::Fragmentation;
use crate::analysis::snapshot::replay::DeviceReplay;
use crate::analysis::snapshot::sites::{SiteBytes, FRAME_SEPARATOR};
use crate::analysis::snapshot::stats::{Group, Stats};
use crate::analysis::snapshot::SnapshotReport;
use crate::render::short_names::clip_left;
use crate::render::units::{bytes, signed_bytes};
use crate::render::{paragraph, right_align, table, write_table};
use std::io::{self, Write};
use std::path::Path;

/// Sites listed in the text diff.
const DIFF_ROWS: usize = 20;

/// The report as text, `width` columns wide.
pub fn text(r: &SnapshotReport, width: u16, out: &mut dyn Write) -> io::Result<()> {
    paragraph(out, &format!("Snapshot: {}", r.path.display()), width)?;
    state(out, &r.stats, width)?;
    for d in &r.devices {
        device(out, d, width)?;
    }
    if r.trace_skipped {
        writeln!(out)?;
        paragraph(out, TRACE_SKIPPED, width)?;
    } else if r.devices.is_empty() {
        writeln!(out)?;
        paragraph(
            out,
            "No allocator trace in this snapshot: record one with \
             torch.cuda.memory._record_memory_history() before the dump to see the \
             timeline, the peak and what was alive then.",
            width,
        )?;
    }
    if let Some(peak) = &r.peak {
        let title = format!(
            "Alive at the peak ({}, device {})",
            bytes(peak.bytes),
            peak.device.unwrap_or(0)
        );
        sites(out, &title, &peak.by_site, width)?;
    }
    sites(
        out,
        &format!("Alive at the dump ({})", bytes(r.now.bytes)),
        &r.now.by_site,
        width,
    )?;
    if r.peak.is_some() && !r.now.by_site.is_empty() {
        paragraph(out, SIZES_DIFFER, width)?;
    }
    if !r.devices.is_empty() {
        let (growing, rest) = split_accumulating(&r.never_freed);
        if growing.is_empty() {
            writeln!(out)?;
            paragraph(out, NONE_ACCUMULATING, width)?;
        }
        sites(out, ACCUMULATING, &growing, width)?;
        sites(out, NOT_ACCUMULATING, &rest, width)?;
        sites(
            out,
            "Churn: allocated and freed within the trace",
            &r.churn,
            width,
        )?;
    }
    for oom in &r.ooms {
        writeln!(out)?;
        let free = oom.device_free_bytes.map_or(String::new(), |f| {
            format!("; the driver had {} free", bytes(f))
        });
        paragraph(
            out,
            &format!(
                "OUT OF MEMORY at entry {}: {} requested at {} with {} allocated and {} \
                 reserved{free}.",
                oom.index,
                bytes(oom.requested_bytes),
                oom.site,
                bytes(oom.allocated_bytes),
                bytes(oom.reserved_bytes)
            ),
            width,
        )?;
        sites(out, "Alive just before it", &oom.alive_by_site, width)?;
    }
    fragmentation(out, &r.fragmentation, width)
}

fn state(out: &mut dyn Write, s: &Stats, width: u16) -> io::Result<()> {
    let t = &s.total;
    writeln!(
        out,
        "{} segments: reserved {}, allocated {}, requested {}",
        t.segments,
        bytes(t.reserved_bytes),
        bytes(t.allocated_bytes),
        bytes(t.requested_bytes)
    )?;
    let internal = s.internal_free_percent.map_or(String::new(), |p| {
        format!(" ({p:.1} % internal: rounding inside allocated blocks)")
    });
    // memory_viz's total_free; the fragmentation section's free bytes are reserved −
    // allocated (the cached blocks), which leaves out the rounding counted here.
    paragraph(
        out,
        &format!(
            "Free: {} reserved but not requested{internal}",
            bytes(s.free_bytes)
        ),
        width,
    )?;
    let blocks: Vec<String> = s
        .block_counts
        .iter()
        .map(|(state, n)| format!("{state} {n} ({})", bytes(s.block_bytes[state])))
        .collect();
    paragraph(out, &format!("Blocks: {}", blocks.join(", ")), width)?;
    for (what, groups) in [
        ("device", &s.by_device),
        ("stream", &s.by_stream),
        ("pool", &s.by_pool),
        ("segment size", &s.by_segment_type),
    ] {
        if groups.len() > 1 {
            group_table(out, what, groups, width)?;
        }
    }
    Ok(())
}

fn group_table(out: &mut dyn Write, what: &str, groups: &[Group], width: u16) -> io::Result<()> {
    let mut t = table(width);
    t.set_header(vec![what, "segments", "reserved", "allocated", "requested"]);
    for g in groups {
        t.add_row(vec![
            g.key.clone(),
            g.sums.segments.to_string(),
            bytes(g.sums.reserved_bytes),
            bytes(g.sums.allocated_bytes),
            bytes(g.sums.requested_bytes),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4]);
    writeln!(out, "\nBy {what}:")?;
    write_table(out, &t)
}

fn device(out: &mut dyn Write, d: &DeviceReplay, width: u16) -> io::Result<()> {
    writeln!(out)?;
    let clock = if d.has_time {
        "with times"
    } else {
        "without times"
    };
    writeln!(
        out,
        "Trace of device {}: {} entries, {clock}",
        d.device, d.entries
    )?;
    let actions: Vec<String> = d.actions.iter().map(|(a, n)| format!("{a} {n}")).collect();
    paragraph(out, &format!("  {}", actions.join(", ")), width)?;
    paragraph(
        out,
        &format!(
            "  Peak allocated {}: {} alive before the trace began + {}, the most the \
             trace itself added.",
            bytes(d.peak_allocated_bytes.max(0) as u64),
            bytes(d.allocated_before_trace_bytes.max(0) as u64),
            bytes(d.trace_live_delta_peak_bytes.max(0) as u64),
        ),
        width,
    )?;
    paragraph(
        out,
        &format!(
            "  Peak reserved {}; cudaMalloc {} times, cudaFree {} times{}.",
            bytes(d.peak_reserved_bytes.max(0) as u64),
            d.cuda_malloc_calls,
            d.cuda_free_calls,
            if d.cuda_free_calls > 0 {
                " (each cudaFree stalls the device: the cache was emptied or a \
                 failed allocation retried)"
            } else {
                ""
            }
        ),
        width,
    )?;
    if let Some(l) = &d.largest_alloc {
        paragraph(
            out,
            &format!("  Largest allocation {} at {}.", bytes(l.bytes), l.site),
            width,
        )
    } else {
        Ok(())
    }
}

/// Widest site in the text tables; the JSON has the full sites.
const SITE_COLUMN: usize = 52;

fn sites(out: &mut dyn Write, title: &str, list: &[SiteBytes], width: u16) -> io::Result<()> {
    if list.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n{title}:")?;
    let mut t = table(width);
    t.set_header(vec!["call site", "bytes", "allocs"]);
    for s in list {
        t.add_row(vec![
            site_cell(&s.site, SITE_COLUMN),
            bytes(s.bytes),
            s.count.to_string(),
        ]);
    }
    right_align(&mut t, &[1, 2]);
    write_table(out, &t)
}

/// A site for a table cell `width` wide: a frame a line, each cut from the left (the
/// innermost frame, which tells sites apart, comes first).
fn site_cell(site: &str, width: usize) -> String {
    site.split(FRAME_SEPARATOR)
        .enumerate()
        .map(|(i, frame)| match i {
            0 => clip_left(frame, width),
            _ => format!("< {}", clip_left(frame, width - 2)),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn fragmentation(out: &mut dyn Write, f: &Fragmentation, width: u16) -> io::Result<()> {
    writeln!(out, "\nFragmentation:")?;
    paragraph(
        out,
        &format!(
            "  {} free in cached blocks, the largest {}; {} of it outside each segment's \
             largest free block; {} lost to rounding (allocated − requested).",
            bytes(f.free_bytes),
            bytes(f.largest_free_block_bytes),
            f.fragmented_percent
                .map_or("none".to_owned(), |p| format!("{p:.1} %")),
            bytes(f.rounding_loss_bytes)
        ),
        width,
    )?;
    let mut t = table(width);
    t.set_header(vec![
        "request",
        "free that fits",
        "free too small",
        "needs cudaMalloc",
    ]);
    for r in &f.requests {
        t.add_row(vec![
            bytes(r.request_bytes),
            bytes(r.usable_free_bytes),
            bytes(r.unusable_free_bytes),
            if r.fits_without_cuda_malloc {
                "no"
            } else {
                "yes"
            }
            .to_owned(),
        ]);
    }
    right_align(&mut t, &[0, 1, 2, 3]);
    write_table(out, &t)?;
    if f.segments.is_empty() {
        return Ok(());
    }
    let mut t = table(width);
    t.set_header(vec![
        "segment",
        "size",
        "free",
        "largest free",
        "free blocks",
    ]);
    for s in &f.segments {
        t.add_row(vec![
            format!("{:#x} ({})", s.address, s.segment_type),
            bytes(s.total_bytes),
            bytes(s.free_bytes),
            bytes(s.largest_free_block_bytes),
            s.free_blocks.to_string(),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4]);
    writeln!(out, "\nSegments with the most free bytes:")?;
    write_table(out, &t)
}

/// How snapshot `b` differs from `a`, as text.
pub fn diff_text(
    a: &Path,
    b: &Path,
    d: &SnapshotDiff,
    width: u16,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "A: {}", a.display())?;
    writeln!(out, "B: {}", b.display())?;
    let mut t = table(width);
    t.set_header(vec!["", "A", "B", "B − A"]);
    for row in diff_sums(d) {
        t.add_row(row);
    }
    right_align(&mut t, &[1, 2, 3]);
    write_table(out, &t)?;
    if d.changed.is_empty() {
        return writeln!(out, "\nThe same bytes at every call site.");
    }
    writeln!(out, "\nCall sites that changed, growth first:")?;
    let mut t = table(width);
    t.set_header(vec!["call site", "A", "B", "B − A"]);
    for c in d.changed.iter().take(DIFF_ROWS) {
        t.add_row(vec![
            site_cell(&c.site, SITE_COLUMN - 10),
            bytes(c.before_bytes),
            bytes(c.after_bytes),
            signed_bytes(c.delta_bytes),
        ]);
    }
    right_align(&mut t, &[1, 2, 3]);
    write_table(out, &t)?;
    if d.changed.len() > DIFF_ROWS {
        writeln!(
            out,
            "({} more in --format json)",
            d.changed.len() - DIFF_ROWS
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{clip_left, site_cell};

    #[test]
    fn sites_keep_their_file_and_line_when_cut() {
        assert_eq!(clip_left("a/b.py:3 f", 20), "a/b.py:3 f");
        let cut = clip_left("/very/long/path/train.py:40 step", 16);
        assert_eq!(cut, "…rain.py:40 step");
        assert_eq!(cut.chars().count(), 16);
    }

    #[test]
    fn each_frame_of_a_site_keeps_its_file_and_line() {
        let site = "/home/u/project/model/train_loop.py:82 step < /home/u/project/run.py:3 main";
        assert_eq!(
            site_cell(site, 24),
            "…l/train_loop.py:82 step\n< …project/run.py:3 main"
        );
        assert_eq!(site_cell("a.py:1 f", 24), "a.py:1 f");
    }
}
