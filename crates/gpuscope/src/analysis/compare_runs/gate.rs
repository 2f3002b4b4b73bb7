//! The gate: each `--fail-on` rule applied to the figures of a comparison. The rules, as
//! the README states them:
//!
//! - `peak-memory=P%`: fails when, on a rank of both runs, NEW's peak allocated or peak
//!   reserved exceeds BASE's by more than P % (each is judged; on CPU, without allocator
//!   figures in either run, the peak of the tensors instead).
//! - `step-time=P%`: fails when a rank's step time in NEW exceeds BASE's by more than P %.
//! - `throughput=P%`: fails when a rank's iterations per second in NEW fall below BASE's
//!   by more than P %.
//! - `nonfinite`, `leak`, `oom`, `fragmentation`: fail when some rank of NEW has the
//!   verdict and no rank of BASE has it.
//!
//! "More than" is strict: a run compared with itself changes by 0 % and passes even
//! `=0%`. A figure a rule needs that one of the runs lacks (a rank only one run has, no
//! step-time source in common) is listed as unchecked, not failed.

use crate::analysis::report::leak::MIN_RECORDS;
use crate::model::compare::{
    Bytes, Check, CheckOutcome, Figure, Limit, Pair, RankFigures, Regression, Rule, StepSource,
    Unchecked,
};
use crate::model::units::ByteUnit;

/// The regressions and unchecked figures of `ranks` under `rules`; `step_source` names
/// the clock of the step times.
pub fn judge(
    rules: &[Rule],
    ranks: &[RankFigures],
    step_source: Option<StepSource>,
) -> (Vec<Regression>, Vec<Unchecked>) {
    let (mut regressions, mut unchecked) = (Vec::new(), Vec::new());
    for &rule in rules {
        match rule {
            Rule::Limit(limit, percent) => {
                for rank in ranks {
                    let figures = limited(limit, rank, step_source);
                    if figures.is_empty() {
                        unchecked.push(Unchecked {
                            rule,
                            reason: format!(
                                "rank {}: {} is not measured in both runs",
                                rank.rank,
                                limit_label(limit)
                            ),
                        });
                    }
                    for (figure, change, line) in figures {
                        let worse = match limit {
                            Limit::Throughput => change < -percent,
                            Limit::PeakMemory | Limit::StepTime => change > percent,
                        };
                        if worse {
                            regressions.push(Regression {
                                rule,
                                figure,
                                rank: Some(rank.rank),
                                change_percent: Some(change),
                                line: format!("{rule}: rank {} {line}", rank.rank),
                            });
                        }
                    }
                }
            }
            Rule::Check(check) => match appeared(check, ranks) {
                Appeared::Yes(line) => regressions.push(Regression {
                    rule,
                    figure: figure_of(check),
                    rank: None,
                    change_percent: None,
                    line: format!("{rule}: {line}"),
                }),
                Appeared::No => {}
                Appeared::Unknown(reason) => unchecked.push(Unchecked { rule, reason }),
            },
        }
    }
    (regressions, unchecked)
}

fn limit_label(limit: Limit) -> &'static str {
    match limit {
        Limit::PeakMemory => "peak memory",
        Limit::StepTime => "step time",
        Limit::Throughput => "throughput",
    }
}

fn figure_of(check: Check) -> Figure {
    match check {
        Check::Nonfinite => Figure::Nonfinite,
        Check::Leak => Figure::Leak,
        Check::Oom => Figure::Oom,
        Check::Fragmentation => Figure::Fragmentation,
    }
}

/// The figures `limit` judges on `rank` that both runs have: (figure, change percent,
/// `figure base → new (change)`).
fn limited(
    limit: Limit,
    rank: &RankFigures,
    step_source: Option<StepSource>,
) -> Vec<(Figure, f64, String)> {
    let mb = |b: Bytes| format!("{:.1} MB", ByteUnit::Mib.of(b.0));
    let ms = |us: f64| format!("{:.2} ms", us / 1000.0);
    let per_s = |it: f64| format!("{it:.2} it/s");
    match limit {
        Limit::PeakMemory => {
            let allocator = [
                (Figure::PeakAllocated, &rank.peak_allocated_bytes),
                (Figure::PeakReserved, &rank.peak_reserved_bytes),
            ];
            let with_allocator: Vec<_> = allocator
                .iter()
                .filter_map(|&(f, p)| described(f, "", p, mb))
                .collect();
            if with_allocator.is_empty() {
                described(Figure::PeakTensors, "", &rank.peak_tensor_bytes, mb)
                    .into_iter()
                    .collect()
            } else {
                with_allocator
            }
        }
        Limit::StepTime => {
            let source = step_source.map_or(String::new(), |s| format!(" ({s})"));
            described(Figure::StepTime, &source, &rank.step_time_us, ms)
                .into_iter()
                .collect()
        }
        Limit::Throughput => described(
            Figure::Throughput,
            "",
            &rank.throughput_iterations_per_s,
            per_s,
        )
        .into_iter()
        .collect(),
    }
}

