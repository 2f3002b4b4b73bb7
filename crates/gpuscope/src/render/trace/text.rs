//! `gpuscope trace` as text for an 80-column terminal: the trace health; per rank the GPU
//! time breakdown, steps, gaps, memory, operators, idle time, launches and copies; the
//! ranks side by side; and the text of `--diff`.

use super::{memory_summary, stream_label};
use crate::analysis::trace::copies::pageable;
use crate::analysis::trace::diff::TraceDiff;
use crate::analysis::trace::health::{HealthIssue, HealthKind};
use crate::analysis::trace::launches::LaunchStats;
use crate::analysis::trace::operators::{GpuLink, OperatorStats};
use crate::analysis::trace::ranks::RankComparison;
use crate::analysis::trace::report::RankReport;
use crate::analysis::trace::steps::Category;
use crate::model::trace::file_name;
use crate::model::units::{counted, human_bytes};
use crate::render::short_names::{bare_name, clip};
use crate::render::units::{figure, ByteUnit};
use crate::render::{duration_text, paragraph, right_align, table, unbroken, write_table};
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

/// The difference of `b` from `a` as text.
pub fn diff_text(
    a: &Path,
    b: &Path,
    diff: &TraceDiff,
    width: u16,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "A: {}", a.display())?;
    writeln!(out, "B: {}", b.display())?;
    for (what, d) in [
        ("GPU kernels", &diff.kernels),
        ("CPU operators", &diff.operators),
    ] {
        writeln!(out)?;
        writeln!(
            out,
            "{what}: {:.1} ms in A, {:.1} ms in B",
            d.total_a_us / 1000.0,
            d.total_b_us / 1000.0
        )?;
        let tables = [
            ("slower in B", &d.slower),
            ("faster in B", &d.faster),
            ("only in B", &d.added),
            ("only in A", &d.removed),
        ];
        // Numbered across the tables: a kernel only in A and another only in B may read
        // alike too.
        let all = tables.iter().flat_map(|(_, rows)| rows.iter());
        let labels = labels(all.map(|c| c.name.as_str()), NAME_COLUMN - 4);
        let mut labels_left = labels.as_slice();
        for (title, rows) in tables {
            let (these, rest) = labels_left.split_at(rows.len());
            labels_left = rest;
            if rows.is_empty() {
                continue;
            }
            let mut t = table(width);
            t.set_header([title, "n A", "ms A", "n B", "ms B", "Δ ms"]);
            for (c, label) in rows.iter().zip(these) {
                t.add_row([
                    label.clone(),
                    c.count_a.to_string(),
                    format!("{:.2}", c.total_a_us / 1000.0),
                    c.count_b.to_string(),
                    format!("{:.2}", c.total_b_us / 1000.0),
                    format!("{:+.2}", c.change_us / 1000.0),
                ]);
            }
            right_align(&mut t, &[1, 2, 3, 4, 5]);
            write_table(out, &t)?;
        }
        alike_note(out, &labels, width)?;
    }
    Ok(())
}

/// The ranks side by side, and the stragglers.
pub fn ranks_text(c: &RankComparison, width: u16, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "Ranks side by side")?;
    let mut t = table(width);
    t.set_header(["rank", "step ms", "compute ms", "comm ms", "idle ms"]);
    for r in &c.ranks {
        t.add_row([
            r.rank.to_string(),
            r.mean_step_us
                .map_or("-".into(), |us| format!("{:.1}", us / 1000.0)),
            format!("{:.1}", r.compute_us / 1000.0),
            format!("{:.1}", r.communication_us / 1000.0),
            format!("{:.1}", r.idle_us / 1000.0),
        ]);
    }
    right_align(&mut t, &[0, 1, 2, 3, 4]);
    write_table(out, &t)?;
    for s in &c.stragglers {
        let line = format!(
            "Straggler: rank {} computes {:.0} % longer than the ranks' median; the others \
             wait for it in their collectives.",
            s.rank, s.compute_over_median_percent
        );
        paragraph(out, &line, width)?;
    }
    if c.stragglers.is_empty() {
        writeln!(
            out,
            "No straggler: no rank computes 5 % longer than the median."
        )?;
    }
    writeln!(out)
}

