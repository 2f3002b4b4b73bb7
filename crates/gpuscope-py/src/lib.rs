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
