//! The native `gpuscope` binary: all the work is in the library, shared with the
//! pip-installed command.

fn main() {
    std::process::exit(gpuscope_cli::run(std::env::args_os()));
}
