//! A memory record: what the in-training profiler measured at one iteration. Serialised
//! as one line of `profiles/memory.jsonl`, the canonical machine format (sizes in bytes,
//! times in Unix seconds, `null` for what could not be measured).

use std::collections::BTreeMap;

use serde::de::{self, Visitor};
use serde::{Deserialize, Serialize};

/// One record of the memory profiler.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Training iteration the record was taken at.
    pub iteration: i64,
    /// Unix seconds.
    pub time: f64,
    /// Process rank (0 without torch.distributed).
    pub rank: u32,
    /// Device the figures are for (`cuda:0`, `cpu`).
    pub device: String,
    /// Bytes per category of tensor.
    pub categories_bytes: Categories,
    /// Parameters + gradients + optimizer state per submodule, by qualified name.
    pub modules_bytes: BTreeMap<String, u64>,
    /// Bytes per dtype (`float32`, `int64`, ...) over the tensors counted.
    pub dtypes_bytes: BTreeMap<String, u64>,
    /// Number of unique tensor storages counted.
    pub tensor_count: u64,
    /// Bytes of the unique tensor storages counted.
    pub census_bytes: u64,
    /// The largest tensors above the large-tensor threshold (top k), largest first.
    pub large_tensors: Vec<LargeTensor>,
    /// How many tensors are above the threshold (the list above may hold fewer).
    /// (Absent in records of early versions: 0.)
    #[serde(default)]
    pub large_tensor_count: u64,
    /// Their bytes in total.
    #[serde(default)]
    pub large_tensor_bytes: u64,
    /// The large-tensor threshold in bytes; 0 when unknown (records rebuilt from
    /// TensorBoard tags, which do not carry it).
    pub large_threshold_bytes: u64,
    /// CUDA caching-allocator figures; `null` on CPU, where there is no such allocator.
    pub allocator: Option<AllocatorStats>,
    /// Process and host figures.
    pub system: SystemStats,
    /// Loss components by name, and `total`. JSON has no NaN or infinity, so those are
    /// written as the strings `"NaN"`, `"Infinity"`, `"-Infinity"` (which Python's
    /// `float()` reads): a diverged loss stays visible.
    #[serde(with = "super::spelled::map")]
    pub losses: BTreeMap<String, f64>,
    /// Timed sections (`scope.section("render")`) over the iterations since the previous
    /// record, by path (`forward/attention` for a section inside another). Absent from
    /// runs that time none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sections: BTreeMap<String, SectionStats>,
    /// Gradient flow at the last `record_gradients` call before this record; absent from
    /// runs that do not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradients: Option<GradientStats>,
    /// Whether the model's forward ran under `torch.autocast` at its last call before
    /// this record; absent when the profiler has no model or saw no forward yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autocast: Option<Autocast>,
}

impl MemoryRecord {
    /// The memory of the tensors: the sum of the categories (activations included, which
    /// the census of counted tensors misses: on GPU they are allocated memory no tensor
    /// object owns), at least the census.
    pub fn tensor_bytes(&self) -> u64 {
        self.categories_bytes.total().max(self.census_bytes)
    }
}

/// Mixed precision as the model's forward saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Autocast {
    /// `torch.is_autocast_enabled(device_type)` inside the forward.
    pub enabled: bool,
    /// `torch.get_autocast_dtype(device_type)` when enabled (`bfloat16`, `float16`).
    pub dtype: Option<String>,
}

