//! Peaks over a series of GPU samples, for the summary `gpuscope monitor` prints on Ctrl-C
//! and `gpuscope run` at the end: per GPU the most memory in use (and when), the highest
//! utilisation, temperature and power; the host's most RAM; the command tree's most RSS
//! and GPU memory. Kept as a running fold so a monitor left on for days stores nothing.

use serde::Serialize;

use crate::model::gpu::{GpuSample, Sample};

/// The peaks of one GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuPeak {
    /// Device index.
    pub index: u32,
    /// Device name.
    pub name: String,
    /// Most memory in use in any sample.
    pub peak_memory_used_bytes: Option<u64>,
    /// Unix seconds of that sample.
    pub peak_memory_time: Option<f64>,
    /// Device memory in total.
    pub memory_total_bytes: Option<u64>,
    /// Highest utilisation.
    pub max_utilization_percent: Option<f64>,
    /// Highest temperature, degrees Celsius.
    pub max_temperature_c: Option<f64>,
    /// Highest power draw, watts.
    pub max_power_w: Option<f64>,
}

/// Peaks over every sample added so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Peaks {
    /// Samples added.
    pub samples: u64,
    /// Unix seconds of the first and the last sample.
    pub first_time: Option<f64>,
    /// See `first_time`.
    pub last_time: Option<f64>,
    /// One entry per GPU index seen, in index order.
    pub gpus: Vec<GpuPeak>,
    /// Most host RAM in use.
    pub peak_ram_used_bytes: Option<u64>,
    /// Host RAM in total.
    pub ram_total_bytes: Option<u64>,
    /// Most resident memory of the command's process tree.
    pub peak_command_rss_bytes: Option<u64>,
    /// Most GPU memory held by the command's process tree.
    pub peak_command_gpu_memory_bytes: Option<u64>,
    /// Most processes in the command's tree at once.
    pub peak_command_processes: Option<u64>,
}

/// The larger of two optional figures; a missing one never wins.
fn max<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b > a { b } else { a }),
        (a, b) => a.or(b),
    }
}

impl Peaks {
    /// Folds one sample in.
    pub fn add(&mut self, sample: &Sample) {
        self.samples += 1;
        self.first_time.get_or_insert(sample.time);
        self.last_time = Some(sample.time);
        for gpu in &sample.gpus {
            self.gpu(gpu, sample.time);
        }
        self.peak_ram_used_bytes = max(self.peak_ram_used_bytes, sample.host.ram_used_bytes);
        self.ram_total_bytes = sample.host.ram_total_bytes.or(self.ram_total_bytes);
        if let Some(tree) = &sample.tree {
            self.peak_command_rss_bytes = max(self.peak_command_rss_bytes, tree.rss_bytes);
            self.peak_command_gpu_memory_bytes =
                max(self.peak_command_gpu_memory_bytes, tree.gpu_memory_bytes);
            self.peak_command_processes =
                max(self.peak_command_processes, Some(tree.pids.len() as u64));
        }
    }

    /// Seconds from the first sample to the last.
    pub fn duration_seconds(&self) -> Option<f64> {
        Some(self.last_time? - self.first_time?)
    }

    fn gpu(&mut self, gpu: &GpuSample, time: f64) {
        let at = match self.gpus.binary_search_by_key(&gpu.index, |p| p.index) {
            Ok(at) => at,
            Err(at) => {
                let peak = GpuPeak {
                    index: gpu.index,
                    name: gpu.name.clone(),
                    ..GpuPeak::default()
                };
                self.gpus.insert(at, peak);
                at
            }
        };
        let peak = &mut self.gpus[at];
        if gpu.memory_used_bytes > peak.peak_memory_used_bytes {
            peak.peak_memory_used_bytes = gpu.memory_used_bytes;
            peak.peak_memory_time = Some(time);
        }
        peak.memory_total_bytes = gpu.memory_total_bytes.or(peak.memory_total_bytes);
        peak.max_utilization_percent = max(peak.max_utilization_percent, gpu.utilization_percent);
        peak.max_temperature_c = max(peak.max_temperature_c, gpu.temperature_c);
        peak.max_power_w = max(peak.max_power_w, gpu.power_w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(time: f64, used: Option<u64>, util: Option<f64>) -> Sample {
        Sample {
            time,
            gpus: vec![GpuSample {
                index: 0,
                memory_used_bytes: used,
                memory_total_bytes: Some(100),
                utilization_percent: util,
                ..GpuSample::default()
            }],
            ..Sample::default()
        }
    }

    #[test]
    fn peaks_keep_the_largest_measured_figure_and_its_time() {
        let mut peaks = Peaks::default();
        peaks.add(&sample(10.0, Some(40), None));
        peaks.add(&sample(11.0, Some(90), Some(50.0)));
        peaks.add(&sample(12.0, None, Some(20.0)));
        let gpu = &peaks.gpus[0];
        assert_eq!(gpu.peak_memory_used_bytes, Some(90));
        assert_eq!(gpu.peak_memory_time, Some(11.0));
        assert_eq!(gpu.max_utilization_percent, Some(50.0));
        assert_eq!(peaks.duration_seconds(), Some(2.0));
        assert_eq!(peaks.samples, 3);
    }

    #[test]
    fn nothing_measured_stays_unknown() {
        let mut peaks = Peaks::default();
        peaks.add(&sample(1.0, None, None));
        assert_eq!(peaks.gpus[0].peak_memory_used_bytes, None);
        assert_eq!(peaks.peak_command_rss_bytes, None);
    }
}
