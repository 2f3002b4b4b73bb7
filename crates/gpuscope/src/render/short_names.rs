//! Every way gpuscope writes a long name short, in one place. The outputs differ on
//! purpose, each for its column:
//!
//! - [`short_names`]: the cells of HTML tables ([`super::html::table_of_names`]), which
//!   keep the whole name in the cell's `title`: arguments collapsed, then a cut in the
//!   middle, names that would read alike kept apart;
//! - [`bare_name`]: the text reports' kernel column, harder: without templates and
//!   parameters at all;
//! - [`clip`]: a text cell of fixed width, cut at its end;
//! - [`clip_left`]: a stack frame in a text cell, cut at its start so that the file and
//!   line stay.

use std::collections::HashMap;

/// Longest name a table cell shows: two lines of a name column (460 px wide), three where
/// a long word wraps early.
const NAME_CHARS: usize = 120;
/// A name longer than this is written short (see [`short_names`]).
const SHORTEN_FROM: usize = 100;
/// How much of a shortened name's start is kept before a cut.
const HEAD_CHARS: usize = 72;
/// How much of a name's end is kept after a cut (`HEAD + " … " + TAIL = NAME_CHARS`).
const TAIL_CHARS: usize = NAME_CHARS - HEAD_CHARS - 3;
/// Where a cut row's distinguishing window starts, before the first character in which it
/// differs from a row that would otherwise read the same.
const BEFORE_DIFFERENCE: usize = 16;

/// What a table shows of each of `names` (`None`: the name whole), each at most
/// [`NAME_CHARS`] characters. A name longer than [`SHORTEN_FROM`] is written short, in
/// steps that stop once it fits: without the `void ` every CUDA kernel returns and with
/// each argument list as `(…)` (a kernel's parameters repeat its template arguments; a
/// lambda's enclosing function is named without its parameters), as Nsight Systems' short
/// names are; then without `(anonymous namespace)::` and with a chain of lambdas as one
/// `{lambda}`; then with the namespaces inside template arguments left out. What is still
/// too long keeps its start and its end around a ` … `. Two different names that would
/// still read the same (one operator with input shapes that differ far into the list) show
/// their start and then the place where they differ.
pub(crate) fn short_names(names: &[&str]) -> Vec<Option<String>> {
    let mut shown: Vec<Option<String>> = names
        .iter()
        .map(|n| {
            (n.chars().count() > SHORTEN_FROM)
                .then(|| {
                    let c: Vec<char> = written_short(n).chars().collect();
                    match c.len() {
                        n if n <= NAME_CHARS => c.iter().collect(),
                        n => cut(&c, n - TAIL_CHARS),
                    }
                })
                .filter(|short| short != n)
        })
        .collect();
    let mut readings: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, (name, s)) in names.iter().zip(&shown).enumerate() {
        readings
            .entry(s.clone().unwrap_or_else(|| (*name).to_owned()))
            .or_default()
            .push(i);
    }
    for rows in readings.values().filter(|rows| rows.len() > 1) {
        let chars: Vec<Vec<char>> = rows.iter().map(|&r| names[r].chars().collect()).collect();
        for (k, &r) in rows.iter().enumerate() {
            if shown[r].is_none() || chars.iter().all(|c| *c == chars[k]) {
                continue;
            }
            let differs_at = chars
                .iter()
                .filter(|c| **c != chars[k])
                .map(|c| common_prefix(c, &chars[k]))
                .max()
                .unwrap_or(0);
            shown[r] = Some(cut(&chars[k], differs_at.saturating_sub(BEFORE_DIFFERENCE)));
        }
    }
    shown
}

/// `name` written short, step by step until it fits in [`NAME_CHARS`] (see
/// [`short_names`]); it may still not.
fn written_short(name: &str) -> String {
    let mut s = collapse_arguments(name.strip_prefix("void ").unwrap_or(name));
    for simpler in [without_lambdas, unqualified_arguments] {
        if s.chars().count() <= NAME_CHARS {
            break;
        }
        s = simpler(&s);
    }
    s
}