/// Gradient norms after `backward()`, before the optimizer step. Norms are L2 over the
/// gradients' elements; JSON has no infinity or NaN, so a non-finite norm is `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GradientStats {
    /// The iteration it was measured at.
    pub iteration: i64,
    /// Norm over every parameter's gradient.
    pub global_norm: Option<f64>,
    /// Norm per optimizer parameter group, in group order.
    pub group_norms: Vec<Option<f64>>,
    /// Norm per submodule (the memory breakdown's depth), by qualified name.
    pub module_norms: BTreeMap<String, Option<f64>>,
    /// Share of gradient elements that are exactly zero, percent.
    pub zero_percent: f64,
    /// Parameters that require a gradient but have none.
    pub missing: u64,
    /// With clipping: the max norm, and over the iterations since the previous record how
    /// often the global norm exceeded it and the mean factor it was scaled by when it did.
    pub clip_max_norm: Option<f64>,
    /// Iterations measured since the previous record.
    pub measured: u64,
    /// Of those, the ones clipping scaled down.
    pub clipped: u64,
    /// Mean of max_norm / global_norm over the clipped ones.
    pub mean_clip_factor: Option<f64>,
    /// Of the measured iterations, the ones whose global norm was finite: clipping is
    /// judged on those alone (a NaN norm neither clips nor passes). Absent in runs
    /// recorded before it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finite: Option<u64>,
    /// ‖w_after − w_before‖ / ‖w_before‖ across the optimizer step of the measured
    /// iteration (opt-in: `update_ratio=True`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_ratio: Option<f64>,
    /// The same per submodule.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub module_update_ratios: BTreeMap<String, Option<f64>>,
}

/// Clipping over one record's interval, counted on the iterations it can be judged on.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Clipping {
    /// Iterations whose global norm was finite.
    pub checked: u64,
    /// Of those, the ones clipping scaled down.
    pub clipped: u64,
    /// Sum of their scale factors.
    pub factor_sum: f64,
}

impl GradientStats {
    /// The interval's clipping, `None` when the run did not clip. Records from before
    /// `finite` was written count every measured iteration, except that a record whose
    /// own norm was non-finite is left out whole: how many of its iterations were
    /// finite is unknown.
    pub fn clipping(&self) -> Option<Clipping> {
        self.clip_max_norm?;
        let checked = match self.finite {
            Some(finite) => finite,
            None if self.global_norm.is_none() => return Some(Clipping::default()),
            None => self.measured,
        };
        // Records written before `finite` counted an infinite norm as clipped.
        let clipped = self.clipped.min(checked);
        Some(Clipping {
            checked,
            clipped,
            factor_sum: self.mean_clip_factor.unwrap_or(0.0) * clipped as f64,
        })
    }
}

/// One timed section's figures over a record's interval: wall time on CPU, GPU time from
/// CUDA events on CUDA.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SectionStats {
    /// Times it ran.
    pub calls: u64,
    /// Milliseconds per call: mean, median, 95th percentile, longest.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// Longest call.
    pub max_ms: f64,
    /// All its calls together.
    pub total_ms: f64,
    /// Its share of the iterations' wall time, percent; `null` without a whole iteration
    /// to compare with.
    pub share_percent: Option<f64>,
    /// The enclosing section's path; `null` at the top.
    pub parent: Option<String>,
    /// On CUDA, the highest allocated bytes inside it in the recorded iteration.
    pub peak_allocated_bytes: Option<u64>,
    /// Bytes it left allocated (CUDA) or added to the census (CPU) in the recorded
    /// iteration.
    pub net_bytes: Option<i64>,
}

/// Bytes per category. Parameters, gradients, optimizer state and buffers are counted
/// exactly from the model and optimizer; activations and other are what remains of the
/// allocator's (or on CPU, the heap's) figure, or what a heap scan found. `null` marks a
/// category that was not measured: a log written by another tool may not have it (the
/// `tensor_profile_<ts>.log` files other tools write have no optimizer state), and a
/// missing figure is not a zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Categories {
    /// `model.named_parameters()`, unique storages.
    pub parameters: Option<u64>,
    /// `.grad` of the parameters.
    pub gradients: Option<u64>,
    /// Tensors in `optimizer.state`.
    pub optimizer_state: Option<u64>,
    /// `model.named_buffers()`.
    pub buffers: Option<u64>,
    /// Intermediate tensors: the allocator's remainder.
    pub activations: Option<u64>,
    /// Tensors found outside model and optimizer by a heap scan.
    pub other: Option<u64>,
}

impl Categories {
    /// The category names, in the order they are listed.
    pub const NAMES: [&'static str; 6] = [
        "parameters",
        "gradients",
        "optimizer_state",
        "buffers",
        "activations",
        "other",
    ];

