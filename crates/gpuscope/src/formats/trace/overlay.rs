//! A copy of a trace file with some of its events marked and events added: each marked
//! event gets an `args` member of gpuscope's (the patterns of `TraceAnalysis`'
//! `get_frequent_cuda_kernel_sequences`, searchable in Perfetto), on request the other
//! complete events lose their `args` (a smaller file), and new events (counter tracks)
//! go at the end of `traceEvents`.
//!
//! Every value is copied as the bytes it was written as, so nothing is lost: Python's
//! `json` would read a microsecond time of 19 digits (`1712195495519689.047`, a
//! nanosecond-resolution trace) into a float and write `1712195495519689.0`. What
//! changes: the whitespace between members, a leading byte-order mark (dropped),
//! member names, written back from their decoded text (`"\u0041"` becomes `"A"`), and a
//! first member, `"gpuscopeCopyOf": "<the source's file name>"`, by which a directory's
//! listing tells the copy from a second trace of its rank.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use rustc_hash::{FxHashMap, FxHashSet};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::read::{text_of, COPY_OF};
use super::split::{SplitError, Splitter};
use crate::error::{Error, Result};
use crate::model::trace::{CounterSample, FlowArrow};

/// What to change in the copy.
#[derive(Default)]
pub struct Overlay<'a> {
    /// By position in `traceEvents`: the member to put into that event's `args`, its
    /// name and its value as JSON.
    pub args: FxHashMap<u32, (&'a str, &'a RawValue)>,
    /// Whether the other complete (`"ph": "X"`) events lose their `args`.
    pub drop_other_args: bool,
    /// Counter samples to add, as events, after the last of the (first) `traceEvents`
    /// array.
    pub append: &'a [CounterSample],
    /// Arrows to add after them, each as a flow's start and end events; an arrow with
    /// an end at an event without a `pid` and a `tid`, or after the first `traceEvents`
    /// array, is left out.
    pub flows: &'a [FlowArrow],
    /// By position in `traceEvents`: the events left out of the copy.
    pub drop: FxHashSet<u32>,
}

