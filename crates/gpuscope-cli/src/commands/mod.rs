//! One module per subcommand; `dispatch` routes parsed arguments to them.

mod compare;
mod monitor;
mod nsys;
mod report;
mod run;
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
        Command::Compare(args) => compare::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Monitor(args) => monitor::run(args),
        Command::Run(args) => run::run(args),
        Command::Nsys(args) => nsys::run(args),
    }
}
