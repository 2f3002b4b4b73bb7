//! Memory records rebuilt from TensorBoard scalars: the tags gpuscope writes
//! (`TensorProfiling/*`, `Memory/*`, `System/*`, `Loss/*`, see [`super::tags`]) and the
//! `Memory/Tensor_*` spelling other trainers use (`Memory/Tensor_Category/*_MB`, `Memory/Large_Tensors/*`, `vram_allocated`
//! and `vram_reserved` in GB), whoever wrote them. A record is made for every step with at
//! least one memory figure; losses logged at that step join it.
//!
//! What the tags cannot carry stays unmeasured: a record without `Tensor_Count` has a
//! tensor count of 0, one without `census_MB` takes the sum of its categories as census,
//! and the fragmentation percentage alone (those trainers log no allocated/reserved beside it)
//! gives no allocator figures.

use std::collections::BTreeMap;

use crate::model::memory::{AllocatorStats, MemoryRecord};
use crate::model::tensorboard::Series;
use crate::model::units::ByteUnit;

/// What one tag says about a record.
#[derive(Debug, Clone, PartialEq)]
enum Field {
    Category(String),
    Dtype(String),
    Module(String),
    LargeCount,
    LargeMb,
    TensorCount,
    CensusMb,
    AllocatedMb,
    ReservedMb,
    AllocatedGb,
    ReservedGb,
    PeakAllocatedMb,
    PeakReservedMb,
    InactiveSplitPercent,
    AllocRetries,
    Ooms,
    DeviceFreeMb,
    DeviceTotalMb,
    RssMb,
    HeapMb,
    CpuPercent,
    RamPercent,
    Loss(String),
}

impl Field {
    /// True for the fields that make a step a memory record.
    fn is_memory(&self) -> bool {
        !matches!(self, Field::Loss(_))
    }
}

/// The field a tag holds, or `None` for tags that are not memory or loss figures.
fn field_of(tag: &str) -> Option<Field> {
    let mb_name = |rest: &str| rest.strip_suffix("_MB").map(str::to_owned);
    if let Some(rest) = tag
        .strip_prefix("TensorProfiling/")
        .or_else(|| tag.strip_prefix("Memory/"))
    {
        if let Some(c) = rest.strip_prefix("Tensor_Category/") {
            return mb_name(c).map(Field::Category);
        }
        if let Some(d) = rest.strip_prefix("Tensor_DType/") {
            return mb_name(d).map(Field::Dtype);
        }
        if let Some(m) = rest.strip_prefix("Module/") {
            return mb_name(m).map(Field::Module);
        }
    }
    let field = match tag {
        "TensorProfiling/Large_Tensors/count" | "Memory/Large_Tensors/count" => Field::LargeCount,
        "TensorProfiling/Large_Tensors/total_MB" | "Memory/Large_Tensors/total_MB" => {
            Field::LargeMb
        }
        "TensorProfiling/Tensor_Count/total" => Field::TensorCount,
        "Memory/census_MB" => Field::CensusMb,
        "Memory/allocated_MB" => Field::AllocatedMb,
        "Memory/reserved_MB" => Field::ReservedMb,
        "Memory/peak_allocated_MB" => Field::PeakAllocatedMb,
        "Memory/peak_reserved_MB" => Field::PeakReservedMb,
        "Memory/inactive_split_percent" => Field::InactiveSplitPercent,
        "Memory/num_alloc_retries" => Field::AllocRetries,
        "Memory/num_ooms" => Field::Ooms,
        "Memory/device_free_MB" => Field::DeviceFreeMb,
        "Memory/device_total_MB" => Field::DeviceTotalMb,
        "System/rss_MB" => Field::RssMb,
        "System/heap_MB" => Field::HeapMb,
        "System/cpu_percent" => Field::CpuPercent,
        "System/ram_percent" => Field::RamPercent,
        "Loss/total" => Field::Loss("total".into()),
        _ => {
            if let Some(c) = tag.strip_prefix("Loss/component_") {
                return Some(Field::Loss(c.to_owned()));
            }
            // `Memory/Tensor_*` trainers log these in GB, under whatever section they chose.
            return match tag.rsplit('/').next()? {
                "vram_allocated" => Some(Field::AllocatedGb),
                "vram_reserved" => Some(Field::ReservedGb),
                _ => None,
            };
        }
    };
    Some(field)
}

/// A step's figures while they are gathered.
#[derive(Default)]
struct Gathered {
    time: f64,
    memory: bool,
    record: MemoryRecord,
    census: Option<u64>,
    allocated: Option<u64>,
    reserved: Option<u64>,
    inactive_split_percent: Option<f64>,
}

