//! The pip-installed `gpuscope` command runs the CLI crate in-process through this.

use pyo3::prelude::*;

/// Runs the gpuscope command line (`argv[0]` is the program name) and returns its exit
/// code. The GIL is released while it runs.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| gpuscope_cli::run(argv))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_cli, m)?)
}
