//! Two runs compared for `gpuscope compare BASE NEW`, and the `--fail-on` rules that make
//! the comparison a CI gate. Plain data: `analysis::compare_runs` fills it,
//! `render::compare` writes it. The rules parse here, from the words the command line takes,
//! so that the command line, the analysis and the JSON share one spelling of each.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use super::words::words;

words! {
    /// A figure that may only grow (or, for throughput, shrink) by a percentage.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub enum Limit {
        /// Each rank's peak allocated and peak reserved bytes (the census peak on CPU).
        PeakMemory = "peak-memory",
        /// Each rank's time per step.
        StepTime = "step-time",
        /// Each rank's iterations per second.
        Throughput = "throughput",
    }
}

words! {
    /// A verdict on a run that the gate fails on when NEW has it and BASE has not.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub enum Check {
        /// NaN or infinite losses or gradients were recorded.
        Nonfinite = "nonfinite",
        /// A category of memory grows steadily to the end (the leak verdict).
        Leak = "leak",
        /// An out-of-memory error was caught or counted by the allocator.
        Oom = "oom",
        /// The allocator's retries or OOMs came with fragmented free memory.
        Fragmentation = "fragmentation",
    }
}

/// One `--fail-on` item: `peak-memory=10%` or `leak`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// The figure may change by at most this many percent in the bad direction.
    Limit(Limit, f64),
    /// The verdict must not appear in NEW when BASE is free of it.
    Check(Check),
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Limit(limit, percent) => write!(f, "{limit}={percent}%"),
            Rule::Check(check) => write!(f, "{check}"),
        }
    }
}

impl Serialize for Rule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for Rule {
    type Err = String;

    /// `peak-memory=10%`, `step-time=5%`, `throughput=2.5%` (a percentage from 0 up, the
    /// `%` required), or `nonfinite`, `leak`, `oom`, `fragmentation`.
    fn from_str(text: &str) -> Result<Rule, String> {
        let text = text.trim();
        let (name, value) = match text.split_once('=') {
            Some((name, value)) => (name.trim(), Some(value.trim())),
            None => (text, None),
        };
        let known = || {
            let limits = Limit::ALL.iter().map(|l| format!("{l}=N%"));
            let checks = Check::ALL.iter().map(Check::to_string);
            limits.chain(checks).collect::<Vec<_>>().join(", ")
        };
        if let Some(&limit) = Limit::ALL.iter().find(|l| l.as_str() == name) {
            let Some(value) = value else {
                return Err(format!("{limit} needs a percentage: {limit}=10%"));
            };
            return percentage(value)
                .map(|p| Rule::Limit(limit, p))
                .ok_or_else(|| {
                    format!("not a percentage: {value:?} in {text:?} (try {limit}=10%)")
                });
        }
        if let Some(&check) = Check::ALL.iter().find(|c| c.as_str() == name) {
            return match value {
                None => Ok(Rule::Check(check)),
                Some(_) => Err(format!("{check} takes no value: {text:?} (write {check})")),
            };
        }
        Err(format!(
            "unknown --fail-on item {text:?} (one of {})",
            known()
        ))
    }
}

/// `10%`, `2.5%`, `0%` → the number; anything else (no `%`, negative, not finite) → none.
fn percentage(text: &str) -> Option<f64> {
    let number: f64 = text.strip_suffix('%')?.trim().parse().ok()?;
    (number.is_finite() && number >= 0.0).then_some(number)
}

/// One figure in BASE and in NEW; `null` where a run has no measure of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pair<T> {
    /// In BASE.
    pub base: Option<T>,
    /// In NEW.
    pub new: Option<T>,
    /// `(new − base) / base` in percent; `null` without both or when base is 0.
    pub change_percent: Option<f64>,
}

impl<T: Copy + Into<f64>> Pair<T> {
    /// The pair, with its change.
    pub fn of(base: Option<T>, new: Option<T>) -> Pair<T> {
        let change_percent = match (base, new) {
            (Some(b), Some(n)) if b.into() != 0.0 => Some((n.into() - b.into()) * 100.0 / b.into()),
            _ => None,
        };
        Pair {
            base,
            new,
            change_percent,
        }
    }
}

