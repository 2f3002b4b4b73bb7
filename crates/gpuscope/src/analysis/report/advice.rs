//! Advice, each naming the figure that triggered it and a stable kind: activations
//! dominating a run short of memory; float32 holding nearly everything in a GPU run whose
//! forward does not run under autocast; what the allocator's counters say (fragmentation
//! or memory pressure); host memory that keeps growing.

use serde::Serialize;

use super::allocator_verdict::{Fragmentation, Level, Verdict};
use super::host_growth::HostGrowth;
use crate::model::memory::{percent, MemoryRecord};
use crate::model::units::ByteUnit;

/// Activations above this share of the categories call for checkpointing, where memory
/// is short.
pub const ACTIVATIONS_DOMINATE_PERCENT: f64 = 50.0;
/// A GPU run whose peak reserved memory reaches this share of the device's is short of
/// memory (README, "Checkpointing advice").
pub const NEAR_FULL_PERCENT: f64 = 90.0;
/// On CPU, activations are the C heap beyond the counted tensors, which a library's own
/// buffers move too (torch.profiler's added 7 MB to the demo's clean run, all of its
/// "activations"): below this it is no reason to checkpoint.
pub const CPU_ACTIVATIONS_MIN_BYTES: u64 = 256 << 20;
/// float32 above this share of a GPU run's tensors calls for mixed precision.
pub const FLOAT32_PERCENT: f64 = 90.0;

/// What a piece of advice is about; serialised as the JSON's stable `kind` string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AdviceKind {
    /// Activations dominate: checkpointing or a smaller batch.
    Checkpointing,
    /// float32 everywhere and no autocast in the forward.
    MixedPrecision,
    /// Fragmentation: expandable segments.
    ExpandableSegments,
    /// The run is at its memory limit: free memory.
    FreeMemory,
    /// The run is at a limit of its own, below the device's: raise it.
    RaiseMemoryCap,
    /// A high unallocated share with no counters to judge it by.
    CheckAllocatorCounters,
    /// Host memory grows steadily.
    HostMemoryGrowth,
}

/// The figure behind a piece of advice; serialised as the JSON's stable `figure` string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// Activations' share of the categories, percent.
    ActivationsSharePercent,
    /// float32's share of the tensors, percent.
    Float32SharePercent,
    /// Host memory's growth, MB per 1,000 iterations.
    HostMbPer1kIters,
    /// Out-of-memory errors the allocator counted.
    Ooms,
    /// Allocation retries the allocator counted.
    AllocRetries,
    /// Reserved memory not allocated, percent of reserved.
    FragmentationPercent,
}

impl Figure {
    /// `value` of this figure in words, for the text and HTML reports.
    pub fn reading(self, value: f64) -> String {
        match self {
            Figure::ActivationsSharePercent => format!("activations {value:.0} % of memory"),
            Figure::Float32SharePercent => format!("float32 {value:.0} % of tensors"),
            Figure::HostMbPer1kIters => {
                format!("host memory +{value:.0} MB per 1,000 iterations")
            }
            Figure::Ooms => format!("{value:.0} out-of-memory errors"),
            Figure::AllocRetries => format!("{value:.0} allocation retries"),
            Figure::FragmentationPercent => {
                format!("{value:.0} % of reserved memory unallocated")
            }
        }
    }
}

/// One piece of advice and the figure behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    /// What it is about.
    pub kind: AdviceKind,
    /// The figure that triggered it.
    pub figure: Figure,
    /// Its value.
    pub value: f64,
    /// What to do.
    pub advice: String,
}

impl Advice {
    fn new(kind: AdviceKind, figure: Figure, value: f64, advice: String) -> Self {
        Advice {
            kind,
            figure,
            value,
            advice,
        }
    }
}

