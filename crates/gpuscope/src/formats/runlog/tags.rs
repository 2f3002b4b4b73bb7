//! The TensorBoard scalars of a memory record, with the `TensorProfiling/*` tags exactly
//! (`TensorProfiling/...`, `Loss/...`), allocator figures under `Memory/` and process
//! figures under `System/`; and the custom-scalars layout that groups them into charts.

use crate::model::memory::MemoryRecord;
use crate::model::tensorboard::{Chart, ChartContent, ChartGroup};
use crate::model::units::ByteUnit;

/// How many modules get a TensorBoard tag per record: the largest.
pub const MODULE_TAGS: usize = 16;

/// (tag, value) for every figure of `record` that was measured; nothing for what was not
/// (a CPU run has no allocator figures, rather than zeros).
pub fn record_scalars(record: &MemoryRecord) -> Vec<(String, f64)> {
    // The tags' MB are 2^20 bytes, as the text log's.
    let mb = |bytes: u64| ByteUnit::Mib.of(bytes);
    let mut out = Vec::with_capacity(32);
    let mut push = |tag: String, value: f64| out.push((tag, value));
    for (name, bytes) in record.categories_bytes.measured() {
        push(
            format!("TensorProfiling/Tensor_Category/{name}_MB"),
            mb(bytes),
        );
    }
    for (dtype, bytes) in &record.dtypes_bytes {
        push(
            format!("TensorProfiling/Tensor_DType/{dtype}_MB"),
            mb(*bytes),
        );
    }
    // A chart with hundreds of lines says nothing: the largest modules only (the JSONL
    // has them all).
    let mut modules: Vec<_> = record.modules_bytes.iter().collect();
    modules.sort_by_key(|(_, bytes)| std::cmp::Reverse(**bytes));
    for (module, bytes) in modules.into_iter().take(MODULE_TAGS) {
        push(format!("TensorProfiling/Module/{module}_MB"), mb(*bytes));
    }
    push(
        "TensorProfiling/Large_Tensors/count".into(),
        record.large_tensor_count as f64,
    );
    push(
        "TensorProfiling/Large_Tensors/total_MB".into(),
        mb(record.large_tensor_bytes),
    );
    push(
        "TensorProfiling/Tensor_Count/total".into(),
        record.tensor_count as f64,
    );
    push("Memory/census_MB".into(), mb(record.census_bytes));
    if let Some(a) = &record.allocator {
        push(
            "TensorProfiling/fragmentation_percent".into(),
            a.fragmentation_percent(),
        );
        push("Memory/allocated_MB".into(), mb(a.allocated_bytes));
        push("Memory/reserved_MB".into(), mb(a.reserved_bytes));
        push(
            "Memory/peak_allocated_MB".into(),
            mb(a.peak_allocated_bytes),
        );
        push("Memory/peak_reserved_MB".into(), mb(a.peak_reserved_bytes));
        let optional = [
            ("Memory/inactive_split_percent", a.inactive_split_percent()),
            (
                "Memory/num_alloc_retries",
                a.num_alloc_retries.map(|n| n as f64),
            ),
            ("Memory/num_ooms", a.num_ooms.map(|n| n as f64)),
            ("Memory/device_free_MB", a.device_free_bytes.map(mb)),
            ("Memory/device_total_MB", a.device_total_bytes.map(mb)),
        ];
        for (tag, value) in optional {
            if let Some(v) = value {
                push(tag.into(), v);
            }
        }
    }
    let s = &record.system;
    let system = [
        ("System/rss_MB", s.rss_bytes.map(mb)),
        ("System/heap_MB", s.heap_bytes.map(mb)),
        ("System/cpu_percent", s.cpu_percent),
        ("System/ram_percent", s.ram_percent),
    ];
    for (tag, value) in system {
        if let Some(v) = value {
            push(tag.into(), v);
        }
    }
    for (path, section) in &record.sections {
        push(format!("Time/{path}_ms"), section.mean_ms);
    }
    if let Some(g) = &record.gradients {
        let norms = g
            .global_norm
            .map(|n| ("Grad/global_norm".to_owned(), n))
            .into_iter()
            .chain(
                g.group_norms
                    .iter()
                    .enumerate()
                    .filter_map(|(k, n)| n.map(|n| (format!("Grad/group_{k}_norm"), n))),
            )
            .chain(
                g.module_norms
                    .iter()
                    .filter_map(|(m, n)| n.map(|n| (format!("Grad/module/{m}_norm"), n))),
            );
        for (tag, value) in norms {
            push(tag, value);
        }
        let ratios = g
            .update_ratio
            .map(|r| ("Grad/update_ratio".to_owned(), r))
            .into_iter()
            .chain(
                g.module_update_ratios
                    .iter()
                    .filter_map(|(m, r)| r.map(|r| (format!("Grad/module/{m}_update_ratio"), r))),
            );
        for (tag, value) in ratios {
            push(tag, value);
        }
        push("Grad/zero_percent".into(), g.zero_percent);
        if let Some(c) = g.clipping().filter(|c| c.checked > 0) {
            push(
                "Grad/clipped_percent".into(),
                c.clipped as f64 * 100.0 / c.checked as f64,
            );
        }
    }
    for (name, value) in &record.losses {
        let tag = if name == "total" {
            "Loss/total".to_owned()
        } else {
            format!("Loss/component_{name}")
        };
        push(tag, *value);
    }
    out
}

