//! The summaries `nsys stats` prints, computed from a read export: kernels
//! (cuda_gpu_kern_sum), memory operations by time and by size (cuda_gpu_mem_time_sum,
//! cuda_gpu_mem_size_sum), CUDA API calls (cuda_api_sum) and NVTX ranges (nvtx_sum), each
//! grouped and sorted as nsys's own report scripts do; plus GPU memory usage over time
//! from `--cuda-memory-usage true` captures, which nsys only draws in its GUI.
//!
//! Figures follow the scripts: time % of the listed rows' total, total, count, mean,
//! median (the mean of the two middle values for an even count), min, max and the sample
//! standard deviation (0 for a single instance). Pure functions: no I/O.

mod memory;
mod stats;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

pub use memory::{DeviceUsage, UsagePoint};
pub use stats::{DurationStats, SizeStats};

use crate::model::nsys::{ApiCall, Kernel, MemOps, NsysExport, NvtxRange, NvtxStyle, Section};
use stats::{by_total_time, size_stats};

/// How kernels are named and grouped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelNames {
    /// The demangled name with templates and parameters (nsys's default).
    #[default]
    Demangled,
    /// The base name (`cuda_gpu_kern_sum:base`).
    Base,
}

/// One row of the kernel summary: a kernel name with one launch configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRow {
    /// The kernel's name.
    pub name: String,
    /// Grid dimensions, `null` when the export has none.
    pub grid: Option<[i64; 3]>,
    /// Block dimensions, `null` when the export has none.
    pub block: Option<[i64; 3]>,
    /// Its executions' times.
    #[serde(flatten)]
    pub time: DurationStats,
}

/// One row of the memory operations summaries: `[CUDA memcpy Host-to-Device]`,
/// `[CUDA memset]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemOpRow {
    /// The operation.
    pub operation: String,
    /// Its executions' times.
    #[serde(flatten)]
    pub time: DurationStats,
    /// Its executions' sizes.
    #[serde(flatten)]
    pub size: SizeStats,
}

/// One row of the CUDA API summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiRow {
    /// The function as nsys prints it, without its `_v<version>` suffix (`cudaMalloc`).
    pub name: String,
    /// The function as the export names it (`cudaMalloc_v3020`).
    pub symbol: String,
    /// Its calls' times.
    #[serde(flatten)]
    pub time: DurationStats,
}

/// One row of the NVTX range summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvtxRow {
    /// The range's name (`domain:name` outside the default domain).
    pub range: String,
    /// Push/pop or start/end.
    pub style: NvtxStyle,
    /// Its instances' times.
    #[serde(flatten)]
    pub time: DurationStats,
}

/// Everything `gpuscope nsys stats` reports on one export. A part the export lacks is
/// `None`, with the reason under the same name in `unavailable`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NsysReport {
    /// The export.
    pub path: PathBuf,
    /// `EXPORT_PRODUCT_VERSION` of the nsys that wrote it.
    pub nsys_version: Option<String>,
    /// `EXPORT_SCHEMA_VERSION`.
    pub export_schema_version: Option<String>,
    /// When the session began, Unix seconds; `at_us` figures count from there.
    pub session_start_time: Option<f64>,
    /// How kernels are named.
    pub kernel_names: KernelNames,
    /// cuda_gpu_kern_sum, by total time.
    pub kernels: Option<Vec<KernelRow>>,
    /// cuda_gpu_mem_time_sum, by total time.
    pub memory_time: Option<Vec<MemOpRow>>,
    /// cuda_gpu_mem_size_sum, by total bytes.
    pub memory_size: Option<Vec<MemOpRow>>,
    /// cuda_api_sum, by total time.
    pub cuda_api: Option<Vec<ApiRow>>,
    /// nvtx_sum, by total time.
    pub nvtx: Option<Vec<NvtxRow>>,
    /// GPU memory in use over time, one entry per device.
    pub memory_usage: Option<Vec<DeviceUsage>>,
    /// Why a part is `None`, by its name.
    pub unavailable: BTreeMap<&'static str, String>,
}

/// The report on `export`.
pub fn nsys_report(export: &NsysExport, names: KernelNames) -> NsysReport {
    let mut unavailable = BTreeMap::new();
    let u = &mut unavailable;
    let kernels = part(u, "kernels", &export.kernels, |k| {
        kernel_summary(export, k, names)
    });
    let memory_time = part(u, "memory_time", &export.memops, |m| memops(m, false));
    let memory_size = part(u, "memory_size", &export.memops, |m| memops(m, true));
    let cuda_api = part(u, "cuda_api", &export.api_calls, |c| api_summary(export, c));
    let nvtx = part(u, "nvtx", &export.nvtx, |r| nvtx_summary(r));
    let memory_usage = part(u, "memory_usage", &export.memory_events, |e| {
        memory::usage(export, e)
    });
    NsysReport {
        path: export.path.clone(),
        nsys_version: export.meta.product_version.clone(),
        export_schema_version: export.meta.schema_version.clone(),
        session_start_time: export.meta.session_start_unix_ns.map(|ns| ns as f64 / 1e9),
        kernel_names: names,
        kernels,
        memory_time,
        memory_size,
        cuda_api,
        nvtx,
        memory_usage,
        unavailable,
    }
}