/// Advice for a run whose last record is `last`, given what its allocator's counters and
/// its host memory say.
pub fn advise(
    last: &MemoryRecord,
    fragmentation: Option<&Fragmentation>,
    host: Option<&HostGrowth>,
) -> Vec<Advice> {
    let mut out = Vec::new();
    let categories = &last.categories_bytes;
    let on_gpu = last.allocator.is_some() || last.device.starts_with("cuda");
    if let Some(activations) = categories.activations {
        let share = percent(activations, categories.total());
        let short = if on_gpu {
            near_full(last, fragmentation)
        } else {
            activations >= CPU_ACTIVATIONS_MIN_BYTES
        };
        if share > ACTIVATIONS_DOMINATE_PERCENT && short {
            out.push(Advice::new(
                AdviceKind::Checkpointing,
                Figure::ActivationsSharePercent,
                share,
                "activations hold most of the memory: gradient checkpointing \
                 (torch.utils.checkpoint) or a smaller batch"
                    .into(),
            ));
        }
    }
    // Under autocast the census still sees float32: master weights, gradients and
    // optimizer state stay float32 by design. Only a forward seen without it is advised.
    let without_autocast = last.autocast.as_ref().is_some_and(|a| !a.enabled);
    let dtype_total: u64 = last.dtypes_bytes.values().sum();
    if let Some(&float32) = last.dtypes_bytes.get("float32") {
        let share = percent(float32, dtype_total);
        if on_gpu && without_autocast && share > FLOAT32_PERCENT {
            out.push(Advice::new(
                AdviceKind::MixedPrecision,
                Figure::Float32SharePercent,
                share,
                "nearly everything is float32 and the forward runs without autocast: mixed \
                 precision (torch.autocast with bfloat16 or float16) halves activations"
                    .into(),
            ));
        }
    }
    if let Some(f) = fragmentation {
        out.extend(allocator_advice(f));
    }
    if let Some(h) = host.filter(|h| h.growing) {
        out.push(Advice::new(
            AdviceKind::HostMemoryGrowth,
            Figure::HostMbPer1kIters,
            ByteUnit::Mib.of_f64(h.slope_bytes_per_1k_iters),
            "host memory grows every iteration: look for Python objects kept across \
             iterations (losses stored as tensors rather than .item(), outputs or graphs in \
             lists) or caches keyed by input shape"
                .into(),
        ));
    }
    out
}

/// Whether a GPU run's peak reserved memory over the run (the allocator verdict's, which
/// a run whose last record has allocator figures always has) reached
/// [`NEAR_FULL_PERCENT`] of the device's; false when the records do not give the device's
/// memory.
fn near_full(last: &MemoryRecord, fragmentation: Option<&Fragmentation>) -> bool {
    let total = last.allocator.as_ref().and_then(|a| a.device_total_bytes);
    match (fragmentation, total) {
        (Some(f), Some(total)) => percent(f.peak_reserved_bytes, total) >= NEAR_FULL_PERCENT,
        _ => false,
    }
}

/// The counter that triggered allocator advice: the OOMs when there were any, else the
/// retries.
fn triggering_counter(f: &Fragmentation) -> (Figure, f64) {
    match (f.ooms.unwrap_or(0), f.alloc_retries.unwrap_or(0)) {
        (0, retries) => (Figure::AllocRetries, retries as f64),
        (ooms, _) => (Figure::Ooms, ooms as f64),
    }
}

