//! A copy of a trace file with some of its events marked and events added: each marked
//! event gets an `args` member of gpuscope's (the patterns of `TraceAnalysis`'
//! `get_frequent_cuda_kernel_sequences`, searchable in Perfetto), on request the other
//! complete events lose their `args` (a smaller file), and new events (counter tracks)
//! go at the end of `traceEvents`.
//!
//! Every value is copied as the bytes it was written as, so nothing is lost: Python's
//! `json` would read a microsecond time of 19 digits (`1712195495519689.047`, a
//! nanosecond-resolution trace) into a float and write `1712195495519689.0`. What
//! changes: the whitespace between members, a leading byte-order mark (dropped), and
//! member names, written back from their decoded text (`"\u0041"` becomes `"A"`).

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::read::text_of;
use super::split::{SplitError, Splitter};
use crate::error::{Error, Result};

/// What to change in the copy.
#[derive(Default)]
pub struct Overlay<'a> {
    /// By position in `traceEvents`: the member to put into that event's `args`, its
    /// name and its value as JSON.
    pub args: FxHashMap<u32, (&'a str, &'a RawValue)>,
    /// Whether the other complete (`"ph": "X"`) events lose their `args`.
    pub drop_other_args: bool,
    /// Events to add after the last of the (first) `traceEvents` array.
    pub append: &'a [Box<RawValue>],
}

/// Copies the trace at `source` (gzip or not) to `target` with `overlay` applied; gzipped
/// when `target`'s name ends in `.gz`. Written beside `target` and renamed into place
/// when whole, so that a failed copy leaves no part of a file there.
pub fn write_overlay(source: &Path, target: &Path, overlay: &Overlay<'_>) -> Result<()> {
    let file = File::open(source).map_err(|e| Error::io(source, e))?;
    let mut splitter = Splitter::new(text_of(source, file)?);
    let mut partial = target.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let out = BufWriter::new(File::create(&partial).map_err(|e| Error::output(target, e))?);
    let written = if target.extension().is_some_and(|x| x == "gz") {
        // Buffered in front too: an event rewritten is many small writes, each of which
        // the encoder would take on its own (about six times slower on the largest shared trace).
        let level = flate2::Compression::default();
        let mut gz = BufWriter::new(flate2::write::GzEncoder::new(out, level));
        copy_document(&mut splitter, &mut gz, overlay).and_then(|()| {
            let gz = gz.into_inner().map_err(|e| e.into_error())?;
            Ok(gz.finish()?.into_inner().map_err(|e| e.into_error())?)
        })
    } else {
        let mut out = out;
        copy_document(&mut splitter, &mut out, overlay)
            .and_then(|()| Ok(out.into_inner().map_err(|e| e.into_error())?))
    };
    let renamed = written.and_then(|file| {
        drop(file);
        Ok(std::fs::rename(&partial, target)?)
    });
    if renamed.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    match renamed {
        Ok(()) => Ok(()),
        Err(Failure::Input(what)) => Err(Error::bad_input(source, what)),
        Err(Failure::Output(e)) => Err(Error::output(target, e)),
    }
}

/// Why a copy stopped.
enum Failure {
    Input(String),
    Output(io::Error),
}

impl From<SplitError> for Failure {
    fn from(e: SplitError) -> Self {
        Failure::Input(e.to_string())
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Output(e)
    }
}

fn copy_document<R: io::Read>(
    s: &mut Splitter<R>,
    out: &mut dyn Write,
    overlay: &Overlay<'_>,
) -> std::result::Result<(), Failure> {
    s.skip_bom()?;
    s.expect(b'{')?;
    out.write_all(b"{")?;
    let mut raw = Vec::new();
    // Counted across every `traceEvents` array, as the reader counts them.
    let mut position = 0u32;
    let mut to_append = overlay.append;
    if s.peek()? != Some(b'}') {
        loop {
            let key = s.key()?;
            serde_json::to_writer(&mut *out, &key).map_err(io::Error::from)?;
            out.write_all(b":")?;
            if key == "traceEvents" && s.peek()? == Some(b'[') {
                copy_events(s, out, overlay, &mut position, &mut to_append)?;
            } else {
                raw.clear();
                s.value(&mut raw)?;
                out.write_all(&raw)?;
            }
            if !s.next_or_close(b'}')? {
                break;
            }
            out.write_all(b",")?;
        }
    } else {
        s.expect(b'}')?;
    }
    out.write_all(b"}")?;
    Ok(())
}

