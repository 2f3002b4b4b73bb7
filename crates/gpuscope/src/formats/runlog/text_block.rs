//! One memory record as a block of the `tensor_profile_<ts>.log` text log, line for line as its
//! `memory_profiler.py` appends them, so that its analyzer's regexes (`Iteration (\d+)`,
//! `Allocated: ([\d.]+) MB`, `Reserved: ...`, `Fragmentation: ([\d.]+)%`,
//! `Total Tensors: (\d+)`) read ours too. MB means 2^20 bytes.

use std::fmt::Write;

use crate::model::memory::MemoryRecord;
use crate::model::units::ByteUnit;

const RULE: &str =
    "================================================================================";
/// How many large tensors a block lists.
pub(crate) const TOP_LARGE: usize = 5;

/// The block for `record`, starting with a blank line; `local_time` is the record's time
/// as `YYYY-mm-dd HH:MM:SS`.
pub fn format_block(record: &MemoryRecord, local_time: &str) -> String {
    let mut out = String::with_capacity(1024);
    let (allocated, reserved, fragmentation) = match &record.allocator {
        Some(a) => (
            a.allocated_bytes,
            a.reserved_bytes,
            a.fragmentation_percent(),
        ),
        // No caching allocator on CPU: the census stands for both, and says so below.
        None => (record.census_bytes, record.census_bytes, 0.0),
    };
    let _ = writeln!(out);
    let _ = writeln!(out, "{RULE}");
    let _ = writeln!(out, "Iteration {} | {local_time}", record.iteration);
    let _ = writeln!(out, "{RULE}");
    let _ = writeln!(out, "Total Tensors: {}", record.tensor_count);
    let _ = writeln!(
        out,
        "Allocated: {:.2} MB | Reserved: {:.2} MB | Fragmentation: {fragmentation:.1}%",
        ByteUnit::Mib.of(allocated),
        ByteUnit::Mib.of(reserved),
    );
    if record.allocator.is_none() {
        let _ = writeln!(
            out,
            "(CPU run: no caching allocator; both figures are the census of tensor storages)"
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Tensor Categories:");
    let mut categories = record.categories_bytes.measured();
    categories.sort_by_key(|c| std::cmp::Reverse(c.1));
    for (name, bytes) in categories {
        let _ = writeln!(out, "  {name:<15}: {:8.2} MB", ByteUnit::Mib.of(bytes));
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Data Types:");
    let mut dtypes: Vec<_> = record.dtypes_bytes.iter().collect();
    dtypes.sort_by_key(|d| std::cmp::Reverse(*d.1));
    for (name, bytes) in dtypes {
        let _ = writeln!(out, "  {name:<15}: {:8.2} MB", ByteUnit::Mib.of(*bytes));
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Large Tensors (>{}MB): {}",
        (ByteUnit::Mib.of(record.large_threshold_bytes) * 1000.0).round() / 1000.0,
        record.large_tensor_count
    );
    if !record.large_tensors.is_empty() {
        let _ = writeln!(out, "Top {TOP_LARGE} largest:");
        for t in record.large_tensors.iter().take(TOP_LARGE) {
            let _ = writeln!(
                out,
                "  {:8.2} MB | shape={} | dtype={}",
                ByteUnit::Mib.of(t.bytes),
                python_tuple(&t.shape),
                t.dtype
            );
        }
    }
    out
}

/// A shape as Python prints a tuple: `()`, `(5,)`, `(3, 4)`.
fn python_tuple(shape: &[i64]) -> String {
    match shape {
        [] => "()".to_owned(),
        [one] => format!("({one},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::{AllocatorStats, Categories, LargeTensor, SystemStats};

    fn record() -> MemoryRecord {
        let mib = 1u64 << 20;
        MemoryRecord {
            iteration: 500,
            time: 0.0,
            rank: 0,
            device: "cuda:0".into(),
            categories_bytes: Categories {
                parameters: Some(1012 * mib + 8 * mib / 10),
                gradients: Some(0),
                optimizer_state: Some(0),
                buffers: Some(0),
                activations: Some(896 * mib),
                other: None,
            },
            modules_bytes: Default::default(),
            dtypes_bytes: [
                ("float32".to_owned(), 1896 * mib),
                ("int64".to_owned(), 48 * mib),
            ]
            .into_iter()
            .collect(),
            tensor_count: 410,
            census_bytes: 0,
            large_tensors: vec![LargeTensor {
                bytes: 270_000_000,
                shape: vec![1_500_000, 15, 3],
                dtype: "float32".into(),
                device: "cuda:0".into(),
                name: None,
                category: "parameters".into(),
            }],
            large_tensor_count: 1,
            large_tensor_bytes: 270_000_000,
            large_threshold_bytes: 100 * mib,
            allocator: Some(AllocatorStats {
                allocated_bytes: 2_038_676_439, // 1944.23 MB
                reserved_bytes: 2_543_703_982,  // 2425.87 MB
                ..Default::default()
            }),
            system: SystemStats::default(),
            losses: Default::default(),
            sections: Default::default(),
            gradients: None,
            autocast: None,
        }
    }

    #[test]
    fn block_matches_the_text_log_layout_line_for_line() {
        let block = format_block(&record(), "2026-01-28 14:02:05");
        // The first block of ../shared/data/logs/tensor_profile_20260128_140205.log, with our
        // figures: same separators, spacing, number widths and ordering.
        let expected = "
================================================================================
Iteration 500 | 2026-01-28 14:02:05
================================================================================
Total Tensors: 410
Allocated: 1944.23 MB | Reserved: 2425.87 MB | Fragmentation: 19.9%

Tensor Categories:
  parameters     :  1012.80 MB
  activations    :   896.00 MB
  gradients      :     0.00 MB
  optimizer_state:     0.00 MB
  buffers        :     0.00 MB

Data Types:
  float32        :  1896.00 MB
  int64          :    48.00 MB

Large Tensors (>100MB): 1
Top 5 largest:
    257.49 MB | shape=(1500000, 15, 3) | dtype=float32
";
        assert_eq!(block, expected);
    }

    #[test]
    fn cpu_blocks_use_the_census_and_say_so() {
        let mut r = record();
        r.allocator = None;
        r.census_bytes = 3 << 20;
        r.large_tensors.clear();
        r.large_tensor_count = 0;
        let block = format_block(&r, "2026-01-28 14:02:05");
        assert!(block.contains("Allocated: 3.00 MB | Reserved: 3.00 MB | Fragmentation: 0.0%"));
        assert!(block.contains("CPU run"));
        assert!(block.ends_with("Large Tensors (>100MB): 0\n"));
    }

    #[test]
    fn shapes_print_as_python_tuples() {
        assert_eq!(python_tuple(&[]), "()");
        assert_eq!(python_tuple(&[5]), "(5,)");
        assert_eq!(python_tuple(&[3, 4]), "(3, 4)");
    }
}
