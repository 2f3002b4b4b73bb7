//! Findings of the memory records, rank by rank: the peak (joined with what a snapshot
//! says was alive at its peak), the leak rule, the out-of-memory forecast, the allocator's
//! verdict, host memory growth; across ranks, their spread.

use std::collections::BTreeMap;

use super::evidence::{Evidence, PeakEvidence};
use super::finding::{Anchor, Finding, FindingKind, FindingSource, Severity, Stake};
use super::{share_of, RunInputs};
use crate::analysis::report::advice::NEAR_FULL_PERCENT;
use crate::analysis::report::allocator_verdict::Verdict;
use crate::analysis::report::RunReport;
use crate::analysis::snapshot::sites::SiteBytes;
use crate::model::units::{counted, human_bytes};

/// Reserved memory at the peak at this share of the device or more is medium: one larger batch
/// or sequence from an out-of-memory error (the same line as the checkpointing advice's).
pub const NEAR_FULL_SHARE: f64 = NEAR_FULL_PERCENT / 100.0;
/// A figure whose spread between ranks exceeds this many percent is a low finding.
pub const RANK_SPREAD_PERCENT: f64 = 10.0;
/// Call sites listed with a peak.
const SITES: usize = 5;

pub(super) fn findings(run: &RunInputs) -> Vec<Finding> {
    let alive = alive_at_peak(run);
    let mut out = Vec::new();
    for rank in &run.ranks {
        out.extend(peak(rank, alive.clone()));
        out.extend(leak(rank));
        out.extend(allocator(rank));
        out.extend(host_growth(rank));
        if !rank.skipped.is_empty() {
            out.push(finding(
                rank,
                FindingKind::SkippedRecords,
                Severity::Low,
                format!(
                    "{} could not be read and were left out",
                    counted(rank.skipped.len(), "record line")
                ),
                Stake::None,
                Evidence::Unread {
                    count: rank.skipped.len(),
                    first: rank.skipped.iter().take(3).cloned().collect(),
                },
                String::new(),
            ));
        }
    }
    out.extend(spread(run));
    out
}

/// The snapshot with the largest peak, and its largest call sites then. Not one saved at
/// an out-of-memory error: its peak holds what the failing step asked for, which the
/// records' peak leaves out too.
fn alive_at_peak(run: &RunInputs) -> Option<(std::path::PathBuf, Vec<SiteBytes>)> {
    let at_oom: Vec<&std::path::Path> = run
        .ranks
        .iter()
        .flat_map(|r| &r.oom_events)
        .filter_map(|e| e.snapshot.as_ref()?.path.as_deref())
        .collect();
    run.snapshots
        .iter()
        .filter(|s| !at_oom.contains(&s.path.as_path()))
        .filter_map(|s| Some((s, s.peak.as_ref()?)))
        .max_by_key(|(_, peak)| peak.bytes)
        .map(|(s, peak)| {
            (
                s.path.clone(),
                peak.by_site.iter().take(SITES).cloned().collect(),
            )
        })
}