    /// (name, bytes) for every category that was measured, in a fixed order.
    pub fn measured(&self) -> Vec<(&'static str, u64)> {
        Self::NAMES
            .into_iter()
            .zip([
                self.parameters,
                self.gradients,
                self.optimizer_state,
                self.buffers,
                self.activations,
                self.other,
            ])
            .filter_map(|(name, bytes)| bytes.map(|b| (name, b)))
            .collect()
    }

    /// Sum of the measured categories.
    pub fn total(&self) -> u64 {
        self.measured().iter().map(|(_, b)| b).sum()
    }

    /// Sets the category called `name`; false when there is no such category.
    pub fn set(&mut self, name: &str, bytes: u64) -> bool {
        let slot = match name {
            "parameters" => &mut self.parameters,
            "gradients" => &mut self.gradients,
            "optimizer_state" => &mut self.optimizer_state,
            "buffers" => &mut self.buffers,
            "activations" => &mut self.activations,
            "other" => &mut self.other,
            _ => return false,
        };
        *slot = Some(bytes);
        true
    }
}

/// A tensor above the large-tensor threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LargeTensor {
    /// Bytes of its storage.
    pub bytes: u64,
    /// Its shape.
    pub shape: Vec<i64>,
    /// Its dtype (`float32`).
    pub dtype: String,
    /// Its device (`cuda:0`).
    pub device: String,
    /// Where it is known from (`encoder.weight`, `encoder.weight.grad`,
    /// `adam.exp_avg[encoder.weight]`), or `null`.
    pub name: Option<String>,
    /// Its category.
    pub category: String,
}

/// Figures of torch's CUDA caching allocator (`torch.cuda.memory_stats`,
/// `torch.cuda.mem_get_info`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AllocatorStats {
    /// Bytes in live allocations.
    pub allocated_bytes: u64,
    /// Bytes held by the allocator from the driver.
    pub reserved_bytes: u64,
    /// Highest allocated since the last peak reset.
    pub peak_allocated_bytes: u64,
    /// Highest reserved since the last peak reset.
    pub peak_reserved_bytes: u64,
    /// Bytes of free blocks that were split off allocations and cannot be returned.
    pub inactive_split_bytes: Option<u64>,
    /// Times the allocator freed its cache and retried a cudaMalloc.
    pub num_alloc_retries: Option<u64>,
    /// Out-of-memory errors the allocator raised.
    pub num_ooms: Option<u64>,
    /// Device memory in total (`mem_get_info`).
    pub device_total_bytes: Option<u64>,
    /// Device memory free, for every process (`mem_get_info`).
    pub device_free_bytes: Option<u64>,
    /// The allocator's settings string (`PYTORCH_CUDA_ALLOC_CONF`, or its newer name
    /// `PYTORCH_ALLOC_CONF`); `null` when neither is set or the record predates it.
    #[serde(default)]
    pub alloc_conf: Option<String>,
    /// Whether the allocator maps segments that grow (`expandable_segments:True`); `null`
    /// when unknown (records that predate it).
    #[serde(default)]
    pub expandable_segments: Option<bool>,
    /// The share of the device the process may allocate
    /// (`torch.cuda.set_per_process_memory_fraction`, 1.0 when not capped); `null` when
    /// unknown (records that predate it).
    #[serde(default)]
    pub memory_fraction: Option<f64>,
}

impl AllocatorStats {
    /// The unallocated share of reserved memory, `(reserved − allocated) / reserved`, in
    /// percent: the text log's `Fragmentation:` figure.
    pub fn fragmentation_percent(&self) -> f64 {
        percent(
            self.reserved_bytes.saturating_sub(self.allocated_bytes),
            self.reserved_bytes,
        )
    }

    /// The share of reserved memory in split blocks that no request can reuse whole.
    pub fn inactive_split_percent(&self) -> Option<f64> {
        self.inactive_split_bytes
            .map(|b| percent(b, self.reserved_bytes))
    }
}

/// Figures of the training process and its host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemStats {
    /// Resident set size of the process.
    pub rss_bytes: Option<u64>,
    /// Bytes in use by the C heap (glibc `mallinfo2`): on CPU, where tensors live.
    pub heap_bytes: Option<u64>,
    /// CPU use of the process since the previous sample, in percent of one core.
    pub cpu_percent: Option<f64>,
    /// Host memory in use, in percent.
    pub ram_percent: Option<f64>,
    /// Host memory in total; `null` in records that predate it.
    #[serde(default)]
    pub ram_total_bytes: Option<u64>,
}