/// The memory records in `series` (the scalar series of one TensorBoard run), ordered by
/// step; empty when no tag holds a memory figure.
pub fn records_from_series<'a>(series: impl IntoIterator<Item = &'a Series>) -> Vec<MemoryRecord> {
    let mut steps: BTreeMap<i64, Gathered> = BTreeMap::new();
    for s in series {
        let Some(field) = field_of(&s.tag) else {
            continue;
        };
        for p in &s.points {
            let g = steps.entry(p.step).or_default();
            g.time = g.time.max(p.wall_time);
            g.memory |= field.is_memory();
            apply(g, &field, p.value);
        }
    }
    steps
        .into_iter()
        .filter(|(_, g)| g.memory)
        .map(|(step, g)| finish(step, g))
        .collect()
}

fn apply(g: &mut Gathered, field: &Field, value: f64) {
    let r = &mut g.record;
    let bytes = ByteUnit::Mib.to_bytes(value);
    let count = value.max(0.0).round() as u64;
    match field {
        Field::Category(name) => {
            // Categories of other tools' own invention have no place in the record.
            r.categories_bytes.set(name, bytes);
        }
        Field::Dtype(name) => {
            r.dtypes_bytes.insert(name.clone(), bytes);
        }
        Field::Module(name) => {
            r.modules_bytes.insert(name.clone(), bytes);
        }
        Field::LargeCount => r.large_tensor_count = count,
        Field::LargeMb => r.large_tensor_bytes = bytes,
        Field::TensorCount => r.tensor_count = count,
        Field::CensusMb => g.census = Some(bytes),
        Field::AllocatedMb => g.allocated = Some(bytes),
        Field::ReservedMb => g.reserved = Some(bytes),
        Field::AllocatedGb => g.allocated = Some(ByteUnit::Mib.to_bytes(value * 1024.0)),
        Field::ReservedGb => g.reserved = Some(ByteUnit::Mib.to_bytes(value * 1024.0)),
        Field::PeakAllocatedMb => allocator(r).peak_allocated_bytes = bytes,
        Field::PeakReservedMb => allocator(r).peak_reserved_bytes = bytes,
        Field::InactiveSplitPercent => g.inactive_split_percent = Some(value),
        Field::AllocRetries => allocator(r).num_alloc_retries = Some(count),
        Field::Ooms => allocator(r).num_ooms = Some(count),
        Field::DeviceFreeMb => allocator(r).device_free_bytes = Some(bytes),
        Field::DeviceTotalMb => allocator(r).device_total_bytes = Some(bytes),
        Field::RssMb => r.system.rss_bytes = Some(bytes),
        Field::HeapMb => r.system.heap_bytes = Some(bytes),
        Field::CpuPercent => r.system.cpu_percent = Some(value),
        Field::RamPercent => r.system.ram_percent = Some(value),
        Field::Loss(name) => {
            r.losses.insert(name.clone(), value);
        }
    }
}

fn allocator(r: &mut MemoryRecord) -> &mut AllocatorStats {
    r.allocator.get_or_insert_with(AllocatorStats::default)
}

fn finish(step: i64, g: Gathered) -> MemoryRecord {
    let mut r = g.record;
    r.iteration = step;
    r.time = g.time;
    r.census_bytes = g.census.unwrap_or_else(|| r.categories_bytes.total());
    match (g.allocated, g.reserved) {
        (Some(allocated), Some(reserved)) => {
            let a = allocator(&mut r);
            a.allocated_bytes = allocated;
            a.reserved_bytes = reserved;
            a.inactive_split_bytes = g
                .inactive_split_percent
                .map(|p| (p / 100.0 * reserved as f64).round() as u64);
            r.device = "cuda".into();
        }
        // Peaks without the current figures are not an allocator record worth keeping.
        _ => r.allocator = None,
    }
    if r.device.is_empty() {
        r.device = "cpu".into();
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_of_a_category_are_read() {
        assert_eq!(
            field_of("TensorProfiling/Tensor_Category/activations_MB"),
            Some(Field::Category("activations".into()))
        );
        assert_eq!(
            field_of("Memory/Tensor_Category/gradients_MB"),
            Some(Field::Category("gradients".into()))
        );
        assert_eq!(
            field_of("Memory/Tensor_DType/float32_MB"),
            Some(Field::Dtype("float32".into()))
        );
        assert_eq!(field_of("Train/vram_allocated"), Some(Field::AllocatedGb));
        assert_eq!(
            field_of("Loss/component_rgb"),
            Some(Field::Loss("rgb".into()))
        );
        assert_eq!(field_of("Training loss"), None);
        assert_eq!(field_of("Memory/Tensor_Category/parameters"), None);
    }
}
