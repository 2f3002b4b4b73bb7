//! Helpers shared by the CLI tests of `monitor` and `run`.

use std::process::Output;

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts the contract for input that cannot be used: exit 2, one line on stderr, nothing
/// on stdout. Returns the line.
pub fn one_error_line(out: &Output) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    err
}
