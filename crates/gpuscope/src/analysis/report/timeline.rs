//! A run's figures over iterations, reduced to a bounded number of points for tables,
//! sparklines and charts. Records are grouped into consecutive spans of equal count; a
//! memory figure keeps the highest value of its span (a peak is what runs out of memory,
//! so it must not be averaged away), a loss keeps the mean of its finite values.

use std::collections::HashMap;

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
    /// Milliseconds (a timed section per call, a profiler step).
    Milliseconds,
    /// A gradient norm.
    Norm,
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
    /// `loss/<component>`, `section/<path>` (ms per call), `grad/global`,
    /// `grad/module/<module>` (gradient norms).
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
        Unit::Loss | Unit::Milliseconds | Unit::Norm => Reduce::Mean,
        Unit::Bytes | Unit::Percent | Unit::Count => Reduce::Max,
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

/// Where a value goes: a fixed series, or one of a family named by the run (a loss
/// component, a section, a module), `<prefix><name>`.
#[derive(Clone, Copy)]
enum Key<'a> {
    Fixed(&'static str, Unit),
    Named(&'static str, &'a str, Unit),
}

/// The series a record has, with their values, in a fixed order.
fn record_values<'a>(r: &'a MemoryRecord, mut add: impl FnMut(Key<'a>, f64)) {
    if let Some(a) = &r.allocator {
        add(
            Key::Fixed("allocated", Unit::Bytes),
            a.allocated_bytes as f64,
        );
        add(Key::Fixed("reserved", Unit::Bytes), a.reserved_bytes as f64);
        add(
            Key::Fixed("fragmentation", Unit::Percent),
            a.fragmentation_percent(),
        );
    }
    add(Key::Fixed("census", Unit::Bytes), r.census_bytes as f64);
    if let Some(heap) = r.system.heap_bytes {
        add(Key::Fixed("heap", Unit::Bytes), heap as f64);
    }
    add(Key::Fixed("tensors", Unit::Count), r.tensor_count as f64);
    for (name, bytes) in r.categories_bytes.measured() {
        add(Key::Fixed(category_series(name), Unit::Bytes), bytes as f64);
    }
    for (name, value) in &r.losses {
        add(Key::Named("loss/", name, Unit::Loss), *value);
    }
    for (path, section) in &r.sections {
        add(
            Key::Named("section/", path, Unit::Milliseconds),
            section.mean_ms,
        );
    }
    if let Some(g) = &r.gradients {
        if let Some(n) = g.global_norm {
            add(Key::Fixed("grad/global", Unit::Norm), n);
        }
        for (module, n) in &g.module_norms {
            if let Some(n) = n {
                add(Key::Named("grad/module/", module, Unit::Norm), *n);
            }
        }
    }
}

fn category_series(name: &str) -> &'static str {
    match name {
        "parameters" => "category/parameters",
        "gradients" => "category/gradients",
        "optimizer_state" => "category/optimizer_state",
        "buffers" => "category/buffers",
        "activations" => "category/activations",
        _ => "category/other",
    }
}

/// A series being built: its values so far and the current span's.
struct Building {
    series: TimelineSeries,
    span: Vec<f64>,
}

/// The timeline of `records` (ordered by iteration) at `points` points or fewer.
pub fn timeline(records: &[MemoryRecord], points: usize) -> Timeline {
    let per = records.len().div_ceil(points.max(1)).max(1);
    let mut building: Vec<Building> = Vec::new();
    let mut fixed: HashMap<&'static str, usize> = HashMap::new();
    let mut named: HashMap<(&'static str, &str), usize> = HashMap::new();
    let mut iterations = Vec::new();
    for span in records.chunks(per) {
        let point = iterations.len();
        iterations.push(span.last().map_or(0, |r| r.iteration));
        for r in span {
            record_values(r, |key, value| {
                let at = match key {
                    Key::Fixed(name, _) => fixed.get(name).copied(),
                    Key::Named(prefix, name, _) => named.get(&(prefix, name)).copied(),
                };
                let at = at.unwrap_or_else(|| {
                    let (name, unit) = match key {
                        Key::Fixed(name, unit) => {
                            fixed.insert(name, building.len());
                            (name.to_owned(), unit)
                        }
                        Key::Named(prefix, name, unit) => {
                            named.insert((prefix, name), building.len());
                            (format!("{prefix}{name}"), unit)
                        }
                    };
                    building.push(Building {
                        series: TimelineSeries {
                            name,
                            unit,
                            values: vec![None; point],
                        },
                        span: Vec::new(),
                    });
                    building.len() - 1
                });
                building[at].span.push(value);
            });
        }
        for b in &mut building {
            let value = reduce(reduction(b.series.unit), b.span.drain(..));
            b.series.values.push(value);
        }
    }
    Timeline {
        iterations,
        records_per_point: per,
        series: building.into_iter().map(|b| b.series).collect(),
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
                parameters: Some(params),
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
