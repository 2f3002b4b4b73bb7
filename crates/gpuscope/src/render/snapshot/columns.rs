//! A snapshot's tables as columns, for `gpuscope.Snapshot` in a notebook: its segments
//! and blocks (the state at the dump, each block named by its call site), and the
//! report's answers by call site — what was alive at the peak and now, what was never
//! freed, what churned, the out-of-memory events, the timeline by site.

use std::collections::BTreeMap;

use serde_json::json;

use crate::analysis::snapshot::sites::Sites;
use crate::analysis::snapshot::SnapshotReport;
use crate::model::snapshot::Snapshot;
use crate::render::columns::Columns;

/// The tables of `snapshot` and its `report` (sites of up to `frames` frames), by name:
/// `segments`, `blocks`, `alive_at_peak`, `alive_now`, `never_freed`, `churn`, `ooms`,
/// `timeline` (one row per moment and site; `x` is ms since the first entry, or the
/// entry's index without times; several moments may share a millisecond).
pub fn snapshot_tables(
    snapshot: &Snapshot,
    report: &SnapshotReport,
    frames: usize,
) -> BTreeMap<&'static str, Columns> {
    let mut sites = Sites::new(&snapshot.stacks, frames);
    let mut t: BTreeMap<&'static str, Columns> = BTreeMap::new();
    let segments = t.entry("segments").or_default();
    for s in &snapshot.segments {
        segments.push(
            json!({
                "device": s.device, "address": s.address, "total_size": s.total_size,
                "allocated_size": s.allocated_size, "active_size": s.active_size,
                "requested_size": s.requested_size, "stream": s.stream,
                "segment_type": s.segment_type, "expandable": s.expandable,
                "blocks": s.blocks.len(), "site": sites.of(s.stack),
            }),
            &[],
        );
    }
    let blocks = t.entry("blocks").or_default();
    for s in &snapshot.segments {
        for b in &s.blocks {
            blocks.push(
                json!({
                    "device": s.device, "segment_address": s.address, "address": b.address,
                    "size": b.size, "requested_size": b.requested_size,
                    "state": b.state.as_str(), "site": sites.of(b.stack),
                }),
                &[],
            );
        }
    }
    if let Some(peak) = &report.peak {
        t.entry("alive_at_peak")
            .or_default()
            .extend(&peak.by_site, &[]);
    }
    t.entry("alive_now")
        .or_default()
        .extend(&report.now.by_site, &[]);
    t.entry("never_freed")
        .or_default()
        .extend(&report.never_freed, &[]);
    t.entry("churn").or_default().extend(&report.churn, &[]);
    t.entry("ooms")
        .or_default()
        .extend(&report.ooms, &["at_error"]);
    if let Some(stacked) = &report.stacked {
        let timeline = t.entry("timeline").or_default();
        for series in &stacked.series {
            for (moment, (x, bytes)) in stacked.x.iter().zip(&series.bytes).enumerate() {
                let row = json!({"moment": moment, "x": x, "site": series.site, "bytes": bytes});
                timeline.push(row, &[]);
            }
        }
    }
    t
}