/// `figure` with its change, when both runs have it.
fn described<T: Copy>(
    figure: Figure,
    note: &str,
    pair: &Pair<T>,
    show: impl Fn(T) -> String,
) -> Option<(Figure, f64, String)> {
    let (base, new, change) = (pair.base?, pair.new?, pair.change_percent?);
    Some((
        figure,
        change,
        format!(
            "{}{note}: {} → {} ({change:+.1}%)",
            figure.label(),
            show(base),
            show(new)
        ),
    ))
}

enum Appeared {
    /// NEW has it, BASE not: the line says where.
    Yes(String),
    No,
    /// One run cannot have the verdict (no allocator figures for fragmentation).
    Unknown(String),
}

fn appeared(check: Check, ranks: &[RankFigures]) -> Appeared {
    let sides = |new: bool| -> Vec<(u32, &CheckOutcome)> {
        ranks
            .iter()
            .filter_map(|r| {
                let pair = r.checks.iter().find(|c| c.check == check)?;
                let side = if new { &pair.new } else { &pair.base };
                Some((r.rank, side.as_ref()?))
            })
            .collect()
    };
    let (base, new) = (sides(false), sides(true));
    if base.is_empty() || new.is_empty() {
        let which = if base.is_empty() { "BASE" } else { "NEW" };
        let needs = match check {
            Check::Leak => {
                format!("the leak rule needs {MIN_RECORDS} memory records after warm-up")
            }
            _ => "the allocator verdict needs CUDA allocator counters".to_owned(),
        };
        return Appeared::Unknown(format!("{which} has no figures for this verdict ({needs})"));
    }
    if base.iter().any(|(_, f)| f.found) {
        return Appeared::No;
    }
    let found: Vec<String> = new
        .iter()
        .filter(|(_, f)| f.found)
        .map(|(rank, f)| format!("rank {rank}: {}", f.detail))
        .collect();
    if found.is_empty() {
        return Appeared::No;
    }
    Appeared::Yes(format!(
        "{} in NEW ({}), none in BASE",
        figure_of(check).label(),
        found.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::compare::CheckPair;

    fn rank(peak: (u64, u64), step: (f64, f64), leak: (bool, bool)) -> RankFigures {
        let finding = |found: bool| {
            Some(CheckOutcome {
                found,
                detail: if found { "activations grew" } else { "none" }.to_owned(),
            })
        };
        RankFigures {
            rank: 0,
            peak_allocated_bytes: Pair::of(Some(Bytes(peak.0)), Some(Bytes(peak.1))),
            peak_reserved_bytes: Pair::of(Some(Bytes(peak.0)), Some(Bytes(peak.0))),
            peak_tensor_bytes: Pair::of(Some(Bytes(1)), Some(Bytes(1))),
            steady_categories_bytes: Default::default(),
            step_time_us: Pair::of(Some(step.0), Some(step.1)),
            throughput_iterations_per_s: Pair::of(Some(1e6 / step.0), Some(1e6 / step.1)),
            checks: vec![CheckPair {
                check: Check::Leak,
                base: finding(leak.0),
                new: finding(leak.1),
            }],
        }
    }

    fn rules(text: &str) -> Vec<Rule> {
        text.split(',').map(|r| r.parse().unwrap()).collect()
    }

    #[test]
    fn each_rule_fails_only_past_its_limit_in_the_bad_direction() {
        let all = rules("peak-memory=10%,step-time=5%,throughput=5%,leak");
        // Peak +10 % exactly, 5 % faster, a leak in both: passes.
        let same = [rank((100 << 20, 110 << 20), (1000.0, 950.0), (true, true))];
        let (regressions, unchecked) = judge(&all, &same, Some(StepSource::Trace));
        assert!(regressions.is_empty(), "{regressions:?}");
        assert!(unchecked.is_empty(), "{unchecked:?}");
        // Peak +20 %, 10 % slower, a leak in NEW only.
        let worse = [rank(
            (100 << 20, 120 << 20),
            (1000.0, 1100.0),
            (false, true),
        )];
        let (regressions, _) = judge(&all, &worse, Some(StepSource::Sections));
        let figures: Vec<Figure> = regressions.iter().map(|r| r.figure).collect();
        assert_eq!(
            figures,
            [
                Figure::PeakAllocated,
                Figure::StepTime,
                Figure::Throughput,
                Figure::Leak
            ]
        );
        assert_eq!(
            regressions[0].line,
            "peak-memory=10%: rank 0 peak allocated: 100.0 MB → 120.0 MB (+20.0%)"
        );
        assert_eq!(
            regressions[1].line,
            "step-time=5%: rank 0 step time (sections): 1.00 ms → 1.10 ms (+10.0%)"
        );
        assert!(
            regressions[3].line.contains("none in BASE"),
            "{}",
            regressions[3].line
        );
    }

    #[test]
    fn a_figure_one_run_lacks_is_unchecked() {
        let mut r = rank((1, 1), (1.0, 1.0), (false, false));
        r.step_time_us = Pair::of(Some(1.0), None);
        let (regressions, unchecked) = judge(&rules("step-time=5%"), &[r], None);
        assert!(regressions.is_empty());
        assert_eq!(unchecked.len(), 1);
        assert!(unchecked[0].reason.contains("step time"), "{unchecked:?}");
    }
}
