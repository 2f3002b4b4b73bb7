//! What an Nsight Systems SQLite export holds that gpuscope summarises: GPU kernels, memory
//! copies and sets, CUDA API calls, NVTX ranges and CUDA memory usage events, with the
//! export's metadata. Times are the export's: integer nanoseconds since the session began.
//!
//! Each part is a [`Section`]: the rows, or why the export has none (a table nsys did not
//! create because the capture did not trace it, an empty table, a column this version of
//! nsys spells differently). Rows are plain structs: a 30-second capture of training holds
//! some hundred thousand kernels, tens of MB at most.

use std::collections::HashMap;
use std::path::PathBuf;

/// The rows of one part of an export, or why there are none.
pub type Section<T> = Result<T, Unavailable>;

/// Why a part of an export has no rows: one sentence for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// `no CUDA kernels in this capture (table CUPTI_ACTIVITY_KIND_KERNEL absent: ...)`.
    pub why: String,
}

/// One `nsys export --type sqlite` file, read.
#[derive(Debug, Clone)]
pub struct NsysExport {
    /// The file.
    pub path: PathBuf,
    /// Who wrote it and how the capture was configured.
    pub meta: ExportMeta,
    /// The GPUs of the target (`TARGET_INFO_GPU`), by device id.
    pub gpus: Vec<Gpu>,
    /// `StringIds`: the names that rows refer to by id.
    pub strings: HashMap<i64, String>,
    /// `CUPTI_ACTIVITY_KIND_KERNEL`.
    pub kernels: Section<Vec<Kernel>>,
    /// `CUPTI_ACTIVITY_KIND_MEMCPY` and `CUPTI_ACTIVITY_KIND_MEMSET`.
    pub memops: Section<MemOps>,
    /// `CUPTI_ACTIVITY_KIND_RUNTIME`.
    pub api_calls: Section<Vec<ApiCall>>,
    /// `NVTX_EVENTS` push/pop and start/end ranges.
    pub nvtx: Section<Vec<NvtxRange>>,
    /// `CUDA_GPU_MEMORY_USAGE_EVENTS` (captures with `--cuda-memory-usage true`).
    pub memory_events: Section<Vec<MemoryEvent>>,
}

impl NsysExport {
    /// The string with StringIds id `id`, or a placeholder naming the id.
    pub fn string(&self, id: i64) -> String {
        self.strings
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("[unknown string {id}]"))
    }
}

/// `META_DATA_EXPORT`, `META_DATA_CAPTURE` and `TARGET_INFO_SESSION_START_TIME`; every field
/// is `None` when the export does not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportMeta {
    /// `EXPORT_PRODUCT_VERSION`, e.g. `2026.1.1.204`.
    pub product_version: Option<String>,
    /// `EXPORT_SCHEMA_VERSION`, e.g. `3.24.14`.
    pub schema_version: Option<String>,
    /// Unix time of the session start, ns (`utcEpochNs`).
    pub session_start_unix_ns: Option<i64>,
    /// What the capture traced (`CAPTURE_EVENT_TYPE`: `Cuda`, `NvtxEvents`, `OSRuntime`...);
    /// `None` when the export has no capture metadata.
    pub traced: Option<Vec<String>>,
    /// `COLLECT_GPU_MEMORY_USAGE`: whether `--cuda-memory-usage true` was given.
    pub memory_usage_collected: Option<bool>,
}

/// One GPU of the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// CUDA device id, as kernels and memory events name it.
    pub id: i64,
    /// `NVIDIA GeForce RTX 4060 Ti`.
    pub name: Option<String>,
    /// Device memory, bytes.
    pub total_memory_bytes: Option<i64>,
}

/// One kernel execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// StringIds id of the demangled name with templates and parameters.
    pub name: i64,
    /// StringIds id of the base name (`shortName`); the demangled one when absent.
    pub short_name: i64,
    /// Grid dimensions, when the export has them.
    pub grid: Option<[i64; 3]>,
    /// Block dimensions, when the export has them.
    pub block: Option<[i64; 3]>,
}

/// Memory copies and sets on the GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemOps {
    /// `cudaMemcpy*` executions.
    pub copies: Vec<MemOp>,
    /// `cudaMemset*` executions.
    pub sets: Vec<MemOp>,
    /// `ENUM_CUDA_MEMCPY_OPER` labels by copy kind (`Host-to-Device`).
    pub copy_kind_labels: HashMap<i64, String>,
}

/// One memory copy or set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemOp {
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// Bytes copied or set.
    pub bytes: i64,
    /// The copy kind (`copyKind`); `None` for a memset.
    pub kind: Option<i64>,
}

/// One CUDA runtime or driver API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiCall {
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// StringIds id of the function name (`cudaMalloc_v3020`).
    pub name: i64,
}

/// Whether an NVTX range was pushed and popped on one thread, or started and ended anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum NvtxStyle {
    /// `nvtxRangePush` / `nvtxRangePop`.
    PushPop,
    /// `nvtxRangeStart` / `nvtxRangeEnd`.
    StartEnd,
}

/// One closed NVTX range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvtxRange {
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// Its text, prefixed with `domain:` outside the default domain.
    pub name: String,
    /// Push/pop or start/end.
    pub style: NvtxStyle,
}

/// One CUDA allocation or deallocation seen by `--cuda-memory-usage true`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryEvent {
    /// When, ns.
    pub at: i64,
    /// Bytes allocated or freed.
    pub bytes: i64,
    /// `true` for an allocation, `false` for a deallocation.
    pub allocation: bool,
    /// CUDA device id, when the export has it.
    pub device: Option<i64>,
    /// `ENUM_CUDA_MEM_KIND` id (0 pageable and 1 pinned are host memory), when present.
    pub mem_kind: Option<i64>,
}
