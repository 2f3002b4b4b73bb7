//! The spread between the ranks of one run: for each figure, the lowest and highest rank
//! and how far apart they are. Ranks of a data-parallel job should look alike; one that
//! holds much more memory is the one that will run out first (uneven batches, rank-0-only
//! work such as logging or evaluation, a leak in one process).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::memory::MemoryRecord;

/// One figure across ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    /// The lowest value.
    pub min_bytes: u64,
    /// The rank that has it.
    pub min_rank: u32,
    /// The highest value.
    pub max_bytes: u64,
    /// The rank that has it.
    pub max_rank: u32,
    /// `(max − min) / max`, in percent.
    pub spread_percent: f64,
}

/// The ranks of one run compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankSpread {
    /// The run.
    pub path: String,
    /// Its ranks.
    pub ranks: Vec<u32>,
    /// Figures by name: `peak_allocated`, `end_allocated`, `end_reserved`, `peak_census`,
    /// `end_census` and `end_<category>`.
    pub figures: BTreeMap<String, Spread>,
}

/// The spread between `ranks` (rank, records ordered by iteration) of the run at `path`;
/// `None` for fewer than two ranks with records.
pub fn spread(path: &str, ranks: &[(u32, &[MemoryRecord])]) -> Option<RankSpread> {
    let ranks: Vec<(u32, &[MemoryRecord])> = ranks
        .iter()
        .filter(|(_, records)| !records.is_empty())
        .copied()
        .collect();
    if ranks.len() < 2 {
        return None;
    }
    let mut values: BTreeMap<String, Vec<(u32, u64)>> = BTreeMap::new();
    for (rank, records) in &ranks {
        for (name, bytes) in figures(records) {
            values.entry(name).or_default().push((*rank, bytes));
        }
    }
    Some(RankSpread {
        path: path.to_owned(),
        ranks: ranks.iter().map(|(rank, _)| *rank).collect(),
        figures: values
            .into_iter()
            .filter(|(_, v)| v.len() >= 2)
            .map(|(name, v)| (name, spread_of(&v)))
            .collect(),
    })
}

fn figures(records: &[MemoryRecord]) -> Vec<(String, u64)> {
    let last = records
        .last()
        .expect("ranks without records are filtered out");
    let mut out = vec![
        (
            "peak_census".to_owned(),
            records.iter().map(|r| r.census_bytes).max().unwrap_or(0),
        ),
        ("end_census".to_owned(), last.census_bytes),
    ];
    let peak_allocated = records
        .iter()
        .filter_map(|r| {
            let a = r.allocator.as_ref()?;
            Some(a.peak_allocated_bytes.max(a.allocated_bytes))
        })
        .max();
    out.extend(peak_allocated.map(|b| ("peak_allocated".to_owned(), b)));
    if let Some(a) = &last.allocator {
        out.push(("end_allocated".to_owned(), a.allocated_bytes));
        out.push(("end_reserved".to_owned(), a.reserved_bytes));
    }
    out.extend(
        last.categories_bytes
            .measured()
            .into_iter()
            .map(|(name, bytes)| (format!("end_{name}"), bytes)),
    );
    out
}

fn spread_of(values: &[(u32, u64)]) -> Spread {
    let min = values.iter().min_by_key(|(_, b)| *b).expect("two or more");
    let max = values.iter().max_by_key(|(_, b)| *b).expect("two or more");
    Spread {
        min_bytes: min.1,
        min_rank: min.0,
        max_bytes: max.1,
        max_rank: max.0,
        spread_percent: crate::model::memory::percent(max.1 - min.1, max.1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(iteration: i64, census: u64) -> MemoryRecord {
        MemoryRecord {
            iteration,
            census_bytes: census,
            ..Default::default()
        }
    }

    #[test]
    fn the_heaviest_rank_is_named() {
        let r0 = [record(0, 100), record(10, 100)];
        let r1 = [record(0, 100), record(10, 150)];
        let s = spread("run", &[(0, &r0[..]), (1, &r1[..])]).unwrap();
        let end = &s.figures["end_census"];
        assert_eq!((end.max_rank, end.max_bytes), (1, 150));
        assert_eq!((end.min_rank, end.min_bytes), (0, 100));
        assert!((end.spread_percent - 100.0 / 3.0).abs() < 1e-9);
        assert!(spread("run", &[(0, &r0[..])]).is_none());
    }
}