/// Charts that put related tags on one plot (as trainers ask: "plot all `Loss/component_*` on the
/// same graph").
pub fn layout() -> Vec<ChartGroup> {
    let multiline = |title: &str, patterns: &[&str]| Chart {
        title: title.to_owned(),
        content: ChartContent::Multiline(patterns.iter().map(|p| (*p).to_owned()).collect()),
    };
    vec![
        ChartGroup {
            title: "Loss".into(),
            charts: vec![multiline(
                "components and total",
                &[r"Loss/component_.*", r"Loss/total"],
            )],
        },
        ChartGroup {
            title: "Memory".into(),
            charts: vec![
                multiline("categories (MB)", &[r"TensorProfiling/Tensor_Category/.*"]),
                multiline(
                    "allocator (MB)",
                    &[
                        r"Memory/allocated_MB",
                        r"Memory/reserved_MB",
                        r"Memory/census_MB",
                        r"System/heap_MB",
                    ],
                ),
                multiline("dtypes (MB)", &[r"TensorProfiling/Tensor_DType/.*"]),
                multiline("modules (MB)", &[r"TensorProfiling/Module/.*"]),
            ],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::SectionStats;

    #[test]
    fn each_timed_section_is_a_time_tag_of_its_mean() {
        let section = |mean_ms, parent: Option<&str>| SectionStats {
            calls: 4,
            mean_ms,
            parent: parent.map(str::to_owned),
            ..SectionStats::default()
        };
        let record = MemoryRecord {
            sections: [
                ("forward".to_owned(), section(3.5, None)),
                (
                    "forward/attention".to_owned(),
                    section(1.25, Some("forward")),
                ),
            ]
            .into_iter()
            .collect(),
            ..MemoryRecord::default()
        };
        let tags: Vec<(String, f64)> = record_scalars(&record)
            .into_iter()
            .filter(|(tag, _)| tag.starts_with("Time/"))
            .collect();
        assert_eq!(
            tags,
            [
                ("Time/forward_ms".to_owned(), 3.5),
                ("Time/forward/attention_ms".to_owned(), 1.25)
            ]
        );
        // A record without sections has no `sections` key in its JSON line.
        let plain = serde_json::to_value(MemoryRecord::default()).unwrap();
        assert!(plain.get("sections").is_none());
        let json = serde_json::to_string(&record).unwrap();
        let back: MemoryRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back.sections, record.sections);
    }
}
