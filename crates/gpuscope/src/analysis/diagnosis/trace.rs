//! Findings of the profiler traces: per rank the step verdicts with the GPU's idle share,
//! whether it is launch-bound, and the largest gap with what the CPU did then; across ranks
//! the stragglers, beside their memory.

use super::evidence::{Evidence, StepEvidence};
use super::finding::{Anchor, Finding, FindingKind, FindingSource, Severity, Stake};
use super::RunInputs;
use crate::analysis::trace::classify::CollectiveKind;
use crate::analysis::trace::health::{HealthIssue, HealthKind};
use crate::analysis::trace::report::RankReport;
use crate::analysis::trace::steps::{Verdict, VerdictKind};
use crate::model::units::human_bytes;

/// A GPU idle this share of its kernel span (or of each step) or more is high.
pub const IDLE_HIGH_PERCENT: f64 = 50.0;

pub(super) fn findings(run: &RunInputs) -> Vec<Finding> {
    let Some(traces) = run.traces else {
        return Vec::new();
    };
    let mut out: Vec<Finding> = traces.ranks.iter().flat_map(steps).collect();
    out.extend(traces.health.iter().map(health));
    if let Some(comparison) = &traces.comparison {
        for s in &comparison.stragglers {
            let peak = run
                .ranks
                .iter()
                .find(|r| r.rank == s.rank)
                .and_then(|r| r.fragmentation.as_ref())
                .map(|f| f.peak_allocated_bytes);
            let memory = peak.map_or(String::new(), |p| {
                format!("; its memory peaked at {} allocated", human_bytes(p))
            });
            // On one machine rank R usually drives device R (LOCAL_RANK).
            let utilization = super::gpu::held_utilization(run, s.rank);
            let samples = utilization.map_or(String::new(), |u| {
                format!(
                    "; GPU {} (taken as its device) averaged {u:.0} % utilisation in gpu.jsonl",
                    s.rank
                )
            });
            out.push(Finding {
                source: FindingSource::Trace,
                rank: Some(s.rank),
                kind: FindingKind::Straggler,
                severity: Severity::Medium,
                summary: format!(
                    "rank {} straggles: its compute time is {:+.0} % over the ranks' \
                     median{memory}{samples}",
                    s.rank, s.compute_over_median_percent
                ),
                stake: Stake::StepTime {
                    percent: s.compute_over_median_percent.clamp(0.0, 100.0),
                },
                evidence: Evidence::Straggler {
                    straggler: s.clone(),
                    ranks: comparison.ranks.clone(),
                    peak_allocated_bytes: peak,
                    gpu_utilization_percent: utilization,
                },
                next: "compare its kernels with another rank's: gpuscope trace \
                       rankA.json.gz --diff rankB.json.gz"
                    .to_owned(),
                anchor: Anchor::Trace,
            });
        }
    }
    out
}

/// What makes a trace's figures incomplete: `medium` when they undercount or cannot be
/// lined up (dropped kernels, clock skew), `low` otherwise.
fn health(issue: &HealthIssue) -> Finding {
    let (severity, next) = match issue.kind {
        HealthKind::DroppedKernels => (
            Severity::Medium,
            "profile fewer steps per cycle (active=...), or raise CUPTI's buffers",
        ),
        HealthKind::ClockSkew => (
            Severity::Medium,
            "compare ranks by durations, not start times; sync the hosts' clocks (chrony/NTP)",
        ),
        HealthKind::NoMemoryEvents => (Severity::Low, "gpuscope.profile with profile_memory=True"),
        HealthKind::NoShapes => (Severity::Low, "gpuscope.profile with record_shapes=True"),
        HealthKind::SingleStep => (
            Severity::Low,
            "a schedule with active=3 or more, and prof.step() once per iteration",
        ),
        HealthKind::CudaGraphs => (Severity::Low, ""),
        HealthKind::NoRankMetadata => (
            Severity::Low,
            "name each rank's trace rank<R>.* (gpuscope.profile does) or profile under \
             torch.distributed",
        ),
    };
    Finding {
        source: FindingSource::Trace,
        rank: issue.rank,
        kind: FindingKind::TraceHealth,
        severity,
        summary: format!("trace health ({}): {}", issue.kind, issue.detail),
        stake: Stake::None,
        evidence: Evidence::TraceHealth(issue.clone()),
        next: next.to_owned(),
        anchor: Anchor::Trace,
    }
}

