//! `nvidia-smi -q -x`: one `<gpu>` element per device, read with roxmltree. Only the
//! device's own children are read (`fb_memory_usage` also appears under each MIG device);
//! values like `38 MiB`, `36 C`, `66.92 W` or `N/A` go through [`super::value`]. The power
//! limit is `enforced_power_limit` where the driver gives it, else `power_limit`; drivers
//! 530+ renamed `power_readings` to `gpu_power_readings`, and both are read.

use super::value;
use crate::model::gpu::{GpuProcess, GpuSample};

/// The GPUs of an `nvidia-smi -q -x` document, indexed in document order (nvidia-smi's).
pub fn parse(text: &str) -> Result<Vec<GpuSample>, String> {
    let doc = roxmltree::Document::parse_with_options(
        text,
        roxmltree::ParsingOptions {
            allow_dtd: true,
            ..roxmltree::ParsingOptions::default()
        },
    )
    .map_err(|e| format!("not XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "nvidia_smi_log" {
        return Err(format!(
            "an XML document of <{}>, not nvidia-smi's <nvidia_smi_log>",
            root.tag_name().name()
        ));
    }
    Ok(children(root, "gpu")
        .enumerate()
        .map(|(n, gpu)| gpu_sample(n as u32, gpu))
        .collect())
}

fn children<'a, 'i>(
    node: roxmltree::Node<'a, 'i>,
    name: &'static str,
) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> {
    node.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

/// The text at `path` below `node` (direct children only), or "".
fn at<'a>(node: roxmltree::Node<'a, '_>, path: &[&'static str]) -> &'a str {
    let mut current = node;
    for name in path {
        match children(current, name).next() {
            Some(next) => current = next,
            None => return "",
        }
    }
    current.text().unwrap_or("")
}

fn gpu_sample(index: u32, gpu: roxmltree::Node) -> GpuSample {
    let power = |field| {
        value::number(at(gpu, &["power_readings", field]))
            .or_else(|| value::number(at(gpu, &["gpu_power_readings", field])))
    };
    let processes = children(gpu, "processes")
        .flat_map(|p| children(p, "process_info"))
        .filter_map(|p| {
            Some(GpuProcess {
                pid: value::number(at(p, &["pid"]))? as u32,
                name: value::text(at(p, &["process_name"])),
                used_memory_bytes: value::bytes(at(p, &["used_memory"])),
            })
        })
        .collect();
    GpuSample {
        index,
        name: value::text(at(gpu, &["product_name"])).unwrap_or_default(),
        uuid: value::text(at(gpu, &["uuid"])),
        memory_used_bytes: value::bytes(at(gpu, &["fb_memory_usage", "used"])),
        memory_total_bytes: value::bytes(at(gpu, &["fb_memory_usage", "total"])),
        utilization_percent: value::number(at(gpu, &["utilization", "gpu_util"])),
        temperature_c: value::number(at(gpu, &["temperature", "gpu_temp"])),
        // Drivers 535+ split `power_draw` into an average (what `--query-gpu=power.draw`
        // reports) and an instant reading, and name the limit `current_power_limit`.
        power_w: power("power_draw").or_else(|| power("average_power_draw")),
        power_limit_w: power("enforced_power_limit")
            .or_else(|| power("current_power_limit"))
            .or_else(|| power("power_limit")),
        processes,
    }
}