fn copy_events<R: io::Read>(
    s: &mut Splitter<R>,
    out: &mut dyn Write,
    overlay: &Overlay<'_>,
    position: &mut u32,
    to_append: &mut &[Box<RawValue>],
) -> std::result::Result<(), Failure> {
    s.expect(b'[')?;
    out.write_all(b"[")?;
    let mut raw = Vec::new();
    let mut first = true;
    while s.peek()? != Some(b']') {
        if !first {
            s.expect(b',')?;
            out.write_all(b",")?;
        }
        first = false;
        raw.clear();
        s.value(&mut raw)?;
        let mark = overlay.args.get(position).copied();
        match (mark, overlay.drop_other_args) {
            (None, false) => out.write_all(&raw)?,
            (mark, _) => copy_event(&raw, mark, out)?,
        }
        *position = position.saturating_add(1);
    }
    s.expect(b']')?;
    for event in std::mem::take(to_append) {
        out.write_all(if first { b"" } else { b"," })?;
        first = false;
        out.write_all(event.get().as_bytes())?;
    }
    out.write_all(b"]")?;
    Ok(())
}

/// One event: with `mark` put into its `args`; without, a complete event without `args`.
/// An element that is not an object, and an event without a mark that is not complete,
/// is copied as it is.
fn copy_event(raw: &[u8], mark: Option<(&str, &RawValue)>, out: &mut dyn Write) -> io::Result<()> {
    let Ok(Members(members)) = serde_json::from_slice::<Members<'_>>(raw) else {
        return out.write_all(raw);
    };
    let complete = members
        .iter()
        .any(|(k, v)| k == "ph" && v.get() == r#""X""#);
    if mark.is_none() && !complete {
        return out.write_all(raw);
    }
    let mut first = true;
    let mut member = |out: &mut dyn Write, key: &str, value: &[u8]| -> io::Result<()> {
        out.write_all(if first { b"{" } else { b"," })?;
        first = false;
        serde_json::to_writer(&mut *out, key).map_err(io::Error::from)?;
        out.write_all(b":")?;
        out.write_all(value)
    };
    let mut args_seen = false;
    for (key, value) in &members {
        if key != "args" {
            member(out, key, value.get().as_bytes())?;
            continue;
        }
        args_seen = true;
        if let Some(mark) = mark {
            member(out, key, &with_member(value, mark)?)?;
        }
    }
    if let (false, Some(mark)) = (args_seen, mark) {
        member(out, "args", &with_member(empty_object(), mark)?)?;
    }
    out.write_all(if first { b"{}" } else { b"}" })
}

/// `args` with `mark` set (an `args` that is not an object is replaced).
fn with_member(args: &RawValue, (name, value): (&str, &RawValue)) -> io::Result<Vec<u8>> {
    let members = serde_json::from_str::<Members<'_>>(args.get())
        .map(|m| m.0)
        .unwrap_or_default();
    let mut out = vec![b'{'];
    for (key, raw) in members.iter().filter(|(key, _)| key != name) {
        serde_json::to_writer(&mut out, key)?;
        out.push(b':');
        out.extend_from_slice(raw.get().as_bytes());
        out.push(b',');
    }
    serde_json::to_writer(&mut out, name)?;
    out.push(b':');
    out.extend_from_slice(value.get().as_bytes());
    out.push(b'}');
    Ok(out)
}

fn empty_object() -> &'static RawValue {
    serde_json::from_str("{}").expect("{} is JSON")
}

/// An object's members in their order, each value as written.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Members<'de>, A::Error> {
                let mut members = Vec::new();
                while let Some(entry) = map.next_entry::<Cow<'de, str>, &'de RawValue>()? {
                    members.push(entry);
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V)
    }
}
