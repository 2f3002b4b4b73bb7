//! Commands shown to people as one line a POSIX shell would run the same way, so a printed
//! `nsys` call or the training `gpuscope run` started can be copied.
//!
//! By hand, not with `shlex` or `shell-words`: both quote every word with an `=` (special
//! only before the command name), so each `--trace=cuda,...` of an nsys line came out in
//! quotes. Here a word is left as it is when it holds only characters no shell treats
//! specially after the command name, and is single-quoted otherwise.

use std::ffi::OsStr;

/// `words` quoted where a shell would split or expand them, joined by spaces (shown
/// lossily where they are not UTF-8).
pub fn line<'a>(words: impl IntoIterator<Item = &'a OsStr>) -> String {
    words
        .into_iter()
        .map(|w| quote(&w.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=,:@%+".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStrExt;
    use std::process::Command;

    use super::*;

    /// What `sh` makes of the line is the words it was made of.
    #[test]
    fn sh_splits_the_line_back_into_its_words() {
        let words = [
            "/opt/nsys",
            "--output=runs/a b/x",
            "it's",
            "--lr=1e-3",
            "",
            "$HOME",
            "a\"b",
            "*.py",
            "x;y",
            "tab\there",
            "`id`",
            "~",
        ];
        let shown = line(words.iter().map(OsStr::new));
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("for w in {shown}; do printf '%s\\0' \"$w\"; done"))
            .output()
            .unwrap();
        let back: Vec<OsString> = out
            .stdout
            .split(|&b| b == 0)
            .map(|w| OsStr::from_bytes(w).to_owned())
            .collect();
        let expected: Vec<OsString> = words.iter().map(OsString::from).collect();
        assert_eq!(back[..back.len() - 1], expected[..], "{shown}");
        // Words a shell would not change are shown as they are.
        assert!(shown.contains(" --lr=1e-3 "), "{shown}");
    }
}
