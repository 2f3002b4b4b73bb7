//! The call sites alive at each run's snapshot peak, side by side: the top sites of either
//! run, each with its bytes in both, from [`snapshot_report`]'s replay of the allocator
//! trace (what was alive when allocated memory peaked).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::analysis::snapshot::{snapshot_report, Options};
use crate::model::compare::{Bytes, Pair, PeakSites, SiteChange};
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

/// The sites at the peaks of `base` and `new`; `None` when neither has a snapshot.
pub fn peak_sites(
    base: Option<&(PathBuf, Snapshot)>,
    new: Option<&(PathBuf, Snapshot)>,
) -> Option<PeakSites> {
    if base.is_none() && new.is_none() {
        return None;
    }
    let of = |side: Option<&(PathBuf, Snapshot)>| side.and_then(|(p, s)| peak(p, s));
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
