//! Findings of `snapshots/`: each caught out-of-memory error (its report's request,
//! allocated, reserved and categories, with what was alive by call site when the snapshot
//! saved with it is there too), and per allocator snapshot what was alive at its peak and
//! the call sites that accumulate allocations never freed.

use std::path::Path;

use super::evidence::Evidence;
use super::finding::{Anchor, Finding, FindingKind, FindingSource, Severity, Stake};
use super::{file_name, share_of, RunInputs};
use crate::analysis::report::RunReport;
use crate::analysis::snapshot::sites::SiteBytes;
use crate::analysis::snapshot::SnapshotReport;
use crate::model::memory::percent;
use crate::model::oom::OomEvent;
use crate::model::units::{counted, human_bytes};

/// Call sites kept as evidence.
const SITES: usize = 5;

pub(super) fn findings(run: &RunInputs) -> Vec<Finding> {
    let mut out = Vec::new();
    for rank in &run.ranks {
        for event in &rank.oom_events {
            out.push(oom(run, rank, event));
        }
    }
    for report in run.snapshots {
        out.extend(alive_at_peak(report));
        out.extend(never_freed(report));
    }
    out
}

fn oom(run: &RunInputs, report: &RunReport, event: &OomEvent) -> Finding {
    let rank = report.rank;
    let saved = event.snapshot.as_ref();
    let read = saved
        .and_then(|s| s.path.as_deref())
        .and_then(|path| run.snapshots.iter().find(|r| r.path == path));
    let alive_by_site: Option<Vec<SiteBytes>> = read.map(|r| {
        r.ooms.first().map_or_else(
            || r.now.by_site.iter().take(SITES).cloned().collect(),
            |o| o.alive_by_site.iter().take(SITES).cloned().collect(),
        )
    });
    // An error caught after the loop (an evaluation, a final check) is said to be so:
    // the records' own counters, which end before it, say nothing of it.
    let [_, last_record] = report.summary.times;
    let after_loop = event
        .time
        .is_some_and(|t| last_record > 0.0 && t > last_record);
    let mut when = event
        .iteration
        .map_or(String::new(), |i| format!(" at iteration {i}"));
    if after_loop {
        when.push_str(&format!(
            ", after the last memory record (iteration {})",
            report.summary.iterations[1]
        ));
    }
    let mut summary = format!(
        "out of memory{when}: {}",
        event.requested_bytes.map_or_else(
            || "a request failed".to_owned(),
            |r| format!("a {} request failed", human_bytes(r))
        )
    );
    if let Some(memory) = &event.at_error {
        if let (Some(a), Some(r)) = (memory.allocated_bytes, memory.reserved_bytes) {
            summary.push_str(&format!(
                " with {} allocated, {} reserved",
                human_bytes(a),
                human_bytes(r)
            ));
        }
        if let Some((name, bytes)) = memory
            .categories_bytes
            .measured()
            .into_iter()
            .max_by_key(|(_, b)| *b)
        {
            summary.push_str(&format!(" ({name} {})", human_bytes(bytes)));
        }
    }
    if let Some(total) = event.device_total_bytes {
        summary.push_str(&format!(" of the device's {}", human_bytes(total)));
    }
    if event.impossible {
        summary.push_str(
            "; the request is larger than the whole device: a size computed wrong, not \
             memory pressure",
        );
    }
    match (saved, &alive_by_site) {
        (Some(_), Some(sites)) => {
            if let Some(site) = sites.first() {
                summary.push_str(&format!(
                    "; the largest call site alive then: {} ({})",
                    site.site,
                    human_bytes(site.bytes)
                ));
            }
        }
        (Some(s), None) if s.path.is_none() => summary.push_str(&format!(
            "; the snapshot it saved ({}) is not beside the report",
            file_name(Path::new(&s.named))
        )),
        _ => {}
    }
    let next = match saved {
        // What was alive does not explain a request larger than the device.
        _ if event.impossible => format!(
            "the line of the traceback in {} that computes the size",
            file_name(&event.report)
        ),
        Some(s) => match &s.path {
            Some(path) => format!("gpuscope snapshot {}", path.display()),
            None => format!(
                "gpuscope snapshot {} (from the machine that ran it)",
                s.named
            ),
        },
        None => {
            "gpuscope.oom_guard on CUDA saves the allocator snapshot with the report".to_owned()
        }
    };
    let requested = event.requested_bytes.unwrap_or(0);
    Finding {
        source: FindingSource::Snapshot,
        rank: Some(rank),
        kind: FindingKind::Oom,
        severity: Severity::High,
        summary,
        stake: Stake::Bytes {
            value: requested,
            share: share_of(requested, event.device_total_bytes),
        },
        evidence: Evidence::Oom {
            event: event.clone(),
            alive_by_site,
        },
        next,
        anchor: Anchor::Snapshot,
    }
}

fn alive_at_peak(report: &SnapshotReport) -> Option<Finding> {
    let alive = report.peak.as_ref().unwrap_or(&report.now);
    let when = if report.peak.is_some() {
        "at its peak"
    } else {
        "at the dump"
    };
    let by_site: Vec<SiteBytes> = alive.by_site.iter().take(SITES).cloned().collect();
    let top = by_site.first().map_or(String::new(), |s| {
        format!(
            "; the largest call site is {} ({}, {:.0} %)",
            s.site,
            human_bytes(s.bytes),
            percent(s.bytes, alive.bytes)
        )
    });
    Some(Finding {
        source: FindingSource::Snapshot,
        rank: None,
        kind: FindingKind::AliveAtPeak,
        severity: Severity::Info,
        summary: format!(
            "snapshot {}: {} allocated {when}{top}",
            file_name(&report.path),
            human_bytes(alive.bytes)
        ),
        stake: Stake::Bytes {
            value: alive.bytes,
            share: None,
        },
        evidence: Evidence::AliveAtPeak {
            snapshot: report.path.clone(),
            peak_bytes: alive.bytes,
            by_site,
        },
        next: String::new(),
        anchor: Anchor::Snapshot,
    })
}

fn never_freed(report: &SnapshotReport) -> Option<Finding> {
    let sites: Vec<_> = report
        .never_freed
        .iter()
        .filter(|n| n.accumulating)
        .take(SITES)
        .cloned()
        .collect();
    let first = sites.first()?.sums.clone();
    let bytes: u64 = sites.iter().map(|s| s.sums.bytes).sum();
    Some(Finding {
        source: FindingSource::Snapshot,
        rank: None,
        kind: FindingKind::NeverFreed,
        severity: Severity::Medium,
        summary: format!(
            "snapshot {}: {} accumulate allocations never freed ({}); first {} ({})",
            file_name(&report.path),
            counted(sites.len(), "call site"),
            human_bytes(bytes),
            first.site,
            human_bytes(first.bytes)
        ),
        stake: Stake::Bytes {
            value: bytes,
            share: share_of(bytes, Some(report.stats.total.reserved_bytes)),
        },
        evidence: Evidence::NeverFreed {
            snapshot: report.path.clone(),
            sites,
        },
        next: format!(
            "the code at {}: tensors kept across iterations (a list, a cache, a loss kept \
             with its graph)",
            first.site
        ),
        anchor: Anchor::Snapshot,
    })
}