/// `part / whole` in percent, 0 when `whole` is 0.
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// A line that was not used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// 1-based line number; 0 in files without lines (event files).
    pub line: usize,
    /// What was wrong with it.
    pub reason: String,
}

impl Skipped {
    /// `file:line: reason`, or `file: reason` without a line.
    pub fn describe(&self, file: &std::path::Path) -> String {
        match self.line {
            0 => format!("{}: {}", file.display(), self.reason),
            line => format!("{}:{line}: {}", file.display(), self.reason),
        }
    }
}

/// The records of one process (rank) of a run, and where they came from.
#[derive(Debug, Clone)]
pub struct RankRecords {
    /// The rank (from the file name, else the records, else 0).
    pub rank: u32,
    /// The files read, in order.
    pub files: Vec<std::path::PathBuf>,
    /// The records, ordered by iteration.
    pub records: Vec<MemoryRecord>,
    /// Lines skipped, with their file.
    pub skipped: Vec<(std::path::PathBuf, Skipped)>,
    /// Non-finite events (`profiles/nonfinite*.jsonl` beside the records), by iteration.
    pub nonfinite: Vec<super::health::NonfiniteEvent>,
    /// Out-of-memory errors `gpuscope.oom_guard` caught (`snapshots/oom*.txt` of the run
    /// directory), oldest first.
    pub ooms: Vec<super::oom::OomEvent>,
}

/// The JSON keys of a memory record and of each part of it, as serde reads and writes them:
/// `record` for the record itself, then each part by the record key it sits under (for
/// `large_tensors` and `sections`, the keys of one element). The Python profiler builds the
/// record as a dict; its tests hold that dict to these keys, so that neither side gains a
/// key the other does not know.
pub fn record_keys() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("record", serde_fields::<MemoryRecord>()),
        ("categories_bytes", serde_fields::<Categories>()),
        ("large_tensors", serde_fields::<LargeTensor>()),
        ("allocator", serde_fields::<AllocatorStats>()),
        ("system", serde_fields::<SystemStats>()),
        ("sections", serde_fields::<SectionStats>()),
        ("gradients", serde_fields::<GradientStats>()),
        ("autocast", serde_fields::<Autocast>()),
    ])
}

/// The field names of the struct `T` as its derived `Deserialize` names them (renames
/// applied), read from what it hands the deserializer: no list kept by hand.
fn serde_fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    // The deserializer stops at the struct's field list, so this always errs.
    let _ = T::deserialize(FieldNames(&mut fields));
    fields
}

/// A deserializer that only takes note of the field list a struct asks for.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> de::Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("field names taken"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_keys_are_the_serialised_keys() {
        let keys = record_keys();
        assert_eq!(keys["autocast"], ["enabled", "dtype"]);
        // A record with every optional part present serialises exactly the keys listed.
        let record = MemoryRecord {
            gradients: Some(GradientStats {
                update_ratio: Some(0.1),
                finite: Some(1),
                module_update_ratios: BTreeMap::from([("fc".to_owned(), None)]),
                ..GradientStats::default()
            }),
            autocast: Some(Autocast::default()),
            sections: BTreeMap::from([("fwd".to_owned(), SectionStats::default())]),
            allocator: Some(AllocatorStats::default()),
            ..MemoryRecord::default()
        };
        let json = serde_json::to_value(&record).unwrap();
        let names = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        let sorted = |k: &[&str]| {
            let mut k: Vec<String> = k.iter().map(|s| (*s).to_owned()).collect();
            k.sort();
            k
        };
        assert_eq!(names(&json), sorted(keys["record"]));
        assert_eq!(names(&json["gradients"]), sorted(keys["gradients"]));
        assert_eq!(names(&json["allocator"]), sorted(keys["allocator"]));
        assert_eq!(names(&json["sections"]["fwd"]), sorted(keys["sections"]));
    }
}
