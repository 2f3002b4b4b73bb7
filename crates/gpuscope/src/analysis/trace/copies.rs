//! GPU memory copies and memsets by direction: count, bytes, time and the bandwidth they
//! achieved; copies from pageable host memory are singled out (profiling guides: the host side
//! must be staged through a pinned buffer first, so the copy is slower and cannot overlap
//! compute — `pin_memory=True` and `non_blocking=True` fix it).

use std::collections::BTreeMap;

use serde::Serialize;

use super::scope::Scope;
use crate::model::trace::{Kind, Trace, NONE};

/// Least share of the bytes copied between host and device that copies from or to
/// pageable memory must move before pinning is worth advising: below it they are a few
/// small transfers (a scalar read back, a flag), whose staging costs nothing that shows.
pub const PAGEABLE_SHARE_PERCENT: f64 = 10.0;

/// The copies of one direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopyKind {
    /// `HtoD`, `DtoH`, `DtoD`, `PtoP`, `Memset`, ...
    pub direction: String,
    /// How many.
    pub count: u64,
    /// Bytes moved (or set).
    pub bytes: u64,
    /// Time on the GPU, µs.
    pub time_us: f64,
    /// Bytes over time, GB/s (10^9 bytes).
    pub gb_per_s: f64,
    /// Copies from or to pageable host memory.
    pub pageable_count: u64,
    /// Their bytes.
    pub pageable_bytes: u64,
}

/// `Memcpy HtoD (Pageable -> Device)` → `HtoD`; a memset → `Memset`.
fn direction(kind: Kind, name: &str) -> String {
    if kind == Kind::Memset {
        return "Memset".into();
    }
    name.strip_prefix("Memcpy ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or("other")
        .to_owned()
}

/// Copies and memsets by direction.
pub fn copies(trace: &Trace, scope: &Scope) -> Vec<CopyKind> {
    let e = &trace.events;
    let mut by: BTreeMap<String, CopyKind> = BTreeMap::new();
    for &i in &scope.gpu {
        if !matches!(e.kind[i], Kind::Memcpy | Kind::Memset) {
            continue;
        }
        let name = trace.names.get(e.name[i]);
        let dir = direction(e.kind[i], name);
        let row = by.entry(dir.clone()).or_insert_with(|| CopyKind {
            direction: dir,
            count: 0,
            bytes: 0,
            time_us: 0.0,
            gb_per_s: 0.0,
            pageable_count: 0,
            pageable_bytes: 0,
        });
        let bytes = if e.bytes[i] == NONE {
            0
        } else {
            e.bytes[i].max(0) as u64
        };
        row.count += 1;
        row.bytes += bytes;
        row.time_us += e.dur[i] as f64 / 1000.0;
        if name.contains("Pageable") {
            row.pageable_count += 1;
            row.pageable_bytes += bytes;
        }
    }
    by.into_values()
        .map(|mut row| {
            row.gb_per_s = if row.time_us > 0.0 {
                row.bytes as f64 / (row.time_us * 1000.0)
            } else {
                0.0
            };
            row
        })
        .collect()
}

/// Copies from or to pageable host memory, in all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pageable {
    /// How many.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Their share of the bytes copied between host and device, percent.
    pub share_percent: f64,
}

impl Pageable {
    /// Whether they move enough for pinning to be worth advising
    /// ([`PAGEABLE_SHARE_PERCENT`]).
    pub fn worth_pinning(&self) -> bool {
        self.share_percent >= PAGEABLE_SHARE_PERCENT
    }
}

/// The copies from or to pageable host memory; `None` without any.
pub fn pageable(copies: &[CopyKind]) -> Option<Pageable> {
    let count: u64 = copies.iter().map(|c| c.pageable_count).sum();
    if count == 0 {
        return None;
    }
    let host_rows = || {
        copies
            .iter()
            .filter(|c| matches!(c.direction.as_str(), "HtoD" | "DtoH"))
    };
    let bytes: u64 = host_rows().map(|c| c.pageable_bytes).sum();
    let host: u64 = host_rows().map(|c| c.bytes).sum();
    let share = if host > 0 {
        bytes as f64 * 100.0 / host as f64
    } else {
        100.0
    };
    Some(Pageable {
        count,
        bytes,
        share_percent: share,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(direction: &str, bytes: u64, pageable_bytes: u64) -> CopyKind {
        CopyKind {
            direction: direction.into(),
            count: 2,
            bytes,
            time_us: 1.0,
            gb_per_s: 1.0,
            pageable_count: u64::from(pageable_bytes > 0),
            pageable_bytes,
        }
    }

    #[test]
    fn the_pageable_share_is_of_the_host_device_bytes() {
        // Device-to-device bytes do not dilute the share.
        let rows = [
            row("DtoD", 1 << 40, 0),
            row("HtoD", 800, 200),
            row("DtoH", 200, 0),
        ];
        let p = pageable(&rows).unwrap();
        assert_eq!((p.count, p.bytes, p.share_percent), (1, 200, 20.0));
        assert!(p.worth_pinning());
        assert_eq!(pageable(&[row("HtoD", 800, 0)]), None);
    }
}
