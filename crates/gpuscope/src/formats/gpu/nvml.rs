//! GPUs through NVML (nvml-wrapper, which loads libnvidia-ml at run time, so a binary
//! built here runs on machines without the driver). Each figure is asked for on its own:
//! a device that does not support one (MIG instances have no utilisation, some boards no
//! power reading) leaves that figure `None` and keeps the others.
//!
//! No GPU exists where this is built: without the library `Nvml::init` fails, which is
//! the path the tests exercise there. Run once against a live NVML (one H200, 2026-11-26):
//! `gpuscope monitor --once` read memory, utilisation, temperature and power, and the
//! monitor tests passed there; the process lists were empty (no GPU process ran).

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};

use crate::model::gpu::{GpuProcess, GpuSample};

/// An initialised NVML.
pub struct NvmlSource {
    nvml: Nvml,
}

impl NvmlSource {
    /// Loads libnvidia-ml and initialises it; the error says why it could not be.
    pub fn open() -> Result<NvmlSource, String> {
        let nvml = Nvml::init().map_err(|e| match e {
            NvmlError::LibloadingError(_) | NvmlError::LibraryNotFound => {
                "NVML not loadable".to_owned()
            }
            e => format!("NVML failed ({e})"),
        })?;
        let source = NvmlSource { nvml };
        source.read()?;
        Ok(source)
    }

    /// Every device now.
    pub fn read(&self) -> Result<Vec<GpuSample>, String> {
        let count = self
            .nvml
            .device_count()
            .map_err(|e| format!("NVML: no device count ({e})"))?;
        (0..count)
            .map(|i| {
                let device = self
                    .nvml
                    .device_by_index(i)
                    .map_err(|e| format!("NVML: device {i}: {e}"))?;
                Ok(sample(i, &device))
            })
            .collect()
    }
}

fn sample(index: u32, device: &Device) -> GpuSample {
    let memory = device.memory_info().ok();
    let mut processes: Vec<GpuProcess> = Vec::new();
    let lists = [
        device.running_compute_processes(),
        device.running_graphics_processes(),
    ];
    for info in lists.into_iter().flatten().flatten() {
        if !processes.iter().any(|p| p.pid == info.pid) {
            processes.push(process(&info));
        }
    }
    GpuSample {
        index,
        name: device.name().unwrap_or_default(),
        uuid: device.uuid().ok(),
        memory_used_bytes: memory.as_ref().map(|m| m.used),
        memory_total_bytes: memory.as_ref().map(|m| m.total),
        utilization_percent: device.utilization_rates().ok().map(|u| f64::from(u.gpu)),
        temperature_c: device
            .temperature(TemperatureSensor::Gpu)
            .ok()
            .map(f64::from),
        power_w: device.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
        power_limit_w: device
            .enforced_power_limit()
            .ok()
            .map(|mw| f64::from(mw) / 1000.0),
        processes,
    }
}

fn process(info: &ProcessInfo) -> GpuProcess {
    GpuProcess {
        pid: info.pid,
        // NVML gives no names; the sampler fills them from this host's process table.
        name: None,
        used_memory_bytes: match info.used_gpu_memory {
            UsedGpuMemory::Used(bytes) => Some(bytes),
            UsedGpuMemory::Unavailable => None,
        },
    }
}
