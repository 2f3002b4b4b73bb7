//! The rules of `classify` on real traces whose names were changed the way new libraries
//! and runtimes change them: the NCCL kernels of a real trace renamed to NCCL 2.19's,
//! RCCL's, MSCCL's, vLLM's, NVSHMEM's and DeepEP's names give the same communication
//! figures; its `cudaLaunchKernel` calls renamed to `cuLaunchKernelEx` or `hipLaunchKernel`
//! the same launch statistics. Each edited trace is written to a temporary directory.

use crate::common;

use gpuscope::analysis::trace::classify::KernelType;
use gpuscope::analysis::trace::health::dropped_kernels;
use gpuscope::analysis::trace::ranks::figures_of;
use gpuscope::analysis::trace::report::{report, RankReport};
use gpuscope::analysis::trace::scope::Clock;
use gpuscope::analysis::trace::steps::Category;
use gpuscope::analysis::trace::summary::rank_summary;
use gpuscope::formats::trace::read_trace;
use gpuscope::model::trace::TraceFile;

/// A real trace with NCCL all-reduce and broadcast kernels (`ncclKernel_*`) and profiler
/// steps.
const NCCL: &str = "rank0_nccl_data.json.gz";

/// The shared trace `name` with the name of every `cat` event passed through `rename`,
/// read back from a temporary file.
fn edited(name: &str, cat: &str, rename: impl Fn(&str) -> Option<String>) -> TraceFile {
    let mut doc: serde_json::Value = serde_json::from_str(&common::trace_text(name)).unwrap();
    let mut renamed = 0;
    for e in doc["traceEvents"].as_array_mut().unwrap() {
        if e["cat"] != cat {
            continue;
        }
        if let Some(new) = e["name"].as_str().and_then(&rename) {
            e["name"] = new.into();
            renamed += 1;
        }
    }
    assert!(renamed > 0, "nothing renamed in {name}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name.trim_end_matches(".gz"));
    std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    TraceFile { path, trace }
}

fn original(name: &str) -> TraceFile {
    let path = common::shared_data(&format!("traces/{name}"));
    let trace = read_trace(&path, &mut |_, _| {}).unwrap();
    TraceFile { path, trace }
}

fn one_report(file: &TraceFile) -> RankReport {
    report(std::slice::from_ref(file), Clock::Exact, 10)
        .pop()
        .unwrap()
}

/// The communication figures of a trace: the time by kernel type that involves
/// communication, the overlap with computation, the rank's communication time, each
/// step's communication share, and the total time of its collectives.
#[derive(Debug, PartialEq)]
struct Communication {
    by_type_us: Vec<(String, f64)>,
    overlap_percent: Option<f64>,
    rank_us: f64,
    step_percent: Vec<f64>,
    collectives_us: f64,
}

fn communication(file: &TraceFile) -> Communication {
    let r = one_report(file);
    let figures = figures_of(&r).unwrap();
    Communication {
        by_type_us: r
            .kernel_types
            .iter()
            .filter(|t| t.types.contains(&KernelType::Communication))
            .map(|t| (t.kernel_type.clone(), t.sum_us))
            .collect(),
        overlap_percent: r.comm_comp_overlap_percent,
        rank_us: figures.communication_us,
        step_percent: r
            .steps
            .unwrap()
            .steps
            .iter()
            .map(|s| s.percent(Category::Communication))
            .collect(),
        collectives_us: rank_summary(file, Clock::Exact)
            .collectives
            .iter()
            .map(|k| k.total_us)
            .sum(),
    }
}

/// A library's name for the collective called so (`AllReduce`).
type Rename = fn(&str) -> String;

/// `ncclKernel_AllReduce_RING_LL_Sum_float(...)` → `AllReduce`.
fn collective(name: &str) -> &str {
    let rest = name.strip_prefix("ncclKernel_").unwrap();
    &rest[..rest.find('_').unwrap()]
}

#[test]
fn renamed_collectives_communicate_as_long_as_ncclkernel_did() {
    let want = communication(&original(NCCL));
    // The trace has communication, on its own and under computation, in every step.
    assert!(want.rank_us > 1000.0, "{want:?}");
    assert!(want.by_type_us.len() >= 2, "{want:?}");
    assert!(want.step_percent.iter().all(|&p| p > 0.0), "{want:?}");

    // Each library's name for the same collective, as seen in its traces.
    let renames: [(&str, Rename); 6] = [
        ("NCCL 2.19", |c| {
            format!("ncclDevKernel_{c}_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
        }),
        ("RCCL", |_| {
            "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)".to_owned()
        }),
        ("MSCCL", |_| {
            "mscclKernel_Sum_half_Simple_false(ncclDevComm*, mscclAlgo*, mscclWork*)".to_owned()
        }),
        ("vLLM", |_| {
            "void vllm::cross_device_reduce_1stage<float, 8>(vllm::RankData*, \
             vllm::RankSignals, vllm::Signal*, float*, int, int)"
                .to_owned()
        }),
        ("NVSHMEM", |_| {
            "void rdxn_on_stream_kernel<float, (rdxn_ops)0>(int, float*, const float*, \
             unsigned long, int)"
                .to_owned()
        }),
        ("DeepEP", |_| {
            "void deep_ep::internode_ll::dispatch<true, 3, 10, 7168>(void*, float*, int*)"
                .to_owned()
        }),
    ];
    for (library, rename) in renames {
        let file = edited(NCCL, "kernel", |name| {
            name.starts_with("ncclKernel_")
                .then(|| rename(collective(name)))
        });
        let got = communication(&file);
        assert_eq!(got.by_type_us, want.by_type_us, "{library}");
        assert_eq!(got.overlap_percent, want.overlap_percent, "{library}");
        assert_eq!(got.rank_us, want.rank_us, "{library}");
        assert_eq!(got.step_percent, want.step_percent, "{library}");
        assert!(
            (got.collectives_us - want.collectives_us).abs() < 1e-6,
            "{library}: {} µs of collectives, {} before",
            got.collectives_us,
            want.collectives_us
        );
    }

    // A name no rule knows is computation: the same kernels renamed so lose their
    // communication (the test above can fail).
    let unknown = edited(NCCL, "kernel", |name| {
        name.starts_with("ncclKernel_")
            .then(|| format!("my_allreduce_{}", collective(name)))
    });
    assert_eq!(
        figures_of(&one_report(&unknown)).unwrap().communication_us,
        0.0
    );
}

#[test]
fn renamed_kernel_launches_pair_as_cuda_launch_kernel_did() {
    let base = original(NCCL);
    let want = one_report(&base).launches.unwrap();
    let launch_kernel = base.trace.names.find("cudaLaunchKernel").unwrap();
    let kernel_launches = base
        .trace
        .events
        .name
        .iter()
        .filter(|&&n| n == launch_kernel)
        .count();
    assert!(kernel_launches > 100, "{kernel_launches}");
    for new in [
        "cuLaunchKernelEx",
        "hipLaunchKernel",
        "cudaLaunchCooperativeKernel",
    ] {
        let file = edited(NCCL, "cuda_runtime", |name| {
            (name == "cudaLaunchKernel").then(|| new.to_owned())
        });
        assert_eq!(one_report(&file).launches.unwrap(), want, "{new}");
        assert_eq!(dropped_kernels(&file.trace), 0, "{new}");
    }
    // A launch call no rule knows pairs nothing: its kernels leave the statistics.
    let file = edited(NCCL, "cuda_runtime", |name| {
        (name == "cudaLaunchKernel").then(|| "cudaLaunchSomethingNew".to_owned())
    });
    let got = one_report(&file).launches.unwrap();
    assert!(got.count < want.count, "{} of {}", got.count, want.count);
}
