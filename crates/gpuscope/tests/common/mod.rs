//! Helpers shared by the engine's integration tests.

pub mod one_byte;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `../shared/data/<rel>` beside the repository, where the real GPU artifacts live.
pub fn shared_data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// Every trace in `../shared/data/traces`, by file name.
pub const TRACES: [&str; 13] = [
    "alexnet_single_gpu.json.gz",
    "amd_mi250_rocm.json.gz",
    "cpu_only_rank34.json.gz",
    "cupti_profiler_counters.json.gz",
    "event_sync_multi_stream.json.gz",
    "rank0_nccl_data.json.gz",
    "rank0_nccl_negative_queue.json.gz",
    "resnet50_v100_memory_workers0.json.gz",
    "resnet50_v100_memory_workers4.json.gz",
    "sampled_rank0.json.gz",
    "sampled_rank1.json.gz",
    "triton_example.json.gz",
    "v100_rank0_ns_resolution.json.gz",
];

/// The decompressed JSON text of the shared trace `name`.
pub fn trace_text(name: &str) -> String {
    let file = std::fs::File::open(shared_data(&format!("traces/{name}"))).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap();
    text
}

/// Runs `python3 -c <script> <args>` and returns its standard output.
pub fn python(script: &str, args: &[&Path]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python3 failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("python3 prints UTF-8")
}

/// Python that loads the snapshot at `sys.argv[1]` as `snap` with an unpickler that
/// refuses every global (so it is plain data); scripts go on from there.
pub const LOAD_SNAPSHOT_PY: &str = r#"
import json, pickle, pickletools, sys
class PlainOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError('global %s.%s' % (module, name))
with open(sys.argv[1], 'rb') as f:
    snap = PlainOnly(f).load()
"#;