/// Operators and gaps named in [`summary`].
const SUMMARY_ITEMS: usize = 3;

/// A few lines on one rank for a training log: GPU idle, the mean step's split and
/// verdicts, the top operators by self time, the largest gap. `gpuscope trace` has the rest.
pub fn summary(r: &RankReport, width: u16, out: &mut dyn Write) -> io::Result<()> {
    let name = file_name(&r.path);
    let gpu = match &r.temporal {
        Some(t) => format!(
            "GPU busy {:.1} ms, idle {:.1} % of it",
            t.kernel_time_us / 1000.0,
            t.idle_time_percent
        ),
        None => "no GPU activity (CPU only)".to_owned(),
    };
    paragraph(
        out,
        &format!("gpuscope: {name}: {} events, {gpu}", r.events),
        width,
    )?;
    if let Some(s) = &r.steps {
        let split: Vec<String> = Category::ALL
            .iter()
            .zip(&s.mean.breakdown_us)
            .filter(|(_, &us)| us > 0.0 && s.mean.duration_us > 0.0)
            .map(|(c, us)| format!("{c} {:.0} %", us * 100.0 / s.mean.duration_us))
            .collect();
        paragraph(
            out,
            &format!(
                "  {} steps, mean {:.2} ms: {}",
                s.steps.len(),
                s.mean.duration_us / 1000.0,
                split.join(", ")
            ),
            width,
        )?;
        for v in &s.verdicts {
            paragraph(out, &format!("  {}: {}", v.kind, v.advice), width)?;
        }
    }
    // Profiler step ranges are listed as operators, as key_averages lists them; here they
    // would only repeat the step line.
    let ops: Vec<String> = r
        .operators
        .by_self_time
        .iter()
        .filter(|o| !o.name.starts_with("ProfilerStep#"))
        .take(SUMMARY_ITEMS)
        .map(|o| format!("{} {:.2} ms", unbroken(&o.name), o.self_us / 1000.0))
        .collect();
    if !ops.is_empty() {
        paragraph(
            out,
            &format!("  top CPU ops (self): {}", ops.join(", ")),
            width,
        )?;
    }
    if let Some(g) = r.largest_gaps.first() {
        let during = g.cpu.first().map_or(String::new(), |c| {
            format!(" while the CPU ran {}", unbroken(&c.name))
        });
        paragraph(
            out,
            &format!("  largest GPU gap {:.2} ms{during}", g.duration_us / 1000.0),
            width,
        )?;
    }
    Ok(())
}

