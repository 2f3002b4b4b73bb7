//! One rank's trace reduced to a few kilobytes, and many ranks' summaries merged: what
//! the cross-rank views need, so that a job of thousands of ranks is compared without
//! holding any rank's full report. A summary is a pure function of one file, so it can
//! run where the file is (a Dask or Ray worker, a Slurm array task); the merge runs on
//! one machine. Every list is capped: a summary stays under [`MAX_SUMMARY_BYTES`] as
//! JSON whatever the number of events or steps.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::classify::KernelType;
use super::graphs::GraphReplays;
use super::kernels::kernel_stats;
use super::launches::LaunchStats;
use super::ranks::{compare, figures_of, RankComparison, RankFigures};
use super::report::{report, RankReport};
use super::scope::{scope, Clock, Scope};
use super::steps::Step;
use crate::analysis::report::trend::median;
use crate::model::trace::{file_name, Trace, TraceFile, NONE, NO_SHAPES};

/// The schema of a summary.
pub const SUMMARY_SCHEMA: &str = "gpuscope.rank_summary/1";
/// The schema of merged summaries.
pub const RANKS_SCHEMA: &str = "gpuscope.ranks/1";
/// The most a summary takes as JSON, bytes.
pub const MAX_SUMMARY_BYTES: usize = 16 * 1024;
/// Steps kept: the first and the last half of this many.
const MAX_STEPS: usize = 48;
/// Kernels and collectives kept, by total time.
const MAX_KERNELS: usize = 8;

/// A kernel (or a collective) by name, over the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelTime {
    /// The kernel's name, cut to [`MAX_NAME`] characters.
    pub name: String,
    /// How many times it ran.
    pub count: u64,
    /// Total time, µs.
    pub total_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Longest run, µs.
    pub max_us: f64,
}

/// The collectives of one kind and size over a trace, from the metadata Kineto puts on
/// their kernels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveSize {
    /// `allreduce`, `allgather`, `reduce_scatter`, ...
    pub kind: String,
    /// The element type (`Float`, `BFloat16`); `null` when the trace does not say.
    pub dtype: Option<String>,
    /// Elements each call sends; `null` when the trace does not say.
    pub elements: Option<i64>,
    /// Bytes each call sends (elements × the dtype's size); `null` when either is unknown.
    pub bytes: Option<i64>,
    /// Ranks in the process group; `null` when the trace does not say.
    pub group_size: Option<i64>,
    /// Calls.
    pub count: u64,
    /// Total time of their kernels, µs.
    pub total_us: f64,
    /// Longest, µs.
    pub max_us: f64,
    /// The first and last sequence numbers (`Seq`: the same on every rank for the same
    /// collective of a process group); `null` when the trace has none.
    pub first_seq: Option<i64>,
    /// The last.
    pub last_seq: Option<i64>,
}

/// Bytes of one element of the torch dtype Kineto names `dtype`.
fn element_bytes(dtype: &str) -> Option<i64> {
    Some(match dtype {
        "Bool" | "Byte" | "Char" | "QInt8" | "QUInt8" => 1,
        d if d.starts_with("Float8") => 1,
        "Half" | "BFloat16" | "Short" => 2,
        "Float" | "Int" | "QInt32" | "ComplexHalf" => 4,
        "Double" | "Long" | "ComplexFloat" => 8,
        "ComplexDouble" => 16,
        _ => return None,
    })
}

/// The collectives of `trace` within `s`, by kind, dtype, size and group, most time first.
fn collective_sizes(trace: &Trace, s: &Scope) -> Vec<CollectiveSize> {
    let known = |v: i64| (v != NONE).then_some(v);
    let mut groups: BTreeMap<(u32, u32, i64, i64), CollectiveSize> = BTreeMap::new();
    for &(i, c) in &trace.collectives {
        if s.gpu.binary_search(&i).is_err() {
            continue;
        }
        let dtype = (c.dtype != NO_SHAPES).then(|| trace.names.get(c.dtype).to_owned());
        let group = groups
            .entry((c.name, c.dtype, c.in_elements, c.group_size))
            .or_insert_with(|| CollectiveSize {
                kind: trace.names.get(c.name).to_owned(),
                bytes: dtype
                    .as_deref()
                    .and_then(element_bytes)
                    .zip(known(c.in_elements))
                    .map(|(size, n)| size * n),
                dtype,
                elements: known(c.in_elements),
                group_size: known(c.group_size),
                count: 0,
                total_us: 0.0,
                max_us: 0.0,
                first_seq: None,
                last_seq: None,
            });
        let us = s.duration(trace, i) as f64 / 1000.0;
        group.count += 1;
        group.total_us += us;
        group.max_us = group.max_us.max(us);
        if let Some(seq) = known(c.seq) {
            group.first_seq = Some(group.first_seq.map_or(seq, |f| f.min(seq)));
            group.last_seq = Some(group.last_seq.map_or(seq, |l| l.max(seq)));
        }
    }
    let mut sizes: Vec<CollectiveSize> = groups.into_values().collect();
    sizes.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
    sizes.truncate(MAX_KERNELS);
    sizes
}

