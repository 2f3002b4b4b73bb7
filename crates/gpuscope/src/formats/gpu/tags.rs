//! The TensorBoard scalars of a GPU sample. Prefixes: `GPU/` and `Host/` belong to the
//! monitor and `gpuscope run` (`System/` is the in-training profiler's). Sizes in the
//! MB (2^20 bytes); a figure that was not measured is left out, never written as 0.

use crate::model::gpu::Sample;
use crate::model::units::ByteUnit;

/// `(tag, value)` for every measured figure of `sample`.
pub fn sample_scalars(sample: &Sample) -> Vec<(String, f64)> {
    let mut out: Vec<(String, Option<f64>)> = Vec::new();
    for gpu in &sample.gpus {
        let i = gpu.index;
        out.push((
            format!("GPU/{i}/memory_used_MB"),
            gpu.memory_used_bytes.map(|b| ByteUnit::Mib.of(b)),
        ));
        out.push((format!("GPU/{i}/memory_percent"), gpu.memory_percent()));
        out.push((
            format!("GPU/{i}/utilization_percent"),
            gpu.utilization_percent,
        ));
        out.push((format!("GPU/{i}/temperature_C"), gpu.temperature_c));
        out.push((format!("GPU/{i}/power_W"), gpu.power_w));
    }
    let host = &sample.host;
    out.push(("Host/cpu_percent".into(), host.cpu_percent));
    out.push((
        "Host/ram_used_MB".into(),
        host.ram_used_bytes.map(|b| ByteUnit::Mib.of(b)),
    ));
    out.push(("Host/ram_percent".into(), host.ram_percent()));
    if let Some(tree) = &sample.tree {
        out.push((
            "Host/command_rss_MB".into(),
            tree.rss_bytes.map(|b| ByteUnit::Mib.of(b)),
        ));
        out.push(("Host/command_cpu_percent".into(), tree.cpu_percent));
        out.push((
            "GPU/command_memory_MB".into(),
            tree.gpu_memory_bytes.map(|b| ByteUnit::Mib.of(b)),
        ));
    }
    out.into_iter()
        .filter_map(|(tag, value)| Some((tag, value?)))
        .collect()
}