/// Bytes as a figure that can have a change: u64 has no lossless `Into<f64>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl From<Bytes> for f64 {
    fn from(b: Bytes) -> f64 {
        b.0 as f64
    }
}

words! {
    /// Where a step time comes from, the first that both runs have.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub enum StepSource {
        /// The profiler steps (`ProfilerStep#N`) of the traces in `profiler_traces/`.
        Trace = "trace",
        /// The top-level timed sections of the memory records (`scope.section(...)`).
        Sections = "sections",
        /// The memory records' timestamps: wall time between records per iteration.
        Timestamps = "timestamps",
    }
}

/// What a run's verdict says, when the run can have it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckOutcome {
    /// Whether the run has it.
    pub found: bool,
    /// Why, in words.
    pub detail: String,
}

/// One verdict in BASE and in NEW; `null` where it cannot be judged (fragmentation of a
/// CPU run, a rank that one run does not have).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckPair {
    /// Which verdict.
    pub check: Check,
    /// In BASE.
    pub base: Option<CheckOutcome>,
    /// In NEW.
    pub new: Option<CheckOutcome>,
}

/// The figures of one rank, in BASE and NEW.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankFigures {
    /// The rank.
    pub rank: u32,
    /// Highest allocated over the memory records (the allocator's own peaks); `null` on
    /// CPU.
    pub peak_allocated_bytes: Pair<Bytes>,
    /// Highest reserved over the memory records; `null` on CPU.
    pub peak_reserved_bytes: Pair<Bytes>,
    /// Highest memory of the tensors over the memory records: the sum of the categories
    /// (activations included), at least the census.
    pub peak_tensor_bytes: Pair<Bytes>,
    /// Each category's median over the records after warm-up, by category name.
    pub steady_categories_bytes: BTreeMap<String, Pair<Bytes>>,
    /// Time per step from the comparison's step source, µs.
    pub step_time_us: Pair<f64>,
    /// Iterations per second between the records after warm-up.
    pub throughput_iterations_per_s: Pair<f64>,
    /// The verdicts, in [`Check::ALL`] order.
    pub checks: Vec<CheckPair>,
}

/// What was read of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// The run directory.
    pub path: PathBuf,
    /// Its ranks with memory records.
    pub ranks: Vec<u32>,
    /// Memory records over all ranks.
    pub records: usize,
    /// The profiler traces read.
    pub traces: Vec<PathBuf>,
    /// Whether its memory records time sections.
    pub sections: bool,
    /// The allocator snapshot whose peak is compared; `null` without one.
    pub snapshot: Option<PathBuf>,
}

/// One call site's bytes alive at the snapshot's peak, in BASE and NEW.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteChange {
    /// The call site (`train.py:49 forward`).
    pub site: String,
    /// Its bytes; `null` in a run where it is not among the top sites.
    #[serde(flatten)]
    pub bytes: Pair<Bytes>,
}

/// The top call sites at each run's snapshot peak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeakSites {
    /// Bytes alive at the peak; `null` for a run without a snapshot (or without its
    /// trace).
    pub peak_bytes: Pair<Bytes>,
    /// The top sites of either run, largest in NEW first.
    pub sites: Vec<SiteChange>,
}

words! {
    /// A figure a regression is named by: its key in `ranks[]` (or in `checks`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub enum Figure {
        /// [`RankFigures::peak_allocated_bytes`].
        PeakAllocated = "peak_allocated_bytes",
        /// [`RankFigures::peak_reserved_bytes`].
        PeakReserved = "peak_reserved_bytes",
        /// [`RankFigures::peak_tensor_bytes`].
        PeakTensors = "peak_tensor_bytes",
        /// [`RankFigures::step_time_us`].
        StepTime = "step_time_us",
        /// [`RankFigures::throughput_iterations_per_s`].
        Throughput = "throughput_iterations_per_s",
        /// A verdict of `checks`.
        Nonfinite = "nonfinite",
        /// A verdict of `checks`.
        Leak = "leak",
        /// A verdict of `checks`.
        Oom = "oom",
        /// A verdict of `checks`.
        Fragmentation = "fragmentation",
    }
}

