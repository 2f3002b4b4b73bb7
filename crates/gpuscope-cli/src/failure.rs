//! How a command fails: one line on stderr and an exit code. Engine errors become
//! `error: <path>: <what is wrong> (<what to do>)` and exit 2; output that cannot be
//! written, `error: <path>: cannot write: <reason>` and exit 1; a closed output pipe is
//! not a failure.

use std::io;

/// Why a command stopped.
#[derive(Debug)]
pub enum Failure {
    /// Input or arguments that cannot be used: exit 2 with this line (without `error: `).
    Usage(String),
    /// The input was fine but the result could not be written: exit 1 with this line.
    Output(String),
    /// The reader of our output went away (`| head`): exit 0, say nothing.
    ClosedPipe,
    /// `gpuscope run`'s child ended with this non-zero code: pass it on, say nothing.
    Exit(i32),
}

impl Failure {
    /// Prints the failure's line, if any, and returns the exit code.
    pub fn report(self) -> i32 {
        match self {
            Failure::Usage(line) => {
                eprintln!("error: {line}");
                2
            }
            Failure::Output(line) => {
                eprintln!("error: {line}");
                1
            }
            Failure::ClosedPipe => 0,
            Failure::Exit(code) => code,
        }
    }
}

impl From<gpuscope::Error> for Failure {
    fn from(e: gpuscope::Error) -> Self {
        use gpuscope::Error;
        let line = match &e {
            Error::Io { path, source } => {
                let hint = match source.kind() {
                    io::ErrorKind::NotFound => "check the path",
                    io::ErrorKind::PermissionDenied => "check its permissions",
                    io::ErrorKind::IsADirectory => "give a file, not a directory",
                    _ => "check the file and try again",
                };
                format!("{}: {source} ({hint})", path.display())
            }
            Error::Output { .. } => return Failure::Output(e.to_string()),
            _ => e.to_string(),
        };
        Failure::Usage(line)
    }
}

impl From<io::Error> for Failure {
    /// An error writing to stdout.
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::ClosedPipe
        } else {
            Failure::Output(format!("stdout: cannot write: {e}"))
        }
    }
}
