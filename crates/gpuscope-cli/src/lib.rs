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
mod shell;
mod signals;

use std::ffi::OsString;

use clap::error::ErrorKind;
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
        Err(e) if !e.use_stderr() => {
            // --help and --version: clap prints them to stdout.
            let _ = e.print();
            return 0;
        }
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `gpuscope` alone: the help, on stderr, as a usage error.
            let _ = e.print();
            return 2;
        }
        Err(e) => {
            // A usage error, as one line like every other error.
            let rendered = e.to_string();
            let what: Vec<&str> = rendered
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let what = what.join(" ");
            let what = what.strip_prefix("error: ").unwrap_or(&what);
            return Failure::Usage(format!("{what} (see gpuscope --help)")).report();
        }
    };
    match commands::dispatch(cli) {
        Ok(()) => 0,
        Err(failure) => failure.report(),
    }
}
