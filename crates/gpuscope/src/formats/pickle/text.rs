//! Decoders for the text arguments of protocol 0: decimal integers (INT, LONG, PUT, GET),
//! floats (FLOAT), Python 2 string literals (STRING: quoted, with backslash escapes) and
//! `raw-unicode-escape` text (UNICODE). Each says what is wrong in words for the error.

/// Why a decimal integer could not be read.
#[derive(Debug, PartialEq)]
pub(crate) enum IntText {
    /// Not a decimal integer at all.
    Bad,
    /// A valid integer outside `i64`.
    TooWide,
}

/// A decimal integer as Python's `int()` reads one written by `repr`: surrounding
/// whitespace, an optional sign, digits.
pub(crate) fn parse_int(text: &[u8]) -> Result<i64, IntText> {
    let text = text.trim_ascii();
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(IntText::Bad);
    }
    let mut magnitude: u64 = 0;
    for &d in digits {
        magnitude = magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(d - b'0')))
            .ok_or(IntText::TooWide)?;
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude).ok_or(IntText::TooWide)
    } else {
        i64::try_from(magnitude).map_err(|_| IntText::TooWide)
    }
}

/// A float as Python's `float()` reads `repr(x)`: decimal or exponent notation, `inf`,
/// `-inf`, `nan`.
pub(crate) fn parse_float(text: &[u8]) -> Option<f64> {
    std::str::from_utf8(text.trim_ascii()).ok()?.parse().ok()
}

/// The argument of STRING: a quoted Python 2 string literal, unquoted and with its
/// escapes decoded (as `codecs.escape_decode` does).
pub(crate) fn unquote_string(text: &[u8]) -> Result<Vec<u8>, &'static str> {
    let inner = match text {
        [q @ (b'\'' | b'"'), inner @ .., last] if last == q => inner,
        _ => return Err("the STRING argument must be quoted"),
    };
    let mut out = Vec::with_capacity(inner.len());
    let mut rest = inner;
    while let Some((&c, tail)) = rest.split_first() {
        rest = tail;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let Some((&e, tail)) = rest.split_first() else {
            return Err("trailing \\ in string");
        };
        rest = tail;
        match e {
            b'\n' => {}
            b'\\' | b'\'' | b'"' => out.push(e),
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0c),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(0x0b),
            b'0'..=b'7' => {
                let mut value = u32::from(e - b'0');
                for _ in 0..2 {
                    match rest.split_first() {
                        Some((&d @ b'0'..=b'7', tail)) => {
                            value = value * 8 + u32::from(d - b'0');
                            rest = tail;
                        }
                        _ => break,
                    }
                }
                // Python keeps the low 8 bits of an octal escape above \377.
                out.push((value & 0xff) as u8);
            }
            b'x' => {
                let hex = rest.get(..2).ok_or("invalid \\x escape")?;
                let value = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .filter(|_| hex.iter().all(u8::is_ascii_hexdigit))
                    .ok_or("invalid \\x escape")?;
                out.push(value);
                rest = rest.get(2..).unwrap_or_default();
            }
            // Unknown escapes stay as they are, backslash included.
            other => out.extend_from_slice(&[b'\\', other]),
        }
    }
    Ok(out)
}

/// The argument of UNICODE, decoded as Python's `raw-unicode-escape`: every byte is a
/// Latin-1 character except `\uXXXX` and `\UXXXXXXXX` after an odd number of backslashes.
pub(crate) fn raw_unicode_escape(text: &[u8]) -> Result<String, &'static str> {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(&c) = text.get(i) {
        i += 1;
        if c != b'\\' {
            out.push(char::from(c));
            continue;
        }
        // A run of backslashes; only an odd run can start an escape.
        let mut run = 1;
        while text.get(i) == Some(&b'\\') {
            run += 1;
            i += 1;
        }
        let digits = match text.get(i) {
            Some(b'u') if run % 2 == 1 => 4,
            Some(b'U') if run % 2 == 1 => 8,
            _ => {
                out.extend(std::iter::repeat_n('\\', run));
                continue;
            }
        };
        out.extend(std::iter::repeat_n('\\', run - 1));
        let hex = text
            .get(i + 1..i + 1 + digits)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .ok_or("truncated \\uXXXX escape")?;
        let code = std::str::from_utf8(hex)
            .ok()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or("truncated \\uXXXX escape")?;
        out.push(char::from_u32(code).ok_or("\\u escape of a surrogate or beyond U+10FFFF")?);
        i += 1 + digits;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_at_the_64_bit_edges() {
        assert_eq!(parse_int(b"0"), Ok(0));
        assert_eq!(parse_int(b" -17 "), Ok(-17));
        assert_eq!(parse_int(b"9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_int(b"-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_int(b"9223372036854775808"), Err(IntText::TooWide));
        assert_eq!(parse_int(b"-9223372036854775809"), Err(IntText::TooWide));
        assert_eq!(parse_int(b"99999999999999999999999"), Err(IntText::TooWide));
        for bad in [&b""[..], b"-", b"1.5", b"0x10", b"12a"] {
            assert_eq!(parse_int(bad), Err(IntText::Bad), "{bad:?}");
        }
    }

    #[test]
    fn floats_as_repr_writes_them() {
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"1e+100"), Some(1e100));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert!(parse_float(b"nan").is_some_and(f64::is_nan));
        assert_eq!(
            parse_float(b"-0.0").map(f64::to_bits),
            Some((-0.0f64).to_bits())
        );
        assert_eq!(parse_float(b"one"), None);
    }

    #[test]
    fn python_2_string_literals() {
        assert_eq!(unquote_string(b"'a\\nb'").unwrap(), b"a\nb");
        assert_eq!(unquote_string(b"\"it's\"").unwrap(), b"it's");
        assert_eq!(
            unquote_string(b"'\\x41\\101\\0\\q\\\\'").unwrap(),
            b"AA\0\\q\\"
        );
        assert_eq!(unquote_string(b"'\\777'").unwrap(), [0xff]);
        assert!(unquote_string(b"'abc").is_err());
        assert!(unquote_string(b"'").is_err());
        assert!(unquote_string(b"'\\'").is_err());
        assert!(unquote_string(b"'\\x4'").is_err());
        assert!(unquote_string(b"'\\x+1'").is_err());
    }

    #[test]
    fn raw_unicode_escape_as_python_decodes_it() {
        assert_eq!(raw_unicode_escape(b"caf\xe9").unwrap(), "café");
        assert_eq!(raw_unicode_escape(b"\\u20ac \\U0001f600").unwrap(), "€ 😀");
        assert_eq!(raw_unicode_escape(b"\\\\u0041").unwrap(), "\\\\u0041");
        assert_eq!(raw_unicode_escape(b"\\\\\\u0041").unwrap(), "\\\\A");
        assert_eq!(raw_unicode_escape(b"a\\b\\").unwrap(), "a\\b\\");
        assert!(raw_unicode_escape(b"\\u12").is_err());
        assert!(raw_unicode_escape(b"\\ud800").is_err());
        assert!(raw_unicode_escape(b"\\U00110000").is_err());
        assert!(raw_unicode_escape(b"\\u+123").is_err());
    }
}
