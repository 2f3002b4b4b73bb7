//! `gpuscope._native`: the Python bindings. Conversions only — every computation and every
//! file format lives in the engine crate; this crate mirrors its modules one to one.

mod cli;
mod error;
mod fingerprint;
mod heap;
mod runlog;
mod snapshot;
mod tfevents;
mod trace;
mod writers;

use pyo3::prelude::*;

/// Rust's allocations in the module (not Python's or torch's: mimalloc is built without
/// overriding `malloc`) go to mimalloc, which keeps freed pages for the next call. With
/// glibc's `malloc`, each analysis in a process gave the megabytes it grew back to the
/// kernel and faulted them in again the next time: 1,568 page faults per
/// `analyze_snapshot` of lm_fullstep_ctx128, ~30 % of its time (bench/README.md,
/// "The Python module's allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The native module, re-exported by the `gpuscope` Python package.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    error::register(m)?;
    tfevents::register(m)?;
    runlog::register(m)?;
    snapshot::register(m)?;
    trace::register(m)?;
    heap::register(m)?;
    fingerprint::register(m)?;
    cli::register(m)?;
    Ok(())
}