/// Characters of a kernel name kept (C++ template names run to kilobytes).
const MAX_NAME: usize = 120;

/// One rank's trace in a few kilobytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSummary {
    /// [`SUMMARY_SCHEMA`].
    pub schema: String,
    /// The rank.
    pub rank: u32,
    /// Where the rank came from: `metadata` (`distributedInfo.rank`), `file_name`, or
    /// `default` (0).
    pub rank_from: String,
    /// The trace file's name.
    pub file: String,
    /// What the stragglers are found from; `null` without GPU work.
    pub figures: Option<RankFigures>,
    /// Profiler steps in the trace.
    pub steps_total: usize,
    /// The first and last profiler steps (all when there are few): duration and where
    /// it went (the step overview's categories, µs).
    pub steps: Vec<Step>,
    /// Communication kernels by name, most time first.
    pub collectives: Vec<KernelTime>,
    /// The collectives torch.distributed ran, by kind and size, most time first (empty
    /// when the trace has no collective metadata on its kernels).
    #[serde(default)]
    pub collective_sizes: Vec<CollectiveSize>,
    /// The launches; `null` without any.
    pub launches: Option<LaunchStats>,
    /// The work CUDA graph replays ran, which [`RankSummary::launches`] leaves out (no
    /// launch call of its own started it); `null` without graphs.
    #[serde(default)]
    pub graph_replays: Option<GraphReplays>,
    /// The kernels with the most time.
    pub top_kernels: Vec<KernelTime>,
}

fn kernel_time(k: &super::kernels::KernelStats) -> KernelTime {
    KernelTime {
        name: k.name.chars().take(MAX_NAME).collect(),
        count: k.count,
        total_us: k.sum_us,
        mean_us: k.mean_us,
        max_us: k.max_us,
    }
}

/// The summary of `file` on `clock`.
pub fn rank_summary(file: &TraceFile, clock: Clock) -> RankSummary {
    let r = report(std::slice::from_ref(file), clock, MAX_KERNELS)
        .pop()
        .expect("one report per trace");
    summarize(file, &r, clock)
}

/// The summary of `file` whose report on `clock` is `r`.
pub fn summarize(file: &TraceFile, r: &RankReport, clock: Clock) -> RankSummary {
    let trace = &file.trace;
    let s = scope(trace, clock);
    let collectives: Vec<KernelTime> = kernel_stats(trace, &s, |i| {
        s.kernel_type(trace, i) == KernelType::Communication
    })
    .iter()
    .take(MAX_KERNELS)
    .map(kernel_time)
    .collect();
    let all_steps = r
        .steps
        .as_ref()
        .map(|o| o.steps.clone())
        .unwrap_or_default();
    let steps_total = all_steps.len();
    let steps = if steps_total <= MAX_STEPS {
        all_steps
    } else {
        let half = MAX_STEPS / 2;
        let mut kept = all_steps[..half].to_vec();
        kept.extend_from_slice(&all_steps[steps_total - half..]);
        kept
    };
    RankSummary {
        schema: SUMMARY_SCHEMA.to_owned(),
        rank: r.rank,
        rank_from: trace.rank_from.as_str().to_owned(),
        file: file_name(&file.path),
        figures: figures_of(r),
        steps_total,
        steps,
        collectives,
        collective_sizes: collective_sizes(trace, &s),
        launches: r.launches.clone(),
        graph_replays: r.graph_replays.clone(),
        top_kernels: r
            .top_kernels
            .iter()
            .filter(|k| k.kernel_type.is_some())
            .take(MAX_KERNELS)
            .map(kernel_time)
            .collect(),
    }
}

/// The summary in `text` (JSON), when it is one: a `gpuscope.rank_summary/1` document.
pub fn parse_summary(text: &str) -> Option<RankSummary> {
    serde_json::from_str::<RankSummary>(text)
        .ok()
        .filter(RankSummary::has_schema)
}

impl RankSummary {
    /// Whether it says it is a [`SUMMARY_SCHEMA`] summary.
    pub fn has_schema(&self) -> bool {
        self.schema == SUMMARY_SCHEMA
    }
}

/// The largest file that may be a summary, bytes (a summary is at most
/// [`MAX_SUMMARY_BYTES`]; a trace is far larger).
pub const MAX_SUMMARY_FILE: u64 = 64 * 1024;

/// A profiler step across the ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSpread {
    /// `ProfilerStep#N`.
    pub name: String,
    /// Ranks that have it.
    pub ranks: usize,
    /// Shortest, median and longest duration across them, µs.
    pub min_us: f64,
    /// Median.
    pub median_us: f64,
    /// Longest.
    pub max_us: f64,
    /// The rank with the longest.
    pub slowest_rank: u32,
}

