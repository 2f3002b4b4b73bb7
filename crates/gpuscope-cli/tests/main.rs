//! The `gpuscope` command's tests, one module per subcommand or concern, built as one test
//! binary (one link, one file on disk, rather than one of each per file).

mod common;

mod compare_cli;
mod flags_cli;
mod monitor_cli;
mod nsys_cli;
mod output_cli;
mod report_cli;
mod run_cli;
mod tb_cli;
mod trace_cli;
