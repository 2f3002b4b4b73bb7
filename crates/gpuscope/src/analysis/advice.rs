//! Advice from the seeds' guides, each naming the figure that triggered it: activations
//! dominating, float32 holding nearly everything on a GPU, fragmentation by the seed's
//! thresholds (with the allocator's inactive-split figure when recorded).

use serde::Serialize;

use crate::model::memory::{percent, MemoryRecord};

/// Activations above this share of the categories call for checkpointing.
pub const ACTIVATIONS_DOMINATE_PERCENT: f64 = 50.0;
/// On CPU, activations are the C heap beyond the counted tensors, which a library's own
/// buffers move too (torch.profiler's added 7 MB to the demo's clean run, all of its
/// "activations"): below this it is no reason to checkpoint.
pub const CPU_ACTIVATIONS_MIN_BYTES: u64 = 256 << 20;
/// float32 above this share of a GPU run's tensors calls for mixed precision.
pub const FLOAT32_PERCENT: f64 = 90.0;
/// The seed's fragmentation levels: below 10 % low, 10–30 % normal (for Gaussian
/// splatting), 30–40 % moderate, above 40 % high.
pub const FRAGMENTATION_LEVELS: [(f64, &str); 3] =
    [(10.0, "low"), (30.0, "normal"), (40.0, "moderate")];

/// One piece of advice and the figure behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    /// The figure's name (`activations_share_percent`, `fragmentation_percent`, ...).
    pub figure: String,
    /// Its value at the end of the run.
    pub value: f64,
    /// What to do.
    pub advice: String,
}

/// The fragmentation at the end of the run, as the seed grades it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fragmentation {
    /// `(reserved − allocated) / reserved` at the end.
    pub percent: f64,
    /// `low`, `normal`, `moderate` or `high`.
    pub level: &'static str,
    /// Reserved memory in split blocks no request can reuse whole, when recorded.
    pub inactive_split_percent: Option<f64>,
}

/// The fragmentation of the last record; `None` without allocator figures (CPU).
pub fn fragmentation(last: &MemoryRecord) -> Option<Fragmentation> {
    let a = last.allocator.as_ref()?;
    let percent = a.fragmentation_percent();
    let level = FRAGMENTATION_LEVELS
        .iter()
        .find(|(below, _)| percent < *below)
        .map_or("high", |(_, level)| level);
    Some(Fragmentation {
        percent,
        level,
        inactive_split_percent: a.inactive_split_percent(),
    })
}

/// Advice for a run whose last record is `last`.
pub fn advise(last: &MemoryRecord) -> Vec<Advice> {
    let mut out = Vec::new();
    let categories = &last.categories_bytes;
    let on_gpu = last.allocator.is_some() || last.device.starts_with("cuda");
    if let Some(activations) = categories.activations {
        let share = percent(activations, categories.total());
        if share > ACTIVATIONS_DOMINATE_PERCENT
            && (on_gpu || activations >= CPU_ACTIVATIONS_MIN_BYTES)
        {
            out.push(Advice {
                figure: "activations_share_percent".into(),
                value: share,
                advice: "activations hold most of the memory: gradient checkpointing \
                         (torch.utils.checkpoint) or a smaller batch"
                    .into(),
            });
        }
    }
    let dtype_total: u64 = last.dtypes_bytes.values().sum();
    if let Some(&float32) = last.dtypes_bytes.get("float32") {
        let share = percent(float32, dtype_total);
        if on_gpu && share > FLOAT32_PERCENT {
            out.push(Advice {
                figure: "float32_share_percent".into(),
                value: share,
                advice: "nearly everything is float32: mixed precision (torch.autocast with \
                         bfloat16 or float16) halves activations"
                    .into(),
            });
        }
    }
    if let Some(f) = fragmentation(last) {
        let advice = match f.level {
            "high" => Some(
                "fragmentation is high: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, \
                 or call torch.cuda.empty_cache() periodically",
            ),
            "moderate" => {
                Some("fragmentation is moderate: consider periodic torch.cuda.empty_cache()")
            }
            _ => None,
        };
        if let Some(advice) = advice {
            out.push(Advice {
                figure: "fragmentation_percent".into(),
                value: f.percent,
                advice: advice.into(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::{AllocatorStats, Categories};

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
                ..Default::default()
            }),
            ..MemoryRecord::default()
        }
    }

    fn figures(advice: &[Advice]) -> Vec<&str> {
        advice.iter().map(|a| a.figure.as_str()).collect()
    }

    #[test]
    fn each_advice_names_its_figure() {
        let advice = advise(&last(300, 990, 50, 100));
        assert_eq!(
            figures(&advice),
            [
                "activations_share_percent",
                "float32_share_percent",
                "fragmentation_percent"
            ]
        );
        assert_eq!(advice[0].value, 75.0);
        assert_eq!(advice[1].value, 99.0);
        assert_eq!(advice[2].value, 50.0);
        assert!(advice[2].advice.contains("expandable_segments"));
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
        assert!(figures(&advise(&cpu(7 << 20))).is_empty());
        assert_eq!(
            figures(&advise(&cpu(1 << 30))),
            ["activations_share_percent"]
        );
        // On a GPU the share alone decides, as before.
        assert_eq!(
            figures(&advise(&last(300, 50, 100, 100)))[0],
            "activations_share_percent"
        );
    }

    #[test]
    fn quiet_when_nothing_calls_for_it() {
        assert!(advise(&last(50, 50, 80, 100)).is_empty());
    }

    #[test]
    fn fragmentation_levels_are_the_seeds() {
        let level = |allocated| fragmentation(&last(0, 0, allocated, 100)).unwrap().level;
        assert_eq!(level(95), "low");
        assert_eq!(level(80), "normal");
        assert_eq!(level(65), "moderate");
        assert_eq!(level(55), "high");
        let mut cpu = last(0, 0, 0, 0);
        cpu.allocator = None;
        assert_eq!(fragmentation(&cpu), None);
    }
}