/// `f` of the section's rows, or `None` with the reason noted under `key`.
fn part<T, R>(
    unavailable: &mut BTreeMap<&'static str, String>,
    key: &'static str,
    section: &Section<T>,
    f: impl FnOnce(&T) -> R,
) -> Option<R> {
    match section {
        Ok(rows) => Some(f(rows)),
        Err(u) => {
            unavailable.insert(key, u.why.clone());
            None
        }
    }
}

fn kernel_summary(export: &NsysExport, kernels: &[Kernel], names: KernelNames) -> Vec<KernelRow> {
    let keyed = kernels.iter().map(|k| {
        let name = match names {
            KernelNames::Demangled => k.name,
            KernelNames::Base => k.short_name,
        };
        ((name, k.grid, k.block), k.end.saturating_sub(k.start))
    });
    by_total_time(keyed)
        .into_iter()
        .map(|((name, grid, block), time)| KernelRow {
            name: export.string(name),
            grid,
            block,
            time,
        })
        .collect()
}

/// Both memory summaries: by time (`by_size` false) or by total bytes.
fn memops(m: &MemOps, by_size: bool) -> Vec<MemOpRow> {
    let label = |kind: Option<i64>| match kind {
        None => "[CUDA memset]".to_owned(),
        Some(k) => match m.copy_kind_labels.get(&k) {
            Some(l) => format!("[CUDA memcpy {l}]"),
            None => format!("[CUDA memcpy kind {k}]"),
        },
    };
    let ops = m.copies.iter().chain(&m.sets);
    let mut sizes: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for op in ops.clone() {
        sizes.entry(label(op.kind)).or_default().push(op.bytes);
    }
    let mut rows: Vec<MemOpRow> =
        by_total_time(ops.map(|op| (label(op.kind), op.end.saturating_sub(op.start))))
            .into_iter()
            .map(|(operation, time)| {
                let size = size_stats(sizes.remove(&operation).unwrap_or_default());
                MemOpRow {
                    operation,
                    time,
                    size,
                }
            })
            .collect();
    if by_size {
        rows.sort_by(|a, b| {
            b.size
                .total_bytes
                .cmp(&a.size.total_bytes)
                .then_with(|| a.operation.cmp(&b.operation))
        });
    }
    rows
}

fn api_summary(export: &NsysExport, calls: &[ApiCall]) -> Vec<ApiRow> {
    by_total_time(
        calls
            .iter()
            .map(|c| (c.name, c.end.saturating_sub(c.start))),
    )
    .into_iter()
    .map(|(id, time)| {
        let symbol = export.string(id);
        ApiRow {
            name: without_version(&symbol).to_owned(),
            symbol,
            time,
        }
    })
    .collect()
}

/// `cudaMalloc_v3020` → `cudaMalloc`, as cuda_api_sum strips a trailing `_v` and four
/// characters.
fn without_version(symbol: &str) -> &str {
    let chars: Vec<(usize, char)> = symbol.char_indices().collect();
    match chars.len().checked_sub(6) {
        Some(at) if chars[at].1 == '_' && chars[at + 1].1 == 'v' => &symbol[..chars[at].0],
        _ => symbol,
    }
}

fn nvtx_summary(ranges: &[NvtxRange]) -> Vec<NvtxRow> {
    by_total_time(
        ranges
            .iter()
            .map(|r| ((r.name.clone(), r.style), r.end.saturating_sub(r.start))),
    )
    .into_iter()
    .map(|((range, style), time)| NvtxRow { range, style, time })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::without_version;

    #[test]
    fn api_names_lose_their_version_suffix_as_nsys_prints_them() {
        assert_eq!(without_version("cudaMalloc_v3020"), "cudaMalloc");
        assert_eq!(
            without_version("cudaStreamDestroy_v5050"),
            "cudaStreamDestroy"
        );
        assert_eq!(
            without_version("cuModuleGetLoadingMode"),
            "cuModuleGetLoadingMode"
        );
        assert_eq!(without_version("_v1234"), "");
        assert_eq!(without_version("x"), "x");
        assert_eq!(without_version("ünïcödé_v1"), "ünïcödé_v1");
    }
}
