//! Two snapshots compared: what grew and what shrank between them, by call site, from
//! the blocks alive at each dump.

use std::collections::BTreeMap;

use serde::Serialize;

use super::report::alive_now;
use super::sites::Sites;
use super::stats::{stats, Sums};
use crate::model::snapshot::Snapshot;

/// One site's bytes in both snapshots.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SiteChange {
    /// The site.
    pub site: String,
    /// Bytes alive at the first dump.
    pub before_bytes: u64,
    /// Bytes alive at the second.
    pub after_bytes: u64,
    /// after − before.
    pub delta_bytes: i64,
    /// Allocations at the first dump.
    pub before_count: u64,
    /// Allocations at the second.
    pub after_count: u64,
}

/// The comparison.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SnapshotDiff {
    /// The first snapshot's sums.
    pub before: Sums,
    /// The second's.
    pub after: Sums,
    /// Sites whose bytes changed, largest growth first, then the largest shrinking.
    pub changed: Vec<SiteChange>,
    /// Sites with the same bytes in both.
    pub unchanged_sites: usize,
}

/// Compares `before` with `after`; `frames` user frames name a site.
pub fn diff(before: &Snapshot, after: &Snapshot, frames: usize) -> SnapshotDiff {
    let mut sites: BTreeMap<String, [(u64, u64); 2]> = BTreeMap::new();
    for (k, snapshot) in [before, after].into_iter().enumerate() {
        let mut names = Sites::new(&snapshot.stacks, frames);
        for s in alive_now(snapshot, &mut names) {
            sites.entry(s.site).or_default()[k] = (s.bytes, s.count);
        }
    }
    let (mut changed, mut unchanged_sites) = (Vec::new(), 0);
    for (site, [(b, bc), (a, ac)]) in sites {
        if a == b {
            unchanged_sites += 1;
            continue;
        }
        changed.push(SiteChange {
            site,
            before_bytes: b,
            after_bytes: a,
            delta_bytes: a as i64 - b as i64,
            before_count: bc,
            after_count: ac,
        });
    }
    changed.sort_by(|x, y| {
        (y.delta_bytes > 0)
            .cmp(&(x.delta_bytes > 0))
            .then(y.delta_bytes.abs().cmp(&x.delta_bytes.abs()))
            .then_with(|| x.site.cmp(&y.site))
    });
    SnapshotDiff {
        before: stats(before).total,
        after: stats(after).total,
        changed,
        unchanged_sites,
    }
}
