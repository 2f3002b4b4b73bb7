//! Time per step of one rank, from each source that has it, and its throughput.
//!
//! - **trace**: the mean duration of the profiler steps (`ProfilerStep#N`, on the CPU's
//!   clock, as [`step_overview`] measures them) over all of the rank's traces.
//! - **sections**: the top-level timed sections' time per step over the records after
//!   warm-up ([`leak::window`]): their total milliseconds divided by the steps those
//!   records cover, a record's steps being the calls of its most-called top-level section
//!   (one call per step). Only the timed part of a step: what no section encloses is left
//!   out, the same way in both runs.
//! - **timestamps**: wall time per iteration between the first and the last record after
//!   warm-up; everything the training does counts, the profiler's own records included.
//!
//! Throughput is iterations per second over that same span of records.

use std::collections::BTreeMap;

use crate::analysis::report::leak;
use crate::analysis::trace::steps::step_overview;
use crate::model::compare::StepSource;
use crate::model::memory::MemoryRecord;
use crate::model::trace::TraceFile;

/// µs per step of `rank` from its profiler steps in `traces`; `None` without any.
pub fn trace_step_us(traces: &[TraceFile], rank: u32) -> Option<f64> {
    let durations: Vec<f64> = traces
        .iter()
        .filter(|t| t.trace.rank == rank)
        .filter_map(|t| step_overview(&t.trace))
        .flat_map(|o| o.steps.into_iter().map(|s| s.duration_us))
        .collect();
    (!durations.is_empty()).then(|| durations.iter().sum::<f64>() / durations.len() as f64)
}

/// µs per step in the top-level timed sections of `records` after warm-up; `None`
/// without sections there.
pub fn sections_step_us(records: &[MemoryRecord]) -> Option<f64> {
    let (mut total_ms, mut steps) = (0.0, 0u64);
    for r in leak::window(records) {
        let top = r.sections.values().filter(|s| s.parent.is_none());
        let (ms, calls) = top.fold((0.0, 0), |(ms, calls), s| {
            (ms + s.total_ms, u64::max(calls, s.calls))
        });
        total_ms += ms;
        steps += calls;
    }
    (steps > 0).then(|| total_ms * 1000.0 / steps as f64)
}

/// (first, last) record after warm-up when they span iterations and time.
fn span(records: &[MemoryRecord]) -> Option<(f64, f64)> {
    let window = leak::window(records);
    let (first, last) = (window.first()?, window.last()?);
    let (iterations, seconds) = (
        (last.iteration - first.iteration) as f64,
        last.time - first.time,
    );
    (iterations > 0.0 && seconds > 0.0).then_some((iterations, seconds))
}

/// Iterations per second between the records after warm-up; `None` with fewer than two
/// of them apart in iteration and time.
pub fn throughput(records: &[MemoryRecord]) -> Option<f64> {
    span(records).map(|(iterations, seconds)| iterations / seconds)
}

/// µs per iteration between the records after warm-up.
pub fn timestamps_step_us(records: &[MemoryRecord]) -> Option<f64> {
    span(records).map(|(iterations, seconds)| seconds * 1e6 / iterations)
}

/// The step time of one rank by each source that has it.
pub fn step_times(records: &[MemoryRecord], traces: &[TraceFile], rank: u32) -> StepTimes {
    [
        (StepSource::Trace, trace_step_us(traces, rank)),
        (StepSource::Sections, sections_step_us(records)),
        (StepSource::Timestamps, timestamps_step_us(records)),
    ]
    .into_iter()
    .filter_map(|(source, us)| Some((source, us?)))
    .collect()
}

/// µs per step by source.
pub type StepTimes = BTreeMap<StepSource, f64>;

/// The first source, in [`StepSource::ALL`] order, that some rank of each run has: both
/// runs' step times then come from the same kind of clock.
pub fn common_source<'a>(
    base: impl IntoIterator<Item = &'a StepTimes>,
    new: impl IntoIterator<Item = &'a StepTimes>,
) -> Option<StepSource> {
    let sources = |ranks: &mut dyn Iterator<Item = &'a StepTimes>| {
        ranks.flat_map(|t| t.keys().copied()).collect::<Vec<_>>()
    };
    let (base, new) = (
        sources(&mut base.into_iter()),
        sources(&mut new.into_iter()),
    );
    StepSource::ALL
        .iter()
        .copied()
        .find(|s| base.contains(s) && new.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::SectionStats;

    fn record(
        iteration: i64,
        time: f64,
        sections: &[(&str, Option<&str>, u64, f64)],
    ) -> MemoryRecord {
        MemoryRecord {
            iteration,
            time,
            sections: sections
                .iter()
                .map(|&(path, parent, calls, total_ms)| {
                    let stats = SectionStats {
                        calls,
                        total_ms,
                        parent: parent.map(str::to_owned),
                        ..SectionStats::default()
                    };
                    (path.to_owned(), stats)
                })
                .collect(),
            ..MemoryRecord::default()
        }
    }

    #[test]
    fn sections_give_the_top_level_time_per_step_after_warm_up() {
        let records = [
            // Warm-up: the slow first iteration is left out.
            record(0, 0.0, &[("forward", None, 1, 900.0)]),
            record(
                10,
                1.0,
                &[
                    ("forward", None, 10, 30.0),
                    ("forward/attention", Some("forward"), 10, 20.0),
                    ("backward", None, 10, 50.0),
                ],
            ),
            record(
                20,
                2.0,
                &[("forward", None, 10, 50.0), ("backward", None, 10, 70.0)],
            ),
        ];
        // (30 + 50 + 50 + 70) ms over 20 steps = 10 ms.
        assert_eq!(sections_step_us(&records), Some(10_000.0));
        // 10 iterations between the records at 10 and 20, in 1 s.
        assert_eq!(throughput(&records), Some(10.0));
        assert_eq!(timestamps_step_us(&records), Some(100_000.0));
        assert_eq!(sections_step_us(&records[..0]), None);
        let plain = [record(0, 0.0, &[]), record(10, 1.0, &[])];
        assert_eq!(sections_step_us(&plain), None);
    }

    #[test]
    fn the_common_source_is_the_first_both_runs_have() {
        let t =
            |sources: &[StepSource]| -> StepTimes { sources.iter().map(|&s| (s, 1.0)).collect() };
        let (all, no_trace) = (
            t(StepSource::ALL),
            t(&[StepSource::Sections, StepSource::Timestamps]),
        );
        assert_eq!(common_source([&all], [&all]), Some(StepSource::Trace));
        assert_eq!(
            common_source([&all], [&no_trace]),
            Some(StepSource::Sections)
        );
        assert_eq!(common_source([&all], [&t(&[])]), None);
    }
}