/// Copies the trace at `source` (gzip or not) to `target` with `overlay` applied; gzipped
/// when `target`'s name ends in `.gz`. Written beside `target` and renamed into place
/// when whole, so that a failed copy leaves no part of a file there.
pub fn write_overlay(source: &Path, target: &Path, overlay: &Overlay<'_>) -> Result<()> {
    let file = File::open(source).map_err(|e| Error::io(source, e))?;
    let mut splitter = Splitter::new(text_of(source, file)?);
    let copy_of = source
        .file_name()
        .map_or_else(|| source.to_string_lossy(), |name| name.to_string_lossy());
    let mut partial = target.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let out = BufWriter::new(File::create(&partial).map_err(|e| Error::output(target, e))?);
    let written = if target.extension().is_some_and(|x| x == "gz") {
        // Buffered in front too: an event rewritten is many small writes, each of which
        // the encoder would take on its own (the whole question took 0.9–1.3 s instead of
        // 0.2–0.3 s in bench_notebook.py).
        let level = flate2::Compression::default();
        let mut gz = BufWriter::new(flate2::write::GzEncoder::new(out, level));
        copy_document(&mut splitter, &mut gz, overlay, &copy_of).and_then(|()| {
            let gz = gz.into_inner().map_err(|e| e.into_error())?;
            Ok(gz.finish()?.into_inner().map_err(|e| e.into_error())?)
        })
    } else {
        let mut out = out;
        copy_document(&mut splitter, &mut out, overlay, &copy_of)
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

/// The document with `overlay` applied, its first member [`COPY_OF`] naming `copy_of`
/// (a directory's listing leaves the copy out: it is a second trace of its rank). The
/// source's own mark, when it is a copy itself, gives way to this one.
fn copy_document<R: io::Read>(
    s: &mut Splitter<R>,
    out: &mut dyn Write,
    overlay: &Overlay<'_>,
    copy_of: &str,
) -> std::result::Result<(), Failure> {
    s.skip_bom()?;
    s.expect(b'{')?;
    out.write_all(b"{")?;
    serde_json::to_writer(&mut *out, COPY_OF).map_err(io::Error::from)?;
    out.write_all(b":")?;
    serde_json::to_writer(&mut *out, copy_of).map_err(io::Error::from)?;
    let mut raw = Vec::new();
    // Counted across every `traceEvents` array, as the reader counts them.
    let mut position = 0u32;
    let mut to_append = overlay.append;
    let mut flows = overlay.flows;
    if s.peek()? != Some(b'}') {
        loop {
            let key = s.key()?;
            let events = key == "traceEvents" && s.peek()? == Some(b'[');
            if !events {
                raw.clear();
                s.value(&mut raw)?;
            }
            // The source's own mark, if it is a copy, is left out.
            if key != COPY_OF {
                out.write_all(b",")?;
                serde_json::to_writer(&mut *out, &key).map_err(io::Error::from)?;
                out.write_all(b":")?;
                if events {
                    copy_events(s, out, overlay, &mut position, &mut to_append, &mut flows)?;
                } else {
                    out.write_all(&raw)?;
                }
            }
            if !s.next_or_close(b'}')? {
                break;
            }
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
    to_append: &mut &[CounterSample],
    flows: &mut &[FlowArrow],
) -> std::result::Result<(), Failure> {
    s.expect(b'[')?;
    out.write_all(b"[")?;
    let mut raw = Vec::new();
    let (mut first, mut written) = (true, false);
    // The tracks of the events the arrows end at, as written.
    let wanted: FxHashSet<u32> = flows
        .iter()
        .flat_map(|a| [a.from.event, a.to.event])
        .collect();
    let mut tracks: FxHashMap<u32, Track> = FxHashMap::default();
    let mut separate = |out: &mut dyn Write| -> io::Result<()> {
        if std::mem::replace(&mut written, true) {
            out.write_all(b",")?;
        }
        Ok(())
    };
    while s.peek()? != Some(b']') {
        if !std::mem::replace(&mut first, false) {
            s.expect(b',')?;
        }
        raw.clear();
        s.value(&mut raw)?;
        let at = *position;
        *position = position.saturating_add(1);
        if wanted.contains(&at) {
            if let Some(track) = track_of(&raw) {
                tracks.insert(at, track);
            }
        }
        if overlay.drop.contains(&at) {
            continue;
        }
        separate(out)?;
        let mark = overlay.args.get(&at).copied();
        match (mark, overlay.drop_other_args) {
            (None, false) => out.write_all(&raw)?,
            (mark, _) => copy_event(&raw, mark, out)?,
        }
    }
    s.expect(b']')?;
    for sample in std::mem::take(to_append) {
        separate(out)?;
        write_counter(out, sample)?;
    }
    let arrows = std::mem::take(flows).iter().filter_map(|arrow| {
        let ends = [(&arrow.from, true), (&arrow.to, false)];
        let tracks = ends.map(|(end, _)| tracks.get(&end.event));
        Some((arrow, [(ends[0], tracks[0]?), (ends[1], tracks[1]?)]))
    });
    for (id, (arrow, ends)) in arrows.enumerate() {
        for ((end, start), track) in ends {
            separate(out)?;
            write_flow(out, arrow, id, end.at, start, track)?;
        }
    }
    out.write_all(b"]")?;
    Ok(())
}

/// One event: with `mark` put into its `args`; without, a complete event without `args`.
/// An element that is not an object, and an event without a mark that is not complete,
/// is copied as it is.
fn copy_event(raw: &[u8], mark: Option<(&str, &RawValue)>, out: &mut dyn Write) -> io::Result<()> {
    let Ok(event) = serde_json::from_slice::<Members<'_>>(raw) else {
        return out.write_all(raw);
    };
    let complete = event.get("ph").is_some_and(|ph| ph.get() == r#""X""#);
    if mark.is_none() && !complete {
        return out.write_all(raw);
    }
    // `args` keeps its place: replaced with the mark in, or left out.
    let marked_args = match mark {
        Some(mark) => Some(with_member(
            event.get("args").unwrap_or(empty_object()),
            mark,
        )?),
        None => None,
    };
    let mut written: Vec<(&str, &[u8])> = Vec::with_capacity(event.0.len() + 1);
    for (key, value) in &event.0 {
        match (key.as_ref(), &marked_args) {
            ("args", None) => {}
            ("args", Some(args)) => written.push(("args", args)),
            (key, _) => written.push((key, value.get().as_bytes())),
        }
    }
    if let (Some(args), false) = (&marked_args, written.iter().any(|(k, _)| *k == "args")) {
        written.push(("args", args));
    }
    write_object(out, written.into_iter())
}

/// `args` with `mark` set (an `args` that is not an object is replaced).
fn with_member(args: &RawValue, (name, value): (&str, &RawValue)) -> io::Result<Vec<u8>> {
    let members = serde_json::from_str::<Members<'_>>(args.get())
        .map(|m| m.0)
        .unwrap_or_default();
    let kept = members
        .iter()
        .filter(|(key, _)| key != name)
        .map(|(k, v)| (k.as_ref(), v.get().as_bytes()));
    let mut out = Vec::new();
    write_object(&mut out, kept.chain([(name, value.get().as_bytes())]))?;
    Ok(out)
}

/// An object of `members`, each value written as the bytes given.
fn write_object<'m>(
    out: &mut dyn Write,
    members: impl Iterator<Item = (&'m str, &'m [u8])>,
) -> io::Result<()> {
    out.write_all(b"{")?;
    for (k, (key, value)) in members.enumerate() {
        if k > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, key)?;
        out.write_all(b":")?;
        out.write_all(value)?;
    }
    out.write_all(b"}")
}

/// `ns` in µs to the nanosecond, as the trace's events have times, never through a float
/// (which holds a 16-digit microsecond time to a quarter of a microsecond).
fn micros_text(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let (us, frac) = (ns.unsigned_abs() / 1000, ns.unsigned_abs() % 1000);
    format!("{sign}{us}.{frac:03}")
}

/// An event's `pid` and `tid`, as written.
struct Track {
    pid: Vec<u8>,
    tid: Vec<u8>,
}

/// The track of the event `raw`, when it has both.
fn track_of(raw: &[u8]) -> Option<Track> {
    let event: Members<'_> = serde_json::from_slice(raw).ok()?;
    let text = |name: &str| Some(event.get(name)?.get().as_bytes().to_vec());
    Some(Track {
        pid: text("pid")?,
        tid: text("tid")?,
    })
}

/// One end of `arrow` (the `id`th), at `at` on `track`, as a flow event: its start
/// (`"ph": "s"`) or its end (`"ph": "f"`, bound to the enclosing slice).
fn write_flow(
    out: &mut dyn Write,
    arrow: &FlowArrow,
    id: usize,
    at: i64,
    start: bool,
    track: &Track,
) -> io::Result<()> {
    let (id, ts, weight) = (id.to_string(), micros_text(at), micros_text(arrow.weight));
    let (cat, name) = (json(arrow.cat)?, json(arrow.name)?);
    let mut args = Vec::new();
    let critical = if arrow.critical { "true" } else { "false" };
    write_object(
        &mut args,
        [
            ("weight", weight.as_bytes()),
            ("critical", critical.as_bytes()),
        ]
        .into_iter(),
    )?;
    let ph: &[u8] = if start { br#""s""# } else { br#""f""# };
    let bind = (!start).then_some(("bp", &br#""e""#[..]));
    let members = [
        ("ph", ph),
        ("id", id.as_bytes()),
        ("pid", &track.pid),
        ("tid", &track.tid),
        ("ts", ts.as_bytes()),
    ];
    let rest = [("cat", &cat[..]), ("name", &name), ("args", &args)];
    write_object(out, members.into_iter().chain(bind).chain(rest))
}

/// `sample` as a counter event (`"ph": "C"`), its time in µs to the nanosecond.
fn write_counter(out: &mut dyn Write, sample: &CounterSample) -> io::Result<()> {
    // JSON has no infinity or NaN.
    let value = if sample.value.is_finite() {
        sample.value.to_string()
    } else {
        "null".to_owned()
    };
    let mut args = Vec::new();
    write_object(&mut args, [(sample.counter, value.as_bytes())].into_iter())?;
    let (name, pid, ts) = (
        json(&sample.track)?,
        sample.pid.to_string(),
        micros_text(sample.at),
    );
    let id = sample.id.map(|id| id.to_string());
    let members = [
        ("ph", &br#""C""#[..]),
        ("name", &name),
        ("pid", pid.as_bytes()),
        ("ts", ts.as_bytes()),
    ];
    let id = id.as_deref().map(|id| ("id", id.as_bytes()));
    write_object(
        out,
        members.into_iter().chain(id).chain([("args", &args[..])]),
    )
}

/// `value` as JSON text.
fn json<T: serde::Serialize + ?Sized>(value: &T) -> io::Result<Vec<u8>> {
    Ok(serde_json::to_vec(value)?)
}

fn empty_object() -> &'static RawValue {
    serde_json::from_str("{}").expect("{} is JSON")
}

/// An object's members in their order, each value as written.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Members<'a> {
    /// The value of the member `name`, as written.
    fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_times_are_written_to_the_nanosecond_without_a_float() {
        let text = |at, id, value| {
            let sample = CounterSample {
                track: "Memcpy HtoD".into(),
                pid: 0,
                id,
                at,
                counter: "Memcpy BW",
                value,
            };
            let mut out = Vec::new();
            write_counter(&mut out, &sample).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            text(1_712_195_495_519_689_047, None, 1.5),
            r#"{"ph":"C","name":"Memcpy HtoD","pid":0,"ts":1712195495519689.047,"args":{"Memcpy BW":1.5}}"#
        );
        assert!(
            text(-1_500, Some(7), 3.0).contains(r#""ts":-1.500,"id":7,"args":{"Memcpy BW":3}}"#)
        );
        assert!(text(7, None, f64::INFINITY).ends_with(r#""ts":0.007,"args":{"Memcpy BW":null}}"#));
    }
}