/// `name` with each argument list that follows a name or a template (`f(int, float)`,
/// `kernel<…>(…)`) written `(…)`. An empty list, a list of digits (`train.py(45)`, a line)
/// and a parenthesis after a space or a comma (`(anonymous namespace)`, a cast, `(12 µs)`)
/// stay.
fn collapse_arguments(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len());
    let mut i = 0;
    while i < chars.len() {
        let follows_name = i > 0 && (is_word(chars[i - 1]) || chars[i - 1] == '>');
        if chars[i] == '(' && follows_name {
            let arguments = closing(&chars, i)
                .filter(|&close| !chars[i + 1..close].iter().all(char::is_ascii_digit));
            if let Some(close) = arguments {
                out.push_str("(…)");
                i = close + 1;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// `name` without `(anonymous namespace)::`, each chain of lambdas
/// (`::{lambda()#1}::operator()() const::{lambda(…)#7}`) written `::{lambda}`.
fn without_lambdas(name: &str) -> String {
    const LAMBDA: &str = "::{lambda";
    let name = name.replace("(anonymous namespace)::", "");
    let mut out = String::with_capacity(name.len());
    let mut rest = name.as_str();
    while let Some(at) = rest.find(LAMBDA) {
        out.push_str(&rest[..at]);
        out.push_str("::{lambda}");
        rest = &rest[at..];
        while let Some(link) = rest.strip_prefix(LAMBDA) {
            let Some(end) = link.find('}') else {
                rest = "";
                break;
            };
            rest = &link[end + 1..];
            rest = rest.strip_prefix("::operator()() const").unwrap_or(rest);
        }
    }
    out.push_str(rest);
    out
}

/// `name` with the namespaces (and classes) that qualify names inside template arguments
/// left out: `vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>` becomes
/// `vectorized_elementwise_kernel<4, AddFunctor<float>>`.
fn unqualified_arguments(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len());
    let mut depth = 0i32;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ => {}
        }
        if depth > 0 && is_word(chars[i]) && (i == 0 || !is_word(chars[i - 1])) {
            let end = (i..chars.len())
                .find(|&j| !is_word(chars[j]))
                .unwrap_or(chars.len());
            if chars.get(end) == Some(&':') && chars.get(end + 1) == Some(&':') {
                i = end + 2;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The index of the `)` that closes the `(` at `open`.
fn closing(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in chars.iter().enumerate().skip(open) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// [`HEAD_CHARS`] of `chars`, ` … `, then the rest of [`NAME_CHARS`] from `from` on (the
/// end of the name, or the place where it differs from another), with a trailing ` …` when
/// that stops short of the end.
fn cut(chars: &[char], from: usize) -> String {
    let from = from.max(HEAD_CHARS).min(chars.len());
    let mut s: String = chars[..HEAD_CHARS.min(chars.len())].iter().collect();
    if from > HEAD_CHARS {
        s.push_str(" … ");
    }
    let room = NAME_CHARS - s.chars().count();
    let end = (from + room).min(chars.len());
    if end < chars.len() {
        s.extend(&chars[from..end - 2]);
        s.push_str(" …");
    } else {
        s.extend(&chars[from..end]);
    }
    s
}

fn common_prefix(a: &[char], b: &[char]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `name` cut to `width` characters, an ellipsis marking the cut.
pub(crate) fn clip(name: &str, width: usize) -> String {
    if name.chars().count() <= width {
        name.to_owned()
    } else {
        name.chars()
            .take(width.saturating_sub(1))
            .chain(['…'])
            .collect()
    }
}

/// `site` cut to `width` characters from the left, so that its end stays: a stack
/// frame's file name and line, `…/train.py:40 step`.
pub(crate) fn clip_left(site: &str, width: usize) -> String {
    let n = site.chars().count();
    if n <= width {
        return site.to_owned();
    }
    let kept: String = site.chars().skip(n - width + 1).collect();
    format!("…{kept}")
}

/// A kernel's name without its return type, template arguments and parameters, which
/// make a C++ kernel name hundreds of characters long, for the text reports' fixed-width
/// kernel column:
/// `void at::native::elementwise_kernel<128, 4, …>(int, …)` → `at::native::elementwise_kernel`.
pub(crate) fn bare_name(name: &str) -> String {
    let name = name.strip_prefix("void ").unwrap_or(name);
    let mut depth = 0usize;
    let mut out = String::new();
    let mut previous = ' ';
    for c in name.chars() {
        match c {
            '<' | '(' => depth += 1,
            '>' if previous == '-' => {} // an arrow, `Pageable -> Device`
            '>' | ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        previous = c;
    }
    // `(anonymous namespace)` leaves an empty path segment behind.
    let out = out.replace("::::", "::");
    let out = out.trim();
    if out.is_empty() {
        name.to_owned()
    } else {
        out.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_stay_whole() {
        assert_eq!(
            short_names(&["aten::addmm", "void k<float>(int)"]),
            [None, None]
        );
    }

    #[test]
    fn a_kernel_drops_its_return_type_and_parameters_first() {
        let params = ["at::GenericPackedTensorAccessor<float, 2ul, long>"; 8].join(", ");
        let name = format!("void split_embedding_kernel<c10::Half, float, 2ul>({params})");
        let shown = short_names(&[&name]);
        assert_eq!(
            shown[0].as_deref(),
            Some("split_embedding_kernel<c10::Half, float, 2ul>(…)")
        );
    }

    #[test]
    fn lambdas_and_namespaces_go_before_a_cut() {
        let name = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous \
                    namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, \
                    c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() \
                    const::{lambda()#7}::operator()() const::{lambda(float)#1}, \
                    at::detail::Array<char*, 2> >(int, at::native::(anonymous \
                    namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, \
                    c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() \
                    const::{lambda()#7}::operator()() const::{lambda(float)#1}, \
                    at::detail::Array<char*, 2>)";
        assert_eq!(
            short_names(&[name])[0].as_deref(),
            Some(
                "at::native::vectorized_elementwise_kernel<4, \
                 launch_clamp_scalar(…)::{lambda}, Array<char*, 2> >(…)"
            )
        );
    }

    #[test]
    fn a_long_name_keeps_its_start_and_end_within_the_limit() {
        let name = format!("Cijk_{}_WG64_4_1", "MT64x16x16_".repeat(40));
        let shown = short_names(&[&name])[0].clone().unwrap();
        assert_eq!(shown.chars().count(), NAME_CHARS);
        assert!(shown.starts_with("Cijk_MT64x16x16_"), "{shown}");
        assert!(shown.ends_with("_WG64_4_1"), "{shown}");
        assert!(shown.contains(" … "), "{shown}");
    }

    #[test]
    fn names_that_would_read_the_same_show_where_they_differ() {
        let shapes = |n: usize| {
            let mut s: Vec<String> = (0..200).map(|i| format!("[{i},64]")).collect();
            s[150] = format!("[{n},64]");
            format!("forward [{}]", s.join(","))
        };
        let (a, b) = (shapes(6825), shapes(6735));
        let shown: Vec<String> = short_names(&[&a, &b]).into_iter().flatten().collect();
        assert_eq!(shown.len(), 2);
        assert_ne!(shown[0], shown[1]);
        for (s, n) in shown.iter().zip(["6825", "6735"]) {
            assert!(s.starts_with("forward [[0,64],[1,64]"), "{s}");
            assert!(s.contains(n), "{s}");
            assert!(s.chars().count() <= NAME_CHARS, "{s}");
        }
    }

    #[test]
    fn a_parenthesis_after_a_space_and_a_line_number_stay() {
        let name = format!("train.py(45): {} (807213 µs)", "a".repeat(140));
        let shown = short_names(&[&name])[0].clone().unwrap();
        assert!(shown.starts_with("train.py(45): aaa"), "{shown}");
        assert!(shown.ends_with("(807213 µs)"), "{shown}");
    }

    #[test]
    fn kernel_names_lose_templates_and_parameters() {
        assert_eq!(
            bare_name("void at::native::elementwise_kernel<128, 4, at::native::F<float> >(int, F)"),
            "at::native::elementwise_kernel"
        );
        assert_eq!(bare_name("Memcpy HtoD (Pageable -> Device)"), "Memcpy HtoD");
        assert_eq!(
            bare_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        );
    }

    #[test]
    fn clips_keep_the_start_or_the_end() {
        assert_eq!(clip("abcdef", 6), "abcdef");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(
            clip_left("/home/u/train.py:40 step", 18),
            "…/train.py:40 step"
        );
        assert_eq!(clip_left("train.py:40", 18), "train.py:40");
    }
}
