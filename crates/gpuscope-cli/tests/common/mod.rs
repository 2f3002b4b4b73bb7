//! Helpers shared by the CLI tests.

use std::process::Output;

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Standard output as text, which must be UTF-8.
pub fn stdout_of(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

/// Standard error as text.
pub fn stderr_of(out: &Output) -> String {
    text(&out.stderr)
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

/// The decompressed text of the gzipped file at `path`.
pub fn gunzip(path: &std::path::Path) -> String {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text
}
