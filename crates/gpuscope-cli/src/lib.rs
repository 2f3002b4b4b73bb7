//! The `gpuscope` command line, as a library so that the native binary and the
//! pip-installed command (through the Python bindings) run the very same code.
//!
//! It parses arguments, calls the engine, renders, and turns the outcome into an exit code:
//! 0 done, 2 input that cannot be used (one `error:` line on stderr). A closed stdout pipe
//! ends the command quietly with 0, as `gpuscope tb DIR | head -1` expects.

mod args;
mod commands;
mod failure;
mod output;

use std::ffi::OsString;

use clap::Parser;

pub use failure::Failure;

/// Runs the command line `argv` (program name first) and returns the exit code.
pub fn run<I, T>(argv: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match args::Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = e.print();
            return e.exit_code();
        }
    };
    match commands::dispatch(cli) {
        Ok(()) => 0,
        Err(failure) => failure.report(),
    }
}
