//! One module per subcommand; `dispatch` routes parsed arguments to them.

mod nsys;
mod report;
mod snapshot;
mod tb;
mod trace;

use crate::args::{Cli, Command};
use crate::Failure;

/// Runs the parsed command.
pub fn dispatch(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Tb(args) => tb::run(args),
        Command::Report(args) => report::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Monitor(_) => pending("monitor", 9),
        Command::Run(_) => pending("run", 9),
        Command::Nsys(args) => nsys::run(args),
    }
}

fn pending(name: &str, issue: u32) -> Result<(), Failure> {
    Err(Failure::Usage(format!(
        "gpuscope {name} is not implemented yet (tracked in issue #{issue})"
    )))
}