fn peak(rank: &RunReport, alive: Option<(std::path::PathBuf, Vec<SiteBytes>)>) -> Option<Finding> {
    let timeline = &rank.timeline;
    // Memory at each point: the allocator's figure on GPU; on CPU, with no allocator, the
    // categories' sum (the census alone misses activations).
    let categories_at = |i: usize| -> Option<f64> {
        let values = timeline
            .series
            .iter()
            .filter(|s| s.name.starts_with("category/"))
            .filter_map(|s| s.values.get(i).copied().flatten());
        values.reduce(|a, b| a + b)
    };
    let total_at = |i: usize| -> Option<f64> {
        let of = |name: &str| timeline.get(name)?.values.get(i).copied().flatten();
        of("allocated")
            .or_else(|| categories_at(i))
            .or_else(|| of("census"))
    };
    let (at, bytes) = (0..timeline.iterations.len())
        .filter_map(|i| Some((i, total_at(i)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let value_at = |name: &str| timeline.get(name)?.values.get(at).copied().flatten();
    let mut categories: BTreeMap<String, u64> = timeline
        .series
        .iter()
        .filter_map(|s| {
            let name = s.name.strip_prefix("category/")?;
            Some((name.to_owned(), s.values.get(at).copied().flatten()? as u64))
        })
        .collect();
    // The allocator's own peaks catch the top of an iteration, between records.
    let (mut allocated, mut reserved) = match &rank.fragmentation {
        Some(f) => (f.peak_allocated_bytes, Some(f.peak_reserved_bytes)),
        None => (bytes as u64, value_at("reserved").map(|v| v as u64)),
    };
    let mut iteration = timeline.iterations[at];
    // The record an out-of-memory error took can hold more than any scheduled one (its
    // interval's peak is not in the records when the error was caught and survived).
    let at_oom = rank
        .oom_events
        .iter()
        .filter_map(|e| {
            let memory = e.at_error.as_ref()?;
            Some((e, memory, memory.allocated_bytes?))
        })
        .filter(|(_, _, bytes)| *bytes > allocated)
        .max_by_key(|(_, _, bytes)| *bytes);
    let where_ = if let Some((event, memory, bytes)) = at_oom {
        allocated = bytes;
        reserved = memory.reserved_bytes;
        categories = memory
            .categories_bytes
            .measured()
            .into_iter()
            .map(|(name, b)| (name.to_owned(), b))
            .collect();
        iteration = event.iteration.unwrap_or(iteration);
        let at = event
            .iteration
            .map_or(String::new(), |i| format!(" (iteration {i})"));
        format!(" when the out-of-memory error was caught{at}")
    } else {
        String::new()
    };
    let total = rank.summary.device_total_bytes;
    let held = reserved.unwrap_or(allocated);
    let share = share_of(held, total);
    let severity = if share.is_some_and(|s| s >= NEAR_FULL_SHARE) {
        Severity::Medium
    } else {
        Severity::Info
    };
    let mut summary = format!(
        "memory peaked at {} allocated{}{where_}",
        human_bytes(allocated),
        reserved.map_or(String::new(), |r| format!(
            " and {} reserved",
            human_bytes(r)
        )),
    );
    if let Some(share) = share {
        summary.push_str(&format!(", {:.0} % of the device", share * 100.0));
    }
    let recorded: u64 = categories.values().sum();
    if let Some((name, top)) = categories.iter().max_by_key(|(_, b)| **b) {
        if recorded > 0 && *top > 0 {
            let then = if where_.is_empty() {
                format!("at the records' highest (iteration {iteration})")
            } else {
                "then".to_owned()
            };
            // On CUDA, activations are what the allocator holds beyond the tensors
            // counted: a small model's can be mostly cuBLAS's workspaces (README).
            let what = if name == "activations" && reserved.is_some() {
                " (allocated memory no tensor object owns: saved for backward, and \
                 library workspaces such as cuBLAS's)"
            } else {
                ""
            };
            summary.push_str(&format!(
                "; {then} {name}{what} is the largest category ({:.0} %)",
                *top as f64 * 100.0 / recorded as f64
            ));
        }
    }
    let (snapshot, alive_by_site) = alive.map_or((None, Vec::new()), |(p, s)| (Some(p), s));
    if let Some(site) = alive_by_site.first() {
        summary.push_str(&format!(
            "; at the snapshot's peak the largest call site is {} ({})",
            site.site,
            human_bytes(site.bytes)
        ));
    }
    let next = rank
        .advice
        .first()
        .map_or(String::new(), |a| a.advice.clone());
    Some(finding(
        rank,
        FindingKind::Peak,
        severity,
        summary,
        Stake::Bytes { value: held, share },
        Evidence::Peak(PeakEvidence {
            iteration,
            allocated_bytes: allocated,
            reserved_bytes: reserved,
            device_total_bytes: total,
            categories_bytes: categories,
            snapshot,
            alive_by_site,
        }),
        next,
    ))
}

fn leak(rank: &RunReport) -> Vec<Finding> {
    let verdict = &rank.leak.leak;
    if !verdict.suspected {
        return Vec::new();
    }
    let trend = verdict
        .category
        .as_deref()
        .and_then(|c| rank.leak.trends.get(c));
    let slope = trend.map(|t| t.slope_bytes_per_1k_iters);
    let grew = trend.map_or(0, |t| t.growth_bytes.max(0.0) as u64);
    let total = rank.summary.device_total_bytes;
    let mut out = vec![finding(
        rank,
        FindingKind::Leak,
        Severity::High,
        format!("memory leak suspected: {}", verdict.reason),
        Stake::Bytes {
            value: grew,
            share: share_of(grew, total),
        },
        Evidence::Leak {
            verdict: verdict.clone(),
            slope_bytes_per_1k_iters: slope,
        },
        "gpuscope.MemoryProfiler(snapshot_at=[N]) at two iterations, then gpuscope \
         snapshot --diff on the two: the call sites that grew"
            .to_owned(),
    )];
    if let Some(estimate) = &rank.oom_estimate {
        out.push(finding(
            rank,
            FindingKind::OomForecast,
            Severity::Medium,
            format!(
                "at this rate {} reaches the device's {} near iteration {}",
                estimate.series,
                human_bytes(estimate.device_total_bytes),
                estimate.iteration
            ),
            Stake::Bytes {
                value: estimate.current_bytes,
                share: share_of(estimate.current_bytes, Some(estimate.device_total_bytes)),
            },
            Evidence::OomForecast(estimate.clone()),
            String::new(),
        ));
    }
    out
}

fn allocator(rank: &RunReport) -> Option<Finding> {
    let f = rank.fragmentation.as_ref()?;
    let real_ooms = f.ooms.unwrap_or(0).saturating_sub(f.impossible_ooms);
    let severity = match f.verdict {
        Verdict::Fragmented if real_ooms > 0 => Severity::High,
        Verdict::Fragmented | Verdict::Pressure => Severity::Medium,
        Verdict::Cache | Verdict::None => Severity::Info,
    };
    let unused = f.peak_reserved_bytes.saturating_sub(f.peak_allocated_bytes);
    let next = match f.verdict {
        Verdict::Fragmented => "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        Verdict::Pressure if f.process_limit().is_some() => {
            "raise the process's memory cap (torch.cuda.set_per_process_memory_fraction or \
             the scheduler's limit), or a smaller batch"
        }
        Verdict::Pressure => "a smaller batch, activation checkpointing or mixed precision",
        Verdict::Cache | Verdict::None => "",
    };
    Some(finding(
        rank,
        FindingKind::Allocator,
        severity,
        format!("allocator: {}", f.reason),
        Stake::Bytes {
            value: unused,
            share: share_of(unused, rank.summary.device_total_bytes),
        },
        Evidence::Allocator(f.clone()),
        next.to_owned(),
    ))
}

fn host_growth(rank: &RunReport) -> Option<Finding> {
    let h = rank.host_memory.as_ref().filter(|h| h.growing)?;
    let severity = if h.ram_exhausted_near_iteration.is_some() {
        Severity::High
    } else {
        Severity::Medium
    };
    Some(finding(
        rank,
        FindingKind::HostGrowth,
        severity,
        format!("host memory grows: {}", h.reason),
        Stake::Bytes {
            value: h.current_bytes,
            share: None,
        },
        Evidence::HostGrowth(h.clone()),
        "tracemalloc or memray on the training process: the Python objects that \
         accumulate"
            .to_owned(),
    ))
}

fn spread(run: &RunInputs) -> Option<Finding> {
    let s = run.spread?;
    let (name, widest) = s
        .figures
        .iter()
        .max_by(|a, b| a.1.spread_percent.total_cmp(&b.1.spread_percent))?;
    let severity = if widest.spread_percent > RANK_SPREAD_PERCENT {
        Severity::Low
    } else {
        Severity::Info
    };
    Some(Finding {
        source: FindingSource::Memory,
        rank: None,
        kind: FindingKind::RankSpread,
        severity,
        summary: format!(
            "{} ranks: {name} differs most, {:.0} % between rank {} ({}) and rank {} ({})",
            s.ranks.len(),
            widest.spread_percent,
            widest.min_rank,
            human_bytes(widest.min_bytes),
            widest.max_rank,
            human_bytes(widest.max_bytes)
        ),
        stake: Stake::Bytes {
            value: widest.max_bytes - widest.min_bytes,
            share: None,
        },
        evidence: Evidence::RankSpread {
            ranks: s.ranks.clone(),
            figures: s.figures.clone(),
        },
        next: String::new(),
        anchor: Anchor::Memory,
    })
}

#[allow(clippy::too_many_arguments)]
fn finding(
    rank: &RunReport,
    kind: FindingKind,
    severity: Severity,
    summary: String,
    stake: Stake,
    evidence: Evidence,
    next: String,
) -> Finding {
    Finding {
        source: FindingSource::Memory,
        rank: Some(rank.rank),
        kind,
        severity,
        summary,
        stake,
        evidence,
        next,
        anchor: Anchor::Memory,
    }
}