/// A collective whose time differs across ranks: the ranks that wait longest in it wait
/// on a slow peer (the straggler spends least), where the same time everywhere means the
/// communication itself is slow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectiveSpread {
    /// The kernel's name.
    pub name: String,
    /// Ranks that ran it.
    pub ranks: usize,
    /// Least and most total time across them, µs.
    pub min_total_us: f64,
    /// Most.
    pub max_total_us: f64,
    /// The rank with the least (the one the others wait for, when it is a straggler).
    pub least_rank: u32,
    /// The rank with the most.
    pub most_rank: u32,
}

/// A rank without some of the steps other ranks have.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MissingSteps {
    /// The rank.
    pub rank: u32,
    /// How many of the steps the other ranks have it lacks.
    pub missing: usize,
}

/// Many ranks' summaries, merged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RanksView {
    /// [`RANKS_SCHEMA`].
    pub schema: &'static str,
    /// The ranks merged, ascending.
    pub ranks: Vec<u32>,
    /// Each rank's figures and the stragglers, as `gpuscope trace DIR` reports them
    /// (`null` with fewer than two ranks with GPU work).
    pub comparison: Option<RankComparison>,
    /// Each profiler step kept in the summaries, across the ranks.
    pub steps: Vec<StepSpread>,
    /// Ranks missing steps that other ranks have.
    pub missing_steps: Vec<MissingSteps>,
    /// Collectives, the widest spread of total time first.
    pub collectives: Vec<CollectiveSpread>,
}

/// (rank, value) of every item `items` gives each summary, by the item's name.
type ByName<'a> = BTreeMap<&'a str, Vec<(u32, f64)>>;

fn by_name<'a, T: 'a>(
    summaries: &'a [RankSummary],
    items: impl Fn(&'a RankSummary) -> &'a [T],
    key: impl Fn(&'a T) -> (&'a str, f64),
) -> ByName<'a> {
    let mut out: ByName<'a> = BTreeMap::new();
    for s in summaries {
        for item in items(s) {
            let (name, value) = key(item);
            out.entry(name).or_default().push((s.rank, value));
        }
    }
    out
}

/// The (rank, value) pairs with the least and the most value (`v` is never empty: a
/// name is there because some rank had it).
fn extremes(v: &[(u32, f64)]) -> ((u32, f64), (u32, f64)) {
    let least = v.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1));
    let most = v.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1));
    (least.unwrap_or_default(), most.unwrap_or_default())
}

/// The merge of `summaries`.
pub fn merge_rank_summaries(summaries: &[RankSummary]) -> RanksView {
    let mut ranks: Vec<u32> = summaries.iter().map(|s| s.rank).collect();
    ranks.sort_unstable();
    // Several traces of one rank (successive profiler cycles of one process) are not
    // ranks to compare.
    let distinct = ranks.windows(2).all(|w| w[0] != w[1]);
    let comparison = distinct
        .then(|| {
            let mut figures: Vec<RankFigures> =
                summaries.iter().filter_map(|s| s.figures.clone()).collect();
            figures.sort_by_key(|f| f.rank);
            compare(figures)
        })
        .flatten();
    let by_step = by_name(
        summaries,
        |s| &s.steps,
        |step| (&step.name, step.duration_us),
    );
    let mut steps: Vec<StepSpread> = by_step
        .iter()
        .map(|(name, v)| {
            let (least, most) = extremes(v);
            StepSpread {
                name: (*name).to_owned(),
                ranks: v.len(),
                min_us: least.1,
                median_us: median(&mut v.iter().map(|x| x.1).collect::<Vec<_>>()).unwrap_or(0.0),
                max_us: most.1,
                slowest_rank: most.0,
            }
        })
        .collect();
    steps.sort_by_key(|s| step_number(&s.name));
    let everyone = by_step.len();
    // Only ranks whose every step is in their summary can be said to miss one.
    let mut missing_steps: Vec<MissingSteps> = summaries
        .iter()
        .filter(|s| s.steps_total <= MAX_STEPS)
        .map(|s| MissingSteps {
            rank: s.rank,
            missing: everyone.saturating_sub(s.steps.len()),
        })
        .filter(|m| m.missing > 0)
        .collect();
    missing_steps.sort_by_key(|m| m.rank);
    let by_collective = by_name(summaries, |s| &s.collectives, |c| (&c.name, c.total_us));
    let mut collectives: Vec<CollectiveSpread> = by_collective
        .iter()
        .map(|(name, v)| {
            let (least, most) = extremes(v);
            CollectiveSpread {
                name: (*name).to_owned(),
                ranks: v.len(),
                min_total_us: least.1,
                max_total_us: most.1,
                least_rank: least.0,
                most_rank: most.0,
            }
        })
        .collect();
    collectives.sort_by(|a, b| {
        (b.max_total_us - b.min_total_us).total_cmp(&(a.max_total_us - a.min_total_us))
    });
    collectives.truncate(MAX_KERNELS);
    RanksView {
        schema: RANKS_SCHEMA,
        ranks,
        comparison,
        steps,
        missing_steps,
        collectives,
    }
}

fn step_number(name: &str) -> u64 {
    name.strip_prefix("ProfilerStep#")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}
