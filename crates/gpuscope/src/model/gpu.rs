//! GPU samples: what a GPU source (NVML, nvidia-smi, a saved nvidia-smi output) and the
//! host said at one moment. One [`Sample`] is one line of `gpu.jsonl`. Every figure a
//! source could not give is `None` (`null` in JSON), never 0: newer drivers and containers
//! report no per-process memory, MIG devices no utilisation.

use serde::{Deserialize, Serialize};

use super::memory::percent;

/// The schema of one `gpu.jsonl` line and of `gpuscope monitor --format json`.
pub const SAMPLE_SCHEMA: &str = "gpuscope.gpu_sample/1";

/// Bytes in nvidia-smi's MiB.
pub const MIB: u64 = 1 << 20;

/// One GPU at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// The index nvidia-smi and NVML give the device.
    pub index: u32,
    /// Product name as the driver reports it (the default table truncates it: `GTX 108...`).
    pub name: String,
    /// `GPU-<uuid>`, when the source reports it.
    pub uuid: Option<String>,
    /// Device memory in use.
    pub memory_used_bytes: Option<u64>,
    /// Device memory in total.
    pub memory_total_bytes: Option<u64>,
    /// Share of the last sample period a kernel was running.
    pub utilization_percent: Option<f64>,
    /// GPU core temperature, degrees Celsius.
    pub temperature_c: Option<f64>,
    /// Power draw, watts.
    pub power_w: Option<f64>,
    /// Enforced power limit, watts.
    pub power_limit_w: Option<f64>,
    /// Processes with a context on the device.
    pub processes: Vec<GpuProcess>,
}

impl GpuSample {
    /// Memory used as a share of the total, when both are known and the total is not 0.
    pub fn memory_percent(&self) -> Option<f64> {
        share(self.memory_used_bytes, self.memory_total_bytes)
    }
}

/// A process using a GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// Its pid as the driver reports it: the host's pid namespace, which inside a
    /// container need not be this one's.
    pub pid: u32,
    /// Its name, from the driver or from this host's process table.
    pub name: Option<String>,
    /// GPU memory it holds; `None` where the driver says `[N/A]`.
    pub used_memory_bytes: Option<u64>,
}

/// The host's own figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSample {
    /// CPU use over all cores since the previous sample (0–100); `None` on the first.
    pub cpu_percent: Option<f64>,
    /// RAM in use (total less available).
    pub ram_used_bytes: Option<u64>,
    /// RAM installed.
    pub ram_total_bytes: Option<u64>,
}

impl HostSample {
    /// RAM used as a share of the total, when both are known and the total is not 0.
    pub fn ram_percent(&self) -> Option<f64> {
        share(self.ram_used_bytes, self.ram_total_bytes)
    }
}

/// A process and all its descendants (the command `gpuscope run` started).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeSample {
    /// The root process.
    pub root_pid: u32,
    /// Every live process of the tree, the root first.
    pub pids: Vec<u32>,
    /// Resident memory summed over the tree.
    pub rss_bytes: Option<u64>,
    /// CPU use summed over the tree since the previous sample, percent of one core.
    pub cpu_percent: Option<f64>,
    /// GPU memory the GPUs report for the tree's pids, summed over devices; `None` without
    /// a GPU or when every matching process is `[N/A]`.
    pub gpu_memory_bytes: Option<u64>,
    /// GPU processes whose pid is not in this pid namespace (a container's GPU list
    /// shows host pids): they cannot be told apart from the tree's, so they are counted
    /// here and not in `gpu_memory_bytes`.
    pub gpu_pids_not_visible: u32,
}

/// Everything sampled at one moment: a line of `gpu.jsonl`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// `gpuscope.gpu_sample/1`.
    pub schema: String,
    /// Unix seconds.
    pub time: f64,
    /// Where the GPU figures came from: `nvml`, `nvidia-smi`, a file path, or `none`.
    pub source: String,
    /// One entry per GPU, by index.
    pub gpus: Vec<GpuSample>,
    /// Why the source gave no GPUs this time (it had before: nvidia-smi failing mid-run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_error: Option<String>,
    /// The host.
    pub host: HostSample,
    /// The command's process tree (`gpuscope run` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<TreeSample>,
}

/// `used` as a share of `total`, when both are known and `total` is not 0.
pub fn share(used: Option<u64>, total: Option<u64>) -> Option<f64> {
    match (used, total) {
        (Some(used), Some(total)) if total > 0 => Some(percent(used, total)),
        _ => None,
    }
}