/// The trace health block: an issue of several ranks once, naming them, with the first
/// one's figures when theirs differ (the JSON has every rank's); one line when there is
/// none.
pub fn health_text(issues: &[HealthIssue], width: u16, out: &mut dyn Write) -> io::Result<()> {
    if issues.is_empty() {
        writeln!(
            out,
            "Trace health: nothing found that makes these figures incomplete."
        )?;
        return writeln!(out);
    }
    writeln!(out, "Trace health")?;
    // Issues of one kind are said once, with the first one's figures; a kind whose count
    // is 0 for some traces says another thing there ("no ProfilerStep" against "one
    // profiler step", Kineto's losses without a dropped kernel): a message of its own.
    let wording = |i: &HealthIssue| (i.kind, i.count == 0);
    let mut said: Vec<(HealthKind, bool)> = Vec::new();
    for issue in issues {
        let Some(rank) = issue.rank else {
            paragraph(out, &format!("  {}: {}", issue.kind, issue.detail), width)?;
            continue;
        };
        let message = wording(issue);
        if said.contains(&message) {
            continue;
        }
        let these: Vec<&HealthIssue> = issues
            .iter()
            .filter(|i| i.rank.is_some() && wording(i) == message)
            .collect();
        said.push(message);
        let mut ranks: Vec<u32> = these.iter().filter_map(|i| i.rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        let named: Vec<String> = ranks.iter().take(4).map(|r| r.to_string()).collect();
        let mut who = match ranks.len() {
            1 => format!("rank {rank}"),
            n if n > 4 => format!("ranks {}, and {} more", named[..3].join(", "), n - 3),
            _ => format!("ranks {}", named.join(", ")),
        };
        // Traces without rank metadata all read as rank 0: count the traces instead.
        let first = if ranks.len() < these.len() {
            who = format!("{}, {who}", counted(these.len(), "trace"));
            "the first one's figures".to_owned()
        } else {
            format!("rank {rank}'s figures")
        };
        if these.iter().any(|i| i.detail != issue.detail) {
            who.push_str(&format!("; {first}"));
        }
        paragraph(
            out,
            &format!("  {} ({who}): {}", issue.kind, issue.detail),
            width,
        )?;
    }
    writeln!(out)
}

/// The text report in `width` columns.
pub fn text(ranks: &[RankReport], width: u16, out: &mut dyn Write) -> io::Result<()> {
    for r in ranks {
        paragraph(
            out,
            &format!("rank {} — {}", r.rank, r.path.display()),
            width,
        )?;
        for (why, count) in &r.dropped {
            writeln!(out, "  {count} events skipped: {why}")?;
        }
        let Some(t) = &r.temporal else {
            writeln!(
                out,
                "  No GPU activity in this trace ({} events, all on the CPU).",
                r.events
            )?;
            writeln!(out)?;
            steps(out, r, width)?;
            operators(out, r, width)?;
            memory(out, r, width)?;
            continue;
        };
        if r.counter_ranges > 0 {
            let line = format!(
                "  {} kernels were recorded by CUPTI's range profiler, which replays each \
                 kernel to read hardware counters: their times are the replays', not the \
                 run's.",
                r.counter_ranges
            );
            paragraph(out, &line, width)?;
        }
        if let Some(step) = &r.last_step_left_out {
            let line = format!(
                "  The last profiler step ({step}) is left out of the GPU views below, as \
                 HTA does: the profiler's stop may cut it short (the step table lists \
                 every step)."
            );
            paragraph(out, &line, width)?;
        }
        for note in &r.notes {
            paragraph(out, &format!("  {note}"), width)?;
        }
        writeln!(out)?;
        writeln!(out, "GPU time (temporal breakdown)")?;
        let mut tt = table(width);
        tt.set_header(["", "µs", "%"]);
        for (name, us, pct) in [
            ("kernel time (span)", t.kernel_time_us, 100.0),
            ("idle", t.idle_time_us, t.idle_time_percent),
            ("compute", t.compute_time_us, t.compute_time_percent),
            (
                "non-compute",
                t.non_compute_time_us,
                t.non_compute_time_percent,
            ),
        ] {
            tt.add_row([name.to_owned(), format!("{us:.1}"), format!("{pct:.2}")]);
        }
        right_align(&mut tt, &[1, 2]);
        write_table(out, &tt)?;
        writeln!(out)?;
        writeln!(out, "Kernel types")?;
        let mut kt = table(width);
        kt.set_header(["type", "µs", "%"]);
        for k in &r.kernel_types {
            kt.add_row([
                k.kernel_type.clone(),
                format!("{:.1}", k.sum_us),
                format!("{:.1}", k.percentage),
            ]);
        }
        right_align(&mut kt, &[1, 2]);
        write_table(out, &kt)?;
        writeln!(out)?;
        writeln!(out, "Top kernels by total time")?;
        let mut top = table(width);
        top.set_header(["kernel", "n", "total µs", "mean", "max", "%"]);
        let labels = labels(r.top_kernels.iter().map(|k| k.name.as_str()), NAME_COLUMN);
        for (k, label) in r.top_kernels.iter().zip(&labels) {
            top.add_row([
                label.clone(),
                k.count.to_string(),
                format!("{:.1}", k.sum_us),
                format!("{:.1}", k.mean_us),
                format!("{:.1}", k.max_us),
                format!("{:.1}", k.percentage),
            ]);
        }
        right_align(&mut top, &[1, 2, 3, 4, 5]);
        write_table(out, &top)?;
        alike_note(out, &labels, width)?;
        writeln!(out)?;
        idle(out, r, width)?;
        launches(out, r, width)?;
        copies(out, r, width)?;
        steps(out, r, width)?;
        gaps(out, r, width)?;
        operators(out, r, width)?;
        memory(out, r, width)?;
    }
    Ok(())
}

fn gaps(out: &mut dyn Write, r: &RankReport, width: u16) -> io::Result<()> {
    if r.largest_gaps.is_empty() {
        return Ok(());
    }
    writeln!(out, "Largest GPU gaps, and what the CPU was doing")?;
    for g in &r.largest_gaps {
        let doing: Vec<String> = g
            .cpu
            .iter()
            .map(|c| format!("{} ({})", unbroken(&c.name), duration_text(c.overlap_us)))
            .collect();
        let doing = if doing.is_empty() {
            "nothing recorded".to_owned()
        } else {
            doing.join("; ")
        };
        let line = format!(
            "  {:>10} at {}: {doing}",
            duration_text(g.duration_us),
            duration_text(g.start_us)
        );
        paragraph(out, &line, width)?;
    }
    writeln!(out)
}

fn memory(out: &mut dyn Write, r: &RankReport, width: u16) -> io::Result<()> {
    for m in &r.memory {
        let line = format!(
            "Memory on {} ({} events): {}",
            m.device,
            m.events,
            memory_summary(m)
        );
        paragraph(out, &line, width)?;
        let mut t = table(width);
        t.set_header(["allocated most by the peak", "MB"]);
        for a in &m.top_allocators {
            t.add_row([
                clip(&a.name, NAME_COLUMN + 8),
                figure(a.net_bytes as f64, ByteUnit::Mib, 1),
            ]);
        }
        right_align(&mut t, &[1]);
        write_table(out, &t)?;
        writeln!(out)?;
    }
    Ok(())
}

fn operators(out: &mut dyn Write, r: &RankReport, width: u16) -> io::Result<()> {
    let o = &r.operators;
    let tables: [(&str, &[OperatorStats]); 3] = [
        ("CPU operators by self time", &o.by_self_time),
        (
            "CPU operators by the GPU time they launched",
            &o.by_gpu_time,
        ),
        ("CPU operators by input shapes (total time)", &o.by_shapes),
    ];
    for (title, rows) in tables {
        if rows.is_empty() {
            continue;
        }
        writeln!(out, "{title}")?;
        let mut t = table(width);
        t.set_header(["operator", "n", "self ms", "total ms", "GPU ms"]);
        for s in rows {
            let name = match &s.input_shapes {
                Some(shapes) => format!("{} {shapes}", s.name),
                None => s.name.clone(),
            };
            t.add_row([
                clip(&name, NAME_COLUMN + 8),
                s.count.to_string(),
                format!("{:.2}", s.self_us / 1000.0),
                format!("{:.2}", s.total_us / 1000.0),
                s.gpu_us
                    .map_or_else(|| "?".to_owned(), |us| format!("{:.2}", us / 1000.0)),
            ]);
        }
        right_align(&mut t, &[1, 2, 3, 4]);
        write_table(out, &t)?;
        writeln!(out)?;
    }
    let note = match o.gpu_time_linked_by {
        None => Some(
            "GPU ms ?: no GPU work of this trace carries an operator's External id, and no \
             launch of it is inside an operator on a recorded thread, so the GPU time each \
             operator launched is not known.",
        ),
        Some(GpuLink::Enclosure) => Some(
            "GPU ms: each kernel, copy and memset is credited to the innermost operator \
             running its launch call (this trace's External ids are not operators').",
        ),
        Some(GpuLink::ExternalId) => None,
    };
    if let Some(note) = note {
        paragraph(out, note, width)?;
        writeln!(out)?;
    }
    if let Some(g) = &o.graph_replays {
        paragraph(out, &g.note(), width)?;
        writeln!(out)?;
    }
    Ok(())
}

fn idle(out: &mut dyn Write, r: &RankReport, width: u16) -> io::Result<()> {
    if r.idle_by_stream.is_empty() {
        return Ok(());
    }
    writeln!(out, "Idle time by stream (µs)")?;
    let mut t = table(width);
    t.set_header(["stream", "host wait", "kernel wait", "other", "host wait %"]);
    for s in &r.idle_by_stream {
        let total = s.total_us();
        let share = if total > 0.0 {
            s.host_wait_us * 100.0 / total
        } else {
            0.0
        };
        t.add_row([
            stream_label(s.stream),
            format!("{:.1}", s.host_wait_us),
            format!("{:.1}", s.kernel_wait_us),
            format!("{:.1}", s.other_us),
            format!("{share:.0}"),
        ]);
    }
    right_align(&mut t, &[0, 1, 2, 3, 4]);
    write_table(out, &t)?;
    if let Some(p) = r.comm_comp_overlap_percent {
        writeln!(out, "Communication hidden under computation: {p:.1} %")?;
    }
    writeln!(out)
}

fn launches(out: &mut dyn Write, r: &RankReport, width: u16) -> io::Result<()> {
    if r.launches.is_none() && r.graph_replays.is_none() {
        return Ok(());
    }
    if let Some(l) = &r.launches {
        launch_stats(out, r, l, width)?;
    }
    if let Some(g) = &r.graph_replays {
        paragraph(out, &g.unpaired_note(), width)?;
    }
    writeln!(out)
}

fn launch_stats(
    out: &mut dyn Write,
    r: &RankReport,
    l: &LaunchStats,
    width: u16,
) -> io::Result<()> {
    writeln!(out, "Kernel launches ({})", l.count)?;
    let mut t = table(width);
    t.set_header(["µs", "mean", "median", "p95", "max"]);
    for (name, d) in [
        ("launch call (CPU)", &l.cpu_duration),
        ("work (GPU)", &l.gpu_duration),
        ("launch delay", &l.launch_delay),
    ] {
        t.add_row([
            name.to_owned(),
            format!("{:.1}", d.mean_us),
            format!("{:.1}", d.p50_us),
            format!("{:.1}", d.p95_us),
            format!("{:.1}", d.max_us),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4]);
    write_table(out, &t)?;
    for q in &r.queue_by_stream {
        writeln!(
            out,
            "Stream {} queue: {:.1} launched kernels waiting on average, {} at most.",
            q.stream, q.mean, q.max
        )?;
    }
    if l.shorter_than_launch > 0 {
        let line = format!(
            "{} ({:.0} %) ran shorter on the GPU than their launch call on the CPU.",
            counted(l.shorter_than_launch, "launch"),
            l.shorter_than_launch_percent
        );
        paragraph(out, &line, width)?;
    }
    if r.launch_bound {
        paragraph(
            out,
            "Launch-bound: most work is shorter than its launch and the queues stay short, \
             so the GPU waits for the CPU to launch — CUDA graphs or torch.compile fuse and \
             batch the launches.",
            width,
        )?;
    }
    Ok(())
}

fn copies(out: &mut dyn Write, r: &RankReport, width: u16) -> io::Result<()> {
    if r.copies.is_empty() {
        return Ok(());
    }
    writeln!(out, "Copies and memsets")?;
    let mut t = table(width);
    t.set_header(["direction", "count", "MB", "µs", "GB/s", "pageable"]);
    for c in &r.copies {
        t.add_row([
            c.direction.clone(),
            c.count.to_string(),
            figure(c.bytes as f64, ByteUnit::DecimalMb, 1),
            format!("{:.1}", c.time_us),
            format!("{:.1}", c.gb_per_s),
            c.pageable_count.to_string(),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5]);
    write_table(out, &t)?;
    if let Some(p) = pageable(&r.copies) {
        let what = format!(
            "{} ({}, {:.1} % of the bytes copied between host and device) use pageable \
             host memory",
            counted(p.count as usize, "copy"),
            human_bytes(p.bytes),
            p.share_percent
        );
        let line = if p.worth_pinning() {
            format!(
                "{what}: they are staged through a pinned buffer and cannot overlap compute \
                 — pin_memory=True in the DataLoader (or tensor.pin_memory()) and \
                 .to(device, non_blocking=True)."
            )
        } else {
            format!("{what}: too little to be worth pinning.")
        };
        paragraph(out, &line, width)?;
    }
    writeln!(out)
}

fn steps(out: &mut dyn Write, r: &RankReport, width: u16) -> io::Result<()> {
    let Some(o) = &r.steps else {
        return Ok(());
    };
    writeln!(out, "Steps (% of each step)")?;
    let mut t = table(width);
    t.set_header([
        "step", "ms", "kernel", "memcpy", "comm", "runtime", "loader", "cpu", "other",
    ]);
    for s in o.steps.iter().chain([&o.mean]) {
        t.add_row([
            s.name.trim_start_matches("ProfilerStep").to_owned(),
            format!("{:.1}", s.duration_us / 1000.0),
            format!("{:.0}", s.percent(Category::Kernel)),
            format!(
                "{:.0}",
                s.percent(Category::Memcpy) + s.percent(Category::Memset)
            ),
            format!("{:.0}", s.percent(Category::Communication)),
            format!("{:.0}", s.percent(Category::Runtime)),
            format!("{:.0}", s.percent(Category::Dataloader)),
            format!("{:.0}", s.percent(Category::CpuExec)),
            format!("{:.0}", s.percent(Category::Other)),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5, 6, 7, 8]);
    write_table(out, &t)?;
    if let Some(note) = o.graph_note() {
        paragraph(out, &note, width)?;
    }
    for v in &o.verdicts {
        paragraph(out, &format!("Verdict: {}", v.advice), width)?;
    }
    if o.verdicts.is_empty() {
        writeln!(out, "Verdict: nothing stands out in the steps.")?;
    }
    writeln!(out)
}

/// Names for a table column `width` wide: shortened ([`bare_name`]) and clipped, and
/// numbered ` (1)`, ` (2)`, ... where several would read alike (instantiations of one
/// template, names that differ only past the cut).
fn labels<'a>(names: impl Iterator<Item = &'a str>, width: usize) -> Vec<String> {
    let short: Vec<String> = names.map(bare_name).collect();
    let plain: Vec<String> = short.iter().map(|s| clip(s, width)).collect();
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for label in &plain {
        *uses.entry(label).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    plain
        .iter()
        .zip(&short)
        .map(|(label, short)| {
            if uses[label.as_str()] == 1 {
                return label.clone();
            }
            let n = seen.entry(label).or_default();
            *n += 1;
            let number = format!(" ({n})");
            format!("{}{number}", clip(short, width - number.len()))
        })
        .collect()
}

/// The line under a table whose names [`labels`] numbered.
fn alike_note(out: &mut dyn Write, labels: &[String], width: u16) -> io::Result<()> {
    if labels.iter().any(|l| l.ends_with(" (1)")) {
        paragraph(
            out,
            "(1), (2), ...: different kernels whose names read alike here; --format json has \
             their full names.",
            width,
        )?;
    }
    Ok(())
}

/// Widest kernel name in the text table; the JSON has the full names.
const NAME_COLUMN: usize = 32;

#[cfg(test)]
mod tests {
    use super::labels;

    #[test]
    fn names_that_read_alike_are_numbered() {
        let names = [
            "void implicit_convolve_sgemm<float, 1024>(int)",
            "void other_kernel(int)",
            "void implicit_convolve_sgemm<float, 128>(int)",
            "at::native::vectorized_elementwise_kernel_a",
            "at::native::vectorized_elementwise_kernel_b",
        ];
        assert_eq!(
            labels(names.into_iter(), 24),
            [
                "implicit_convolve_s… (1)",
                "other_kernel",
                "implicit_convolve_s… (2)",
                "at::native::vectori… (1)",
                "at::native::vectori… (2)",
            ]
        );
        assert_eq!(labels(["a", "b"].into_iter(), 24), ["a", "b"]);
    }
}