impl Figure {
    /// The figure in words, for a line a person reads.
    pub fn label(self) -> &'static str {
        match self {
            Figure::PeakAllocated => "peak allocated",
            Figure::PeakReserved => "peak reserved",
            Figure::PeakTensors => "peak tensors",
            Figure::StepTime => "step time",
            Figure::Throughput => "throughput",
            Figure::Nonfinite => "non-finite values",
            Figure::Leak => "a suspected leak",
            Figure::Oom => "out of memory",
            Figure::Fragmentation => "fragmentation",
        }
    }
}

/// A rule that NEW broke.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Regression {
    /// The rule.
    pub rule: Rule,
    /// The figure.
    pub figure: Figure,
    /// The rank; `null` for a verdict on the whole run.
    pub rank: Option<u32>,
    /// The change, percent, for a limit.
    pub change_percent: Option<f64>,
    /// One line: the figure, base, new and the change.
    pub line: String,
}

/// A rule that could not be applied to some figure, and why (a figure one run lacks).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unchecked {
    /// The rule.
    pub rule: Rule,
    /// Why, naming the figure and rank.
    pub reason: String,
}

/// Two runs compared, with the gate's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunComparison {
    /// The run compared against.
    pub base: Side,
    /// The run judged.
    pub new: Side,
    /// Where the step times come from; `null` when the runs share no source.
    pub step_source: Option<StepSource>,
    /// Each rank of either run, by rank.
    pub ranks: Vec<RankFigures>,
    /// The top sites at the snapshot peaks; `null` when neither run has a snapshot.
    pub peak_sites: Option<PeakSites>,
    /// The rules given (`--fail-on`), in order.
    pub fail_on: Vec<Rule>,
    /// The rules NEW broke, one per figure and rank.
    pub regressions: Vec<Regression>,
    /// Figures a rule could not judge.
    pub unchecked: Vec<Unchecked>,
}

impl RunComparison {
    /// Whether NEW passes the gate: no regression.
    pub fn passed(&self) -> bool {
        self.regressions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_from_the_command_line_words() {
        assert_eq!(
            "peak-memory=10%".parse::<Rule>(),
            Ok(Rule::Limit(Limit::PeakMemory, 10.0))
        );
        assert_eq!(
            " step-time = 2.5% ".parse::<Rule>(),
            Ok(Rule::Limit(Limit::StepTime, 2.5))
        );
        assert_eq!("leak".parse::<Rule>(), Ok(Rule::Check(Check::Leak)));
        assert_eq!(
            "throughput=0%".parse::<Rule>().unwrap().to_string(),
            "throughput=0%"
        );
        for bad in [
            "peak-memory=10",
            "peak-memory=-5%",
            "peak-memory=%",
            "peak-memory=ten%",
            "peak-memory",
            "leak=1%",
            "speed=5%",
            "",
        ] {
            assert!(bad.parse::<Rule>().is_err(), "{bad:?} parsed");
        }
        let unknown = "speed".parse::<Rule>().unwrap_err();
        assert!(
            unknown.contains("peak-memory=N%") && unknown.contains("oom"),
            "{unknown}"
        );
    }

    #[test]
    fn a_change_needs_both_figures_and_a_base_above_zero() {
        let p = Pair::of(Some(Bytes(100)), Some(Bytes(150)));
        assert_eq!(p.change_percent, Some(50.0));
        assert_eq!(Pair::of(Some(2.0), Some(1.0)).change_percent, Some(-50.0));
        assert_eq!(
            Pair::of(Some(Bytes(0)), Some(Bytes(5))).change_percent,
            None
        );
        assert_eq!(Pair::<f64>::of(None, Some(1.0)).change_percent, None);
        assert_eq!(
            serde_json::to_string(&Pair::of(Some(Bytes(1)), None)).unwrap(),
            r#"{"base":1,"new":null,"change_percent":null}"#
        );
    }
}
