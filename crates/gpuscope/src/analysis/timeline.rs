//! A run's figures over iterations, reduced to a bounded number of points for tables,
//! sparklines and charts. Records are grouped into consecutive spans of equal count; a
//! memory figure keeps the highest value of its span (a peak is what runs out of memory,
//! so it must not be averaged away), a loss keeps the mean of its finite values.

use serde::Serialize;

use crate::model::memory::MemoryRecord;

/// What a series measures, for its axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// Percent.
    Percent,
    /// A count.
    Count,
    /// A loss value.
    Loss,
}

/// How a span's values are reduced to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reduce {
    Max,
    Mean,
}

/// One series of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineSeries {
    /// `allocated`, `reserved`, `fragmentation`, `census`, `tensors`, `category/<name>`,
    /// `loss/<component>`.
    pub name: String,
    /// What it measures.
    pub unit: Unit,
    /// One value per point; `null` where no record of the span had it.
    pub values: Vec<Option<f64>>,
}

/// A run's figures at a bounded number of points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    /// The last iteration of each span.
    pub iterations: Vec<i64>,
    /// How many records each point stands for (the last span may hold fewer).
    pub records_per_point: usize,
    /// The series.
    pub series: Vec<TimelineSeries>,
}

impl Timeline {
    /// The series called `name`.
    pub fn get(&self, name: &str) -> Option<&TimelineSeries> {
        self.series.iter().find(|s| s.name == name)
    }

    /// The same timeline at `points` points or fewer, merging neighbouring points.
    pub fn resample(&self, points: usize) -> Timeline {
        let points = points.max(1);
        let n = self.iterations.len();
        let per = n.div_ceil(points).max(1);
        Timeline {
            iterations: self
                .iterations
                .chunks(per)
                .filter_map(|c| c.last().copied())
                .collect(),
            records_per_point: self.records_per_point * per,
            series: self
                .series
                .iter()
                .map(|s| TimelineSeries {
                    name: s.name.clone(),
                    unit: s.unit,
                    values: s
                        .values
                        .chunks(per)
                        .map(|c| reduce(reduction(s.unit), c.iter().flatten().copied()))
                        .collect(),
                })
                .collect(),
        }
    }
}

fn reduction(unit: Unit) -> Reduce {
    match unit {
        Unit::Loss => Reduce::Mean,
        _ => Reduce::Max,
    }
}

fn reduce(how: Reduce, values: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut n, mut sum, mut max) = (0usize, 0.0, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        n += 1;
        sum += v;
        max = max.max(v);
    }
    (n > 0).then(|| match how {
        Reduce::Max => max,
        Reduce::Mean => sum / n as f64,
    })
}

/// The series a record has, with their values.
fn record_values(r: &MemoryRecord) -> Vec<(String, Unit, f64)> {
    let mut out = Vec::new();
    if let Some(a) = &r.allocator {
        out.push(("allocated".into(), Unit::Bytes, a.allocated_bytes as f64));
        out.push(("reserved".into(), Unit::Bytes, a.reserved_bytes as f64));
        out.push((
            "fragmentation".into(),
            Unit::Percent,
            a.fragmentation_percent(),
        ));
    }
    out.push(("census".into(), Unit::Bytes, r.census_bytes as f64));
    if let Some(heap) = r.system.heap_bytes {
        out.push(("heap".into(), Unit::Bytes, heap as f64));
    }
    out.push(("tensors".into(), Unit::Count, r.tensor_count as f64));
    for (name, bytes) in r.categories_bytes.measured() {
        out.push((format!("category/{name}"), Unit::Bytes, bytes as f64));
    }
    for (name, value) in &r.losses {
        out.push((format!("loss/{name}"), Unit::Loss, *value));
    }
    out
}

/// The timeline of `records` (ordered by iteration) at `points` points or fewer.
pub fn timeline(records: &[MemoryRecord], points: usize) -> Timeline {
    let per = records.len().div_ceil(points.max(1)).max(1);
    let mut series: Vec<TimelineSeries> = Vec::new();
    let mut iterations = Vec::new();
    for (i, span) in records.chunks(per).enumerate() {
        iterations.push(span.last().map_or(0, |r| r.iteration));
        let mut gathered: Vec<(String, Unit, Vec<f64>)> = Vec::new();
        for r in span {
            for (name, unit, value) in record_values(r) {
                match gathered.iter_mut().find(|(n, _, _)| *n == name) {
                    Some((_, _, values)) => values.push(value),
                    None => gathered.push((name, unit, vec![value])),
                }
            }
        }
        for (name, unit, values) in gathered {
            let value = reduce(reduction(unit), values.into_iter());
            let s = match series.iter_mut().position(|s| s.name == name) {
                Some(at) => &mut series[at],
                None => {
                    series.push(TimelineSeries {
                        name,
                        unit,
                        values: Vec::new(),
                    });
                    series.last_mut().expect("just pushed")
                }
            };
            s.values.resize(i, None);
            s.values.push(value);
        }
    }
    for s in &mut series {
        s.values.resize(iterations.len(), None);
    }
    Timeline {
        iterations,
        records_per_point: per,
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::Categories;

    fn record(iteration: i64, params: u64, loss: f64) -> MemoryRecord {
        MemoryRecord {
            iteration,
            categories_bytes: Categories {
                parameters: params,
                ..Default::default()
            },
            losses: [("total".to_owned(), loss)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_span_keeps_its_memory_peak_and_its_mean_loss() {
        let records: Vec<_> = (0..10)
            .map(|i| record(i, if i == 3 { 500 } else { 100 }, i as f64))
            .collect();
        let t = timeline(&records, 2);
        assert_eq!(t.iterations, vec![4, 9]);
        assert_eq!(
            t.get("category/parameters").unwrap().values,
            vec![Some(500.0), Some(100.0)]
        );
        assert_eq!(
            t.get("loss/total").unwrap().values,
            vec![Some(2.0), Some(7.0)]
        );
        let one = t.resample(1);
        assert_eq!(one.iterations, vec![9]);
        assert_eq!(
            one.get("category/parameters").unwrap().values,
            vec![Some(500.0)]
        );
    }

    #[test]
    fn a_series_that_starts_late_is_padded() {
        let mut records: Vec<_> = (0..4).map(|i| record(i, 1, 0.0)).collect();
        records[3].losses.insert("depth".into(), 1.0);
        let t = timeline(&records, 4);
        assert_eq!(
            t.get("loss/depth").unwrap().values,
            vec![None, None, None, Some(1.0)]
        );
    }
}