fn allocator_advice(f: &Fragmentation) -> Option<Advice> {
    match f.verdict {
        Verdict::Cache => None,
        Verdict::Fragmented if f.expandable_segments == Some(true) => None,
        Verdict::Fragmented => {
            let (figure, value) = triggering_counter(f);
            let set = match f.expandable_segments {
                Some(false) => "it is off in this run",
                _ => "unless it is on already",
            };
            Some(Advice::new(
                AdviceKind::ExpandableSegments,
                figure,
                value,
                format!(
                    "fragmentation made the allocator retry or fail: set \
                     PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ({set}), so that \
                     segments grow instead of being split"
                ),
            ))
        }
        Verdict::Pressure if f.process_limit().is_some() => {
            let (figure, value) = triggering_counter(f);
            Some(Advice::new(
                AdviceKind::RaiseMemoryCap,
                figure,
                value,
                "the run is at a memory limit of its own, below the device's: raise the \
                 process's cap (torch.cuda.set_per_process_memory_fraction, or the job \
                 scheduler's GPU memory limit), or free memory with a smaller batch"
                    .into(),
            ))
        }
        Verdict::Pressure => {
            let (figure, value) = triggering_counter(f);
            Some(Advice::new(
                AdviceKind::FreeMemory,
                figure,
                value,
                "the run is at its memory limit: free memory with a smaller batch or \
                 sequence length, activation checkpointing (torch.utils.checkpoint), bf16 \
                 autocast, or by releasing tensors kept across iterations"
                    .into(),
            ))
        }
        Verdict::None if f.level == Level::High => Some(Advice::new(
            AdviceKind::CheckAllocatorCounters,
            Figure::FragmentationPercent,
            f.percent,
            "much reserved memory is not allocated: if \
             torch.cuda.memory_stats()['num_alloc_retries'] rises, set \
             PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; record with gpuscope's \
             MemoryProfiler to have it judged"
                .into(),
        )),
        Verdict::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::report::allocator_verdict::fragmentation;
    use crate::model::memory::{AllocatorStats, Autocast, Categories};

    /// The last record of a GPU run on a device of 110 bytes (so that reserving 100 is
    /// near full).
    fn last(activations: u64, float32: u64, allocated: u64, reserved: u64) -> MemoryRecord {
        MemoryRecord {
            device: "cuda:0".into(),
            categories_bytes: Categories {
                parameters: Some(100),
                activations: Some(activations),
                ..Categories::default()
            },
            dtypes_bytes: [("float32".to_owned(), float32), ("int64".to_owned(), 10)]
                .into_iter()
                .collect(),
            tensor_count: 1,
            census_bytes: 100,
            large_threshold_bytes: 1,
            allocator: Some(AllocatorStats {
                allocated_bytes: allocated,
                reserved_bytes: reserved,
                device_total_bytes: Some(110),
                ..Default::default()
            }),
            autocast: Some(Autocast {
                enabled: false,
                dtype: None,
            }),
            ..MemoryRecord::default()
        }
    }

    fn advice_for(record: &MemoryRecord) -> Vec<Advice> {
        let f = fragmentation(std::slice::from_ref(record), &[]);
        advise(record, f.as_ref(), None)
    }

    fn kinds(advice: &[Advice]) -> Vec<AdviceKind> {
        advice.iter().map(|a| a.kind).collect()
    }

    #[test]
    fn each_advice_names_its_figure_and_kind() {
        let advice = advice_for(&last(300, 990, 50, 100));
        assert_eq!(
            kinds(&advice),
            [
                AdviceKind::Checkpointing,
                AdviceKind::MixedPrecision,
                AdviceKind::CheckAllocatorCounters
            ]
        );
        let figures: Vec<Figure> = advice.iter().map(|a| a.figure).collect();
        assert_eq!(
            figures,
            [
                Figure::ActivationsSharePercent,
                Figure::Float32SharePercent,
                Figure::FragmentationPercent
            ]
        );
        assert_eq!(advice[0].value, 75.0);
        assert_eq!(advice[1].value, 99.0);
        assert_eq!(advice[2].value, 50.0);
        let json = serde_json::to_value(&advice[1]).unwrap();
        assert_eq!(json["kind"], "mixed_precision");
        assert_eq!(json["figure"], "float32_share_percent");
        assert_eq!(
            Figure::Ooms.reading(18.0),
            "18 out-of-memory errors",
            "a count reads as one"
        );
    }

    /// Under autocast the census still sees float32 master weights, gradients and
    /// optimizer state; a run whose forward was not seen is not advised either.
    #[test]
    fn mixed_precision_only_for_a_forward_seen_without_autocast() {
        let mut under = last(50, 990, 80, 100);
        under.autocast = Some(Autocast {
            enabled: true,
            dtype: Some("bfloat16".into()),
        });
        assert!(advice_for(&under).is_empty());
        under.autocast = None;
        assert!(advice_for(&under).is_empty());
        under.autocast = Some(Autocast {
            enabled: false,
            dtype: None,
        });
        assert_eq!(kinds(&advice_for(&under)), [AdviceKind::MixedPrecision]);
    }

    /// A CPU run's activations are its heap beyond the census: 7 MB of it (what
    /// torch.profiler's buffers add) is no case for checkpointing, 1 GiB is.
    #[test]
    fn on_cpu_checkpointing_needs_activations_worth_it() {
        let cpu = |activations: u64| MemoryRecord {
            device: "cpu".into(),
            allocator: None,
            ..last(activations, 100, 0, 0)
        };
        assert!(advice_for(&cpu(7 << 20)).is_empty());
        assert_eq!(
            kinds(&advice_for(&cpu(1 << 30))),
            [AdviceKind::Checkpointing]
        );
    }

    /// On a GPU, only a run near its device's limit is told to pay for checkpointing.
    #[test]
    fn on_a_gpu_checkpointing_needs_memory_near_full() {
        let near = last(300, 50, 100, 100);
        assert_eq!(kinds(&advice_for(&near)), [AdviceKind::Checkpointing]);
        let mut far = near.clone();
        far.allocator.as_mut().unwrap().device_total_bytes = Some(1000);
        assert!(advice_for(&far).is_empty());
        // The run's peak counts, not only the last record's reservation.
        far.allocator.as_mut().unwrap().peak_reserved_bytes = 950;
        assert_eq!(kinds(&advice_for(&far)), [AdviceKind::Checkpointing]);
        let mut unknown = near;
        unknown.allocator.as_mut().unwrap().device_total_bytes = None;
        assert!(advice_for(&unknown).is_empty());
    }

    #[test]
    fn quiet_when_nothing_calls_for_it() {
        assert!(advice_for(&last(50, 50, 80, 100)).is_empty());
    }

    /// With counters and no rise, a high unallocated share gets no advice.
    #[test]
    fn a_cache_gets_no_advice_whatever_its_share() {
        let mut r = last(50, 50, 40, 100);
        let a = r.allocator.as_mut().unwrap();
        a.num_alloc_retries = Some(0);
        a.num_ooms = Some(0);
        assert!(advice_for(&r).is_empty());
    }
}
