//! The call sites alive at each run's snapshot peak, side by side: the top sites of either
//! run, each with its bytes in both, from [`snapshot_report`]'s replay of the allocator
//! trace (what was alive when allocated memory peaked).

use std::collections::BTreeMap;
use std::path::Path;

use crate::analysis::snapshot::{snapshot_report, Options};
use crate::model::compare::{Bytes, Pair, PeakSites, SiteChange};
use crate::model::run::{RunRead, SnapshotFile};
use crate::model::snapshot::Snapshot;

/// Sites of each run that are listed; the others of both are left out.
pub const TOP_SITES: usize = 10;

/// Bytes by site at the peak, and the peak's bytes, of one snapshot.
struct Peak {
    bytes: u64,
    by_site: BTreeMap<String, u64>,
    top: Vec<String>,
}

fn peak(path: &Path, snapshot: &Snapshot) -> Option<Peak> {
    let options = Options {
        top: usize::MAX,
        ..Options::default()
    };
    let alive = snapshot_report(snapshot, path.to_path_buf(), &options).peak?;
    Some(Peak {
        bytes: alive.bytes,
        top: alive
            .by_site
            .iter()
            .take(TOP_SITES)
            .map(|s| s.site.clone())
            .collect(),
        by_site: alive
            .by_site
            .into_iter()
            .map(|s| (s.site, s.bytes))
            .collect(),
    })
}

/// The snapshot of `run` that is compared: of those taken at an iteration, the lowest
/// rank's latest.
pub fn compared(run: &RunRead) -> Option<&SnapshotFile> {
    run.snapshots
        .iter()
        .filter_map(|f| {
            let (rank, iteration) = f.taken_at?;
            Some((std::cmp::Reverse(rank.unwrap_or(0)), iteration, f))
        })
        .max_by_key(|(rank, iteration, _)| (*rank, *iteration))
        .map(|(_, _, f)| f)
}

/// The sites at the peaks of `base` and `new`; `None` when neither has a snapshot.
pub fn peak_sites(base: Option<&SnapshotFile>, new: Option<&SnapshotFile>) -> Option<PeakSites> {
    if base.is_none() && new.is_none() {
        return None;
    }
    let of = |side: Option<&SnapshotFile>| side.and_then(|f| peak(&f.path, &f.snapshot));
    let (base, new) = (of(base), of(new));
    let mut names: Vec<&String> = [&base, &new]
        .into_iter()
        .flatten()
        .flat_map(|p| &p.top)
        .collect();
    names.sort_unstable();
    names.dedup();
    let bytes = |side: &Option<Peak>, site: &str| -> Option<Bytes> {
        side.as_ref()
            .map(|p| Bytes(p.by_site.get(site).copied().unwrap_or(0)))
    };
    let mut sites: Vec<SiteChange> = names
        .into_iter()
        .map(|site| SiteChange {
            site: site.clone(),
            bytes: Pair::of(bytes(&base, site), bytes(&new, site)),
        })
        .collect();
    sites.sort_by_key(|s| std::cmp::Reverse((s.bytes.new, s.bytes.base)));
    let total = |side: &Option<Peak>| side.as_ref().map(|p| Bytes(p.bytes));
    Some(PeakSites {
        peak_bytes: Pair::of(total(&base), total(&new)),
        sites,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn the_lowest_ranks_latest_snapshot_is_compared() {
        let file = |name: &str, taken_at| SnapshotFile {
            path: PathBuf::from(name),
            taken_at,
            snapshot: Snapshot::default(),
        };
        let mut run = RunRead {
            path: PathBuf::from("run"),
            sources: None,
            ranks: Vec::new(),
            traces: Vec::new(),
            snapshots: vec![
                file("oom.rank0.20261126_065229.pickle", None),
                file("rank0.iter10.pickle", Some((Some(0), 10))),
                file("rank0.iter30.pickle", Some((Some(0), 30))),
                file("rank1.iter50.pickle", Some((Some(1), 50))),
            ],
            samples: Vec::new(),
            nsys: Vec::new(),
            unreadable: Vec::new(),
        };
        let name = |run: &RunRead| compared(run).map(|f| f.path.clone());
        assert_eq!(name(&run), Some(PathBuf::from("rank0.iter30.pickle")));
        run.snapshots.truncate(1);
        assert_eq!(name(&run), None);
    }
}