/// The step findings of one rank: one per verdict, or one saying what the trace shows.
fn steps(rank: &RankReport) -> Vec<Finding> {
    let idle = rank.temporal.as_ref().map(|t| t.idle_time_percent);
    let mean_ms = rank.steps.as_ref().map(|s| s.mean.duration_us / 1000.0);
    let evidence = |verdict: Option<&Verdict>| {
        Evidence::Steps(StepEvidence {
            trace: rank.path.clone(),
            steps: rank.steps.as_ref().map_or(0, |s| s.steps.len()),
            mean_step_ms: mean_ms,
            gpu_idle_percent: idle,
            verdict: verdict.cloned(),
            launch_bound: rank.launch_bound,
            largest_gap: rank.largest_gaps.first().cloned(),
        })
    };
    let finding = |severity, summary, percent, verdict: Option<&Verdict>, next: &str| Finding {
        source: FindingSource::Trace,
        rank: Some(rank.rank),
        kind: if rank.launch_bound && verdict.is_none() {
            FindingKind::LaunchBound
        } else {
            FindingKind::Steps
        },
        severity,
        summary,
        stake: Stake::StepTime { percent },
        evidence: evidence(verdict),
        next: next.to_owned(),
        anchor: Anchor::Trace,
    };
    let verdicts = rank.steps.as_ref().map_or(&[][..], |s| &s.verdicts[..]);
    if !verdicts.is_empty() {
        return verdicts
            .iter()
            .map(|v| {
                let severity =
                    if v.kind == VerdictKind::GpuStarved && v.percent >= IDLE_HIGH_PERCENT {
                        Severity::High
                    } else {
                        Severity::Medium
                    };
                let mut summary = v.advice.clone();
                if v.kind == VerdictKind::GpuStarved {
                    summary.push_str(&launch_bound_and_gap(rank));
                }
                finding(
                    severity,
                    summary,
                    v.percent,
                    Some(v),
                    next_for(v.kind, v.collective, rank),
                )
            })
            .collect();
    }
    let Some(idle) = idle else {
        return vec![finding(
            Severity::Info,
            format!(
                "no GPU work in this trace ({} events): a CPU profile",
                rank.events
            ),
            0.0,
            None,
            "",
        )];
    };
    let severity = if idle >= IDLE_HIGH_PERCENT {
        Severity::Medium
    } else {
        Severity::Info
    };
    let steps = mean_ms.map_or(String::new(), |ms| format!("; mean step {ms:.1} ms"));
    let summary = format!(
        "GPU idle {idle:.0} % of its kernel span{steps}, no step verdict{}",
        launch_bound_and_gap(rank)
    );
    let next = if rank.launch_bound {
        next_for(VerdictKind::LaunchOverhead, None, rank)
    } else {
        ""
    };
    vec![finding(severity, summary, idle, None, next)]
}

/// `; launch-bound; largest gap 1.03 ms during Optimizer.step`, as far as known.
fn launch_bound_and_gap(rank: &RankReport) -> String {
    let mut out = String::new();
    if rank.launch_bound {
        out.push_str("; launch-bound: most kernels are shorter than their launch");
    }
    if let Some(gap) = rank.largest_gaps.first() {
        out.push_str(&format!(
            "; largest GPU gap {:.2} ms at {:.1} ms",
            gap.duration_us / 1000.0,
            gap.start_us / 1000.0
        ));
        if let Some(c) = gap.cpu.first() {
            out.push_str(&format!(", the CPU in {}", c.name));
        }
    }
    out
}

/// What to try first against a step verdict of `kind` (about `collective`, for
/// communication).
fn next_for(
    kind: VerdictKind,
    collective: Option<CollectiveKind>,
    rank: &RankReport,
) -> &'static str {
    match kind {
        VerdictKind::InputPipeline => "DataLoader(num_workers=..., pin_memory=True)",
        VerdictKind::GpuStarved => {
            let synchronising = rank.steps.as_ref().is_some_and(|s| s.mean.synchronising());
            match (rank.launch_bound, synchronising) {
                (true, true) => {
                    "torch.compile(model, mode=\"reduce-overhead\") or CUDA graphs, and no \
                     .item() in the step"
                }
                (true, false) => "torch.compile(model, mode=\"reduce-overhead\") or CUDA graphs",
                (false, true) => "remove .item()/.cpu()/print of tensors from the step",
                (false, false) => {
                    "torch.compile(model) to fuse operators, or more work per step (a larger \
                     batch)"
                }
            }
        }
        VerdictKind::LaunchOverhead
            if rank
                .steps
                .as_ref()
                .is_some_and(|s| s.mean.graph_replay_us > 0.0) =>
        {
            "fewer graph breaks: torch._dynamo.explain(model)(*inputs) lists them"
        }
        VerdictKind::LaunchOverhead => {
            "torch.compile(model, mode=\"reduce-overhead\") or CUDA graphs"
        }
        VerdictKind::HostWaits => {
            "pin_memory=True, .to(device, non_blocking=True), and no .item()/.cpu() in the step"
        }
        VerdictKind::AllocatorCalls => {
            "gpuscope snapshot of an allocator snapshot; no torch.cuda.empty_cache() in the loop"
        }
        VerdictKind::RuntimeCalls => "make the per-step setup calls once, outside the loop",
        VerdictKind::DataMovement => "pin_memory=True and .to(device, non_blocking=True)",
        VerdictKind::Communication => match collective.unwrap_or(CollectiveKind::Other) {
            CollectiveKind::AllReduce => "overlap communication: DDP bucket_cap_mb, no_sync()",
            CollectiveKind::AllGather | CollectiveKind::ReduceScatter => {
                "FSDP forward_prefetch / backward_prefetch, or HYBRID_SHARD"
            }
            CollectiveKind::Exchange => {
                "overlap the all-to-all with computation (a pipelined loop) and balance the \
                 shards"
            }
            CollectiveKind::Broadcast => {
                "DDP(broadcast_buffers=False) when the buffers need no sync"
            }
            CollectiveKind::Other => "overlap communication with computation, or send less",
        },
    }
}
