//! Reads a Kineto Chrome trace (`.json` or `.json.gz`) as a stream into the compact
//! [`Trace`] model: the `traceEvents` array is split into batches of events
//! ([`super::split`]) that serde_json parses on every core, so memory holds the columns
//! and a few batches of 256 KB, never the document. Events that cannot be used (no
//! timestamp, a negative duration, an unknown phase) are counted, not fatal. Of the
//! document's other keys, the rank (`distributedInfo`), the time base
//! (`baseTimeNanoseconds`) and Kineto's log lines about lost records (`WARNING`, `ERROR`,
//! the record counts in `INFO`) are kept.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::mpsc;

use rayon::prelude::*;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::split::{SplitError, Splitter};
use crate::formats::progress::Progress;
use crate::model::trace::{
    AllocatorTotals, Collective, Event, EventWait, Kind, RankFrom, Trace, NONE, NO_SHAPES,
};
use crate::{Error, Result};

/// Events parsed per batch, in bytes of JSON: enough to share among cores, and small
/// enough that the first is soon ready and the last soon done (the cores wait for both).
/// `bench/ab_trace.py` on the two large shared traces: 256 KB had a 5-9 % lower median
/// than 1 MB, 128 KB a 9 % higher one than 256 KB.
const BATCH_BYTES: usize = 1 << 18;

/// Reads the trace at `path`; `progress` is told the (compressed) bytes read so far.
pub fn read_trace(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<Trace> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let total = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Progress::new(total, progress);
    let input = text_of(path, bytes.reader(file))?;
    let mut trace = Trace::default();
    let mut seen = Seen::default();
    let mut splitter = Splitter::new(input);
    let found = splitter
        .skip_bom()
        .map_err(text)
        .and_then(|()| read_document(&mut splitter, &mut trace, &mut seen))
        .map_err(|what| Error::bad_input(path, what))?;
    if !found.events {
        return Err(Error::bad_input(
            path,
            "no traceEvents (not a PyTorch profiler trace)",
        ));
    }
    (trace.rank, trace.rank_from) = match (found.rank, rank_in_name(path)) {
        (Some(rank), _) => (rank, RankFrom::Metadata),
        (None, Some(rank)) => (rank, RankFrom::FileName),
        (None, None) => (0, RankFrom::Default),
    };
    trace.base_time_ns = found.base_time_ns.unwrap_or_default();
    trace.kineto_log = found.kineto_log;
    trace.dropped = seen.dropped.into_iter().collect();
    if trace.events.is_empty() {
        let why = if trace.dropped.is_empty() {
            "traceEvents holds no events".to_owned()
        } else {
            let skipped: Vec<String> = trace
                .dropped
                .iter()
                .map(|(why, n)| format!("{n} {why}"))
                .collect();
            format!("no usable events ({})", skipped.join(", "))
        };
        return Err(Error::bad_input(path, why));
    }
    Ok(trace)
}

fn text(e: SplitError) -> String {
    e.to_string()
}

/// The top-level object: `traceEvents` streamed, `distributedInfo` read, the rest skipped.
fn read_document<R: Read>(
    s: &mut Splitter<R>,
    trace: &mut Trace,
    seen: &mut Seen,
) -> std::result::Result<Found, String> {
    let mut found = Found::default();
    match s.peek().map_err(text)? {
        Some(b'{') => s.expect(b'{').map_err(text)?,
        Some(_) => return Err("not a trace: not a JSON object".into()),
        None => return Err("empty file".into()),
    }
    if s.peek().map_err(text)? == Some(b'}') {
        return Ok(found);
    }
    let mut skipped = Vec::new();
    loop {
        let key = s.key().map_err(text)?;
        match key.as_str() {
            "traceEvents" => {
                read_events(s, trace, seen)?;
                found.events = true;
            }
            "distributedInfo" => {
                let mut raw = Vec::new();
                s.value(&mut raw).map_err(text)?;
                found.rank = DistributedInfo::rank_in(&raw);
            }
            "baseTimeNanoseconds" => {
                let mut raw = Vec::new();
                s.value(&mut raw).map_err(text)?;
                found.base_time_ns = serde_json::from_slice::<i64>(&raw).ok();
            }
            level @ ("WARNING" | "ERROR" | "INFO") => {
                let mut raw = Vec::new();
                s.value(&mut raw).map_err(text)?;
                let lines = serde_json::from_slice::<Vec<serde_json::Value>>(&raw)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|line| match line {
                        serde_json::Value::String(line) => Some(line),
                        _ => None,
                    })
                    .filter(|line| level != "INFO" || line.contains(RECORD_COUNTS));
                found.kineto_log.extend(lines);
            }
            _ => {
                skipped.clear();
                s.value(&mut skipped).map_err(text)?;
            }
        }
        if !s.next_or_close(b'}').map_err(text)? {
            break;
        }
    }
    if let Some(byte) = s.peek().map_err(text)? {
        return Err(format!(
            "not a valid trace: {:?} after the end of the document",
            char::from(byte)
        ));
    }
    Ok(found)
}

/// A batch of raw events: their bytes back to back, and where each ends.
type Batch = (Vec<u8>, Vec<usize>);

/// What the events of a batch came to, in order.
type ParsedEvents<'a> = Vec<Parsed<'a>>;

self_cell::self_cell!(
    /// A batch with its events parsed, borrowing names from it, on its way from the
    /// parsing threads to the thread that pushes them into the model.
    struct ParsedBatch {
        owner: Batch,
        #[covariant]
        dependent: ParsedEvents,
    }
);

/// The `traceEvents` array: split into batches on this thread, each parsed on every core,
/// its events then pushed into the model on a thread of their own, so that one batch is
/// pushed while the next is parsed and the one after split.
fn read_events<R: Read>(
    s: &mut Splitter<R>,
    trace: &mut Trace,
    seen: &mut Seen,
) -> std::result::Result<(), String> {
    match s.peek().map_err(text)? {
        Some(b'[') => s.expect(b'[').map_err(text)?,
        Some(_) => return Err("not a valid trace: traceEvents is not an array".into()),
        None => return Err(text(SplitError::Truncated)),
    }
    if s.peek().map_err(text)? == Some(b']') {
        return s.expect(b']').map_err(text);
    }
    let (full, to_parse) = mpsc::sync_channel::<Batch>(1);
    let (parsed, to_push) = mpsc::sync_channel::<ParsedBatch>(1);
    let (empty, to_fill) = mpsc::channel::<Batch>();
    std::thread::scope(|scope| {
        // A bad event is counted, never an error: only the splitting can fail.
        let parser = scope.spawn(move || {
            for batch in to_parse {
                let batch = ParsedBatch::new(batch, |(bytes, ends)| parse_batch(bytes, ends));
                if parsed.send(batch).is_err() {
                    return;
                }
            }
        });
        let pusher = scope.spawn(move || {
            for batch in to_push {
                batch.with_dependent(|_, events| {
                    for event in events {
                        match event {
                            Parsed::Skipped => {}
                            Parsed::Dropped(why) => seen.drop(why),
                            Parsed::Usable(usable) => push(trace, seen, usable),
                        }
                        seen.position = seen.position.saturating_add(1);
                    }
                });
                let _ = empty.send(batch.into_owner());
            }
        });
        let split = split_events(s, &full, &to_fill);
        drop(full);
        parser.join().expect("the trace parser does not panic");
        pusher
            .join()
            .expect("the trace model's writer does not panic");
        split
    })
}

/// Splits the array's elements into batches and sends them to the parser.
fn split_events<R: Read>(
    s: &mut Splitter<R>,
    full: &mpsc::SyncSender<Batch>,
    to_fill: &mpsc::Receiver<Batch>,
) -> std::result::Result<(), String> {
    let fresh = || (Vec::with_capacity(BATCH_BYTES + (1 << 16)), Vec::new());
    let (mut batch, mut ends) = fresh();
    loop {
        s.value(&mut batch).map_err(text)?;
        ends.push(batch.len());
        let more = s.next_or_close(b']').map_err(text)?;
        if batch.len() >= BATCH_BYTES || !more {
            if full.send((batch, ends)).is_err() {
                return Ok(()); // the parser has stopped: its panic is reported on join
            }
            (batch, ends) = to_fill.try_recv().unwrap_or_else(|_| fresh());
            batch.clear();
            ends.clear();
        }
        if !more {
            return Ok(());
        }
    }
}

fn parse_batch<'a>(batch: &'a [u8], ends: &[usize]) -> ParsedEvents<'a> {
    (0..ends.len())
        .into_par_iter()
        .map(|k| parse_event(&batch[if k == 0 { 0 } else { ends[k - 1] }..ends[k]]))
        .collect()
}

/// What one element of `traceEvents` comes to, worked out on the parsing threads so that
/// only interning its strings and pushing it are left to the thread that owns the model.
enum Parsed<'a> {
    /// Nothing in it is used (flows, metadata, instants other than memory).
    Skipped,
    /// Left out, and why.
    Dropped(&'static str),
    Usable(Usable<'a>),
}

/// An event to keep, with its strings not yet interned.
struct Usable<'a> {
    /// The event, its `name` and `shapes` still unset.
    event: Event,
    name: Cow<'a, str>,
    shapes: Option<&'a RawValue>,
    counter_range: bool,
    bandwidth: Option<f64>,
    /// A `[memory]` event's allocator totals.
    totals: Option<AllocatorTotals>,
    /// A kernel's collective: its name and dtype not yet interned (boxed: few events have
    /// one, and every event is moved between threads).
    collective: Option<Box<RawCollective<'a>>>,
    /// A range-profiler kernel's counters, their names not yet interned.
    counters: Option<Box<[(String, f64)]>>,
    /// What a synchronisation on a CUDA event waits for (boxed, as `collective` is).
    event_wait: Option<Box<EventWait>>,
}

/// The `args` of a `cuda_profiler_range` event: every one a hardware counter. Read in a
/// second pass over those events alone, so that other events do not pay for a map.
#[derive(Deserialize)]
struct CounterArgs {
    #[serde(default)]
    args: BTreeMap<String, serde_json::Value>,
}

/// The numeric `args` of the event `bytes`, by name.
fn counters_of(bytes: &[u8]) -> Vec<(String, f64)> {
    serde_json::from_slice::<CounterArgs>(bytes)
        .map(|c| {
            c.args
                .into_iter()
                .filter_map(|(name, value)| Some((name, value.as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// A collective's name, dtype and numbers, as read.
type RawCollective<'a> = (Cow<'a, str>, Option<Cow<'a, str>>, Collective);

fn parse_event(bytes: &[u8]) -> Parsed<'_> {
    // Flow events, a third of a trace or more, are passed over unparsed: nothing in them
    // is used, and the splitter has seen that they are whole.
    if Phase::leading(bytes) == Some(Phase::Ignored) {
        return Parsed::Skipped;
    }
    // Parsing text rather than bytes spares serde_json a UTF-8 check of every key and
    // string (a tenth of the parse); the one check here is faster.
    let raw = match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    };
    match raw {
        Ok(raw) => usable(raw, bytes),
        // The splitter has checked the JSON's structure: this is an element of the wrong
        // shape (a number, a phase that is not a string), one bad event.
        Err(_) => Parsed::Dropped("malformed event"),
    }
}

/// The text of the trace whose bytes `file` reads: gunzipped when `path` is gzip.
pub(super) fn text_of<'a>(path: &Path, file: impl Read + 'a) -> Result<Box<dyn Read + 'a>> {
    let mut magic = [0u8; 2];
    let mut head = File::open(path).map_err(|e| Error::io(path, e))?;
    let gzip = head.read(&mut magic).map_err(|e| Error::io(path, e))? == 2 && magic == [0x1f, 0x8b];
    Ok(if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file)))
    } else {
        Box::new(file)
    })
}

/// What the members before `traceEvents` say of a trace file, read without its events:
/// what a directory listing needs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Head {
    /// `distributedInfo.rank`, where Kineto writes it.
    pub rank: Option<u32>,
    /// The file name of the trace this file is a copy of (`gpuscopeCopyOf`), when
    /// gpuscope wrote it: an overlay, a trace with counters.
    pub copy_of: Option<String>,
}

/// The member gpuscope writes first into every copy of a trace it writes.
pub const COPY_OF: &str = "gpuscopeCopyOf";

/// The [`Head`] of the trace at `path`; empty when it cannot be read.
pub fn peek_head(path: &Path) -> Head {
    let mut head = Head::default();
    let Ok(file) = File::open(path) else {
        return head;
    };
    let Ok(text) = text_of(path, file) else {
        return head;
    };
    let mut s = Splitter::new(text);
    if s.skip_bom().and_then(|()| s.expect(b'{')).is_err() {
        return head;
    }
    let mut raw = Vec::new();
    while let Ok(key) = s.key() {
        raw.clear();
        if key == "traceEvents" || s.value(&mut raw).is_err() {
            break;
        }
        match key.as_str() {
            "distributedInfo" => {
                head.rank = DistributedInfo::rank_in(&raw);
            }
            COPY_OF => head.copy_of = serde_json::from_slice(&raw).ok(),
            _ => {}
        }
        if !matches!(s.next_or_close(b'}'), Ok(true)) {
            break;
        }
    }
    head
}

/// `rank3`, `rank-3`, `rank_3` in the file name → 3.
pub(crate) fn rank_in_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_string_lossy().to_lowercase();
    let at = name.find("rank")? + 4;
    let rest = name[at..].trim_start_matches(['-', '_']);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The `INFO` line of Kineto's log that counts the records it did not keep.
const RECORD_COUNTS: &str = "Record counts:";

/// What the top level said.
#[derive(Default)]
struct Found {
    events: bool,
    rank: Option<u32>,
    base_time_ns: Option<i64>,
    kineto_log: Vec<String>,
}

#[derive(Default)]
struct Seen {
    dropped: BTreeMap<String, u64>,
    /// The next element's position, counted across every `traceEvents` array.
    position: u32,
    /// Reused for the compact text of each event's input shapes.
    scratch: String,
}

impl Seen {
    fn drop(&mut self, why: &str) {
        *self.dropped.entry(why.to_owned()).or_default() += 1;
    }
}

/// The rank, when it is a whole number that fits; anything else there is no rank.
#[derive(Deserialize)]
struct DistributedInfo {
    #[serde(default)]
    rank: Option<serde_json::Value>,
}

impl DistributedInfo {
    /// The rank in `distributedInfo` as written (`raw`), when it is a whole number
    /// that fits.
    fn rank_in(raw: &[u8]) -> Option<u32> {
        let info: DistributedInfo = serde_json::from_slice(raw).ok()?;
        info.rank?.as_u64()?.try_into().ok()
    }
}

/// The fields of an event that the analyses use; the rest is skipped unparsed.
#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(default)]
    ph: Phase,
    #[serde(default, borrow)]
    cat: Option<Text<'a>>,
    #[serde(default, borrow)]
    name: Option<Text<'a>>,
    #[serde(default)]
    ts: Option<Micros>,
    #[serde(default)]
    dur: Option<Micros>,
    #[serde(default)]
    pid: Option<Number>,
    #[serde(default)]
    tid: Option<Number>,
    #[serde(default, borrow)]
    args: Option<RawArgs<'a>>,
}

#[derive(Deserialize, Default)]
struct RawArgs<'a> {
    #[serde(default)]
    stream: Option<Number>,
    #[serde(default)]
    correlation: Option<Number>,
    #[serde(default, rename = "External id", alias = "external id")]
    external_id: Option<Number>,
    #[serde(default, alias = "Bytes")]
    bytes: Option<Number>,
    #[serde(default, alias = "Device Id")]
    device: Option<Number>,
    /// Kept as text: building a `Value` of nested arrays for every operator cost more
    /// than the rest of the event.
    #[serde(default, borrow, rename = "Input Dims")]
    input_dims: Option<&'a RawValue>,
    #[serde(default, rename = "memory bandwidth (GB/s)")]
    bandwidth: Option<f64>,
    #[serde(default, borrow, rename = "Collective name")]
    collective: Option<Text<'a>>,
    #[serde(default, borrow)]
    dtype: Option<Text<'a>>,
    #[serde(default, rename = "In msg nelems")]
    in_elements: Option<Number>,
    #[serde(default, rename = "Out msg nelems")]
    out_elements: Option<Number>,
    #[serde(default, rename = "Group size")]
    group_size: Option<Number>,
    #[serde(default, rename = "Seq")]
    seq: Option<Number>,
    #[serde(default)]
    wait_on_stream: Option<Number>,
    #[serde(default)]
    wait_on_cuda_event_record_corr_id: Option<Number>,
    #[serde(default, rename = "Total Allocated")]
    total_allocated: Option<Number>,
    #[serde(default, rename = "Total Reserved")]
    total_reserved: Option<Number>,
}

/// A string borrowed from the batch unless it has escapes. (serde's own `Cow<str>` in an
/// `Option` always copies: `#[serde(borrow)]` reaches only a bare `Cow`. That was two
/// allocations per event, freed on another thread.)
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Text<'a>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(
                self,
                v: &'de str,
            ) -> std::result::Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// The event phase: one of Chrome's trace-event letters.
#[derive(Default, Clone, Copy, PartialEq)]
enum Phase {
    Complete,
    Instant,
    /// Phases that carry nothing the analyses use (metadata, flows, counters, ...).
    Ignored,
    #[default]
    Missing,
    Unknown,
}

impl Phase {
    fn of(letter: &str) -> Phase {
        match letter {
            "X" => Phase::Complete,
            "i" | "I" => Phase::Instant,
            "B" | "E" | "M" | "s" | "t" | "f" | "b" | "n" | "e" | "C" | "P" | "O" | "N" | "D"
            | "R" | "c" | "(" | ")" => Phase::Ignored,
            _ => Phase::Unknown,
        }
    }

    /// The phase of an event that starts with it, as Kineto writes every event
    /// (`{"ph": "f", ...`).
    fn leading(event: &[u8]) -> Option<Phase> {
        let after = |bytes: &[u8], token: &[u8]| -> Option<usize> {
            let start = bytes.len() - bytes.trim_ascii_start().len();
            bytes[start..]
                .starts_with(token)
                .then_some(start + token.len())
        };
        let mut at = 0;
        for token in [&b"{"[..], b"\"ph\"", b":", b"\""] {
            at += after(&event[at..], token)?;
        }
        let letter = &event[at..];
        let len = letter.iter().position(|&b| b == b'"')?;
        Some(Phase::of(std::str::from_utf8(&letter[..len]).ok()?))
    }
}

impl<'de> Deserialize<'de> for Phase {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Phase, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Phase;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a phase letter")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Phase, E> {
                Ok(Phase::of(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// A number as Kineto writes it: integer or float, or a label ending in one (`"stream 7"`
/// as a tid); a value beyond 64 bits or of another type becomes `None`, not an error.
#[derive(Clone, Copy)]
struct Number(Option<f64>);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Number, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Number, E> {
                Ok(Number(Some(v as f64)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Number, E> {
                Ok(Number(Some(v as f64)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Number, E> {
                Ok(Number(v.is_finite().then_some(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Number, E> {
                let last = v.rsplit(' ').next().unwrap_or(v);
                Ok(Number(last.parse().ok().filter(|n: &f64| n.is_finite())))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_unit<E: de::Error>(self) -> std::result::Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<Number, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Number(None))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<Number, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Number(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl Number {
    /// As an integer column value ([`NONE`] when absent or out of range).
    fn int(n: Option<Number>) -> i64 {
        match n.and_then(|n| n.0) {
            Some(v) if v.abs() < 9.2e18 => v as i64,
            _ => NONE,
        }
    }
}

/// Largest timestamp or duration kept, µs: twice it in nanoseconds still fits an `i64`
/// (about 146 years; today's Unix time is 1.8e15 µs).
const MAX_US: u64 = 4_600_000_000_000_000;

/// A time in microseconds, Kineto's unit, as whole nanoseconds. Read from the number's
/// text: as an `f64`, a Unix-epoch timestamp (1.7e15 µs) keeps only quarter microseconds,
/// and newer Kineto writes nanoseconds (`1712195495519689.047`).
#[derive(Clone, Copy)]
enum Micros {
    Ns(i64),
    /// Beyond [`MAX_US`] either way.
    OutOfRange,
    /// Not a number (nor a label ending in one).
    Invalid,
}

impl<'de> Deserialize<'de> for Micros {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Micros, D::Error> {
        let raw = <&RawValue>::deserialize(d)?.get();
        if let Some(micros) = Micros::of_decimal(raw) {
            return Ok(micros);
        }
        // An exponent, a string, anything else: as any other number of an event.
        let number = serde_json::from_str::<Number>(raw).map_err(de::Error::custom)?;
        Ok(match number.0 {
            None => Micros::Invalid,
            Some(us) if us.abs() > MAX_US as f64 => Micros::OutOfRange,
            Some(us) => {
                // The whole microseconds scaled as an integer: `us * 1000.0` would blur.
                let whole = us.trunc();
                Micros::Ns(whole as i64 * 1000 + ((us - whole) * 1000.0).round() as i64)
            }
        })
    }
}

impl Micros {
    /// A plain JSON decimal (`-`, digits, `.` and digits; no exponent), exactly; `None`
    /// for other text. Digits past the nanosecond are rounded half away from zero.
    fn of_decimal(text: &str) -> Option<Micros> {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let decimal = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !decimal(whole) || !decimal(fraction) {
            return None;
        }
        let Some(us) = whole.parse::<u64>().ok().filter(|&us| us <= MAX_US) else {
            return Some(Micros::OutOfRange);
        };
        let mut sub = [b'0'; 4];
        for (to, from) in sub.iter_mut().zip(fraction.bytes()) {
            *to = from;
        }
        let ns_digits = sub[..3].iter().fold(0, |n, d| n * 10 + i64::from(d - b'0'));
        let ns = us as i64 * 1000 + ns_digits + i64::from(sub[3] >= b'5');
        Some(Micros::Ns(if negative { -ns } else { ns }))
    }
}

/// `json` without the whitespace between its tokens (`[[4096, 100], []]` →
/// `[[4096,100],[]]`), so shapes written with or without spaces group together.
fn compact_json(json: &str, out: &mut String) {
    out.clear();
    let mut in_string = false;
    let mut escaped = false;
    // Runs between whitespace bytes are copied whole: whitespace is ASCII, so every cut
    // is at a character boundary.
    let mut run = 0;
    for (at, byte) in json.bytes().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
        } else if byte == b'"' {
            in_string = true;
        } else if byte.is_ascii_whitespace() {
            out.push_str(&json[run..at]);
            run = at + 1;
        }
    }
    out.push_str(&json[run..]);
}

/// What to keep of the event `raw`, parsed from `bytes`.
fn usable<'a>(raw: RawEvent<'a>, bytes: &'a [u8]) -> Parsed<'a> {
    let category = raw.cat.as_ref().map_or("", |c| &c.0);
    let kind = match raw.ph {
        Phase::Complete => Kind::of_category(category),
        Phase::Instant if raw.name.as_ref().is_some_and(|n| n.0 == "[memory]") => Kind::Memory,
        Phase::Instant | Phase::Ignored => return Parsed::Skipped,
        Phase::Missing => return Parsed::Dropped("no phase (ph)"),
        Phase::Unknown => return Parsed::Dropped("unknown phase"),
    };
    let ts = match raw.ts {
        Some(Micros::Ns(ts)) => ts,
        Some(Micros::OutOfRange) => return Parsed::Dropped("timestamp (ts) out of range"),
        Some(Micros::Invalid) | None => return Parsed::Dropped("no timestamp (ts)"),
    };
    let dur = match (kind, raw.dur) {
        (Kind::Memory, _) => 0,
        (_, Some(Micros::OutOfRange)) => return Parsed::Dropped("duration (dur) out of range"),
        (_, Some(Micros::Ns(d))) if d < 0 => return Parsed::Dropped("negative duration"),
        (_, Some(Micros::Ns(d))) => d,
        (_, Some(Micros::Invalid) | None) => return Parsed::Dropped("no duration (dur)"),
    };
    let counter_range = raw.ph == Phase::Complete && category == "cuda_profiler_range";
    let args = raw.args.unwrap_or_default();
    let event_wait = event_wait(kind, &args);
    let collective = match (kind, args.collective) {
        (Kind::Kernel, Some(name)) => Some(Box::new((
            name.0,
            args.dtype.map(|d| d.0),
            Collective {
                name: 0,
                dtype: NO_SHAPES,
                in_elements: Number::int(args.in_elements),
                out_elements: Number::int(args.out_elements),
                group_size: Number::int(args.group_size),
                seq: Number::int(args.seq),
            },
        ))),
        _ => None,
    };
    Parsed::Usable(Usable {
        event: Event {
            kind,
            name: 0,
            ts,
            dur,
            pid: Number::int(raw.pid),
            tid: Number::int(raw.tid),
            stream: Number::int(args.stream),
            correlation: Number::int(args.correlation),
            external_id: Number::int(args.external_id),
            bytes: Number::int(args.bytes),
            device: Number::int(args.device),
            shapes: NO_SHAPES,
        },
        name: raw.name.map(|n| n.0).unwrap_or_default(),
        shapes: args.input_dims,
        counter_range,
        counters: counter_range.then(|| counters_of(bytes).into_boxed_slice()),
        bandwidth: args.bandwidth,
        totals: match (kind, args.total_allocated, args.total_reserved) {
            (Kind::Memory, allocated, reserved) if allocated.is_some() || reserved.is_some() => {
                Some(AllocatorTotals {
                    allocated: Number::int(allocated),
                    reserved: Number::int(reserved),
                })
            }
            _ => None,
        },
        collective,
        event_wait,
    })
}

/// What a synchronisation waits for, when it is a wait on a CUDA event recorded on a
/// stream (Kineto writes -1 where it does not know).
fn event_wait(kind: Kind, args: &RawArgs<'_>) -> Option<Box<EventWait>> {
    let on_stream = Number::int(args.wait_on_stream);
    let record_correlation = Number::int(args.wait_on_cuda_event_record_corr_id);
    (kind == Kind::Sync && on_stream >= 0 && record_correlation >= 0).then(|| {
        Box::new(EventWait {
            on_stream,
            record_correlation,
        })
    })
}

fn push(trace: &mut Trace, seen: &mut Seen, usable: &Usable<'_>) {
    let mut event = usable.event;
    event.name = trace.names.intern(&usable.name);
    if let Some(dims) = usable.shapes.map(RawValue::get) {
        if dims.starts_with('[') {
            compact_json(dims, &mut seen.scratch);
            event.shapes = trace.names.intern(&seen.scratch);
        }
    }
    trace.counter_ranges += u64::from(usable.counter_range);
    if let Some(gbps) = usable.bandwidth {
        trace.bandwidth.push((trace.events.len(), gbps));
    }
    if let Some(totals) = usable.totals {
        trace.allocator_totals.push((trace.events.len(), totals));
    }
    if let Some((name, dtype, args)) = usable.collective.as_deref() {
        let collective = Collective {
            name: trace.names.intern(name),
            dtype: dtype.as_ref().map_or(NO_SHAPES, |d| trace.names.intern(d)),
            ..*args
        };
        trace.collectives.push((trace.events.len(), collective));
    }
    if let Some(wait) = usable.event_wait.as_deref() {
        trace.event_waits.push((trace.events.len(), *wait));
    }
    if let Some(counters) = usable.counters.as_deref() {
        let counters = counters
            .iter()
            .map(|(name, value)| (trace.names.intern(name), *value))
            .collect();
        trace.counters.push((trace.events.len(), counters));
    }
    trace.positions.push(seen.position);
    trace.events.push(event);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_comes_from_the_file_name() {
        assert_eq!(rank_in_name(Path::new("x/rank3.trace.json")), Some(3));
        assert_eq!(
            rank_in_name(Path::new("x/trainer_rank-12.json.gz")),
            Some(12)
        );
        assert_eq!(rank_in_name(Path::new("x/Rank_7.json")), Some(7));
        assert_eq!(rank_in_name(Path::new("x/trace.json")), None);
    }

    #[test]
    fn a_leading_phase_is_read_only_when_it_comes_first() {
        assert!(Phase::leading(br#"{"ph": "f", "id": 1}"#) == Some(Phase::Ignored));
        assert!(Phase::leading(b"{\n    \"ph\" :\"X\", \"ts\": 1}") == Some(Phase::Complete));
        assert!(Phase::leading(br#"{"ts": 1, "ph": "f"}"#).is_none());
        assert!(Phase::leading(br#"{"ph": 1}"#).is_none());
        assert!(Phase::leading(br#"{"ph": "f"#).is_none());
    }

    #[test]
    fn names_are_borrowed_unless_escaped() {
        let name = |event: &'static [u8]| match parse_event(event) {
            Parsed::Usable(u) => u.name,
            _ => panic!("not usable"),
        };
        let plain = name(br#"{"ph": "X", "cat": "kernel", "name": "k<1>", "ts": 1, "dur": 2}"#);
        assert!(matches!(plain, Cow::Borrowed("k<1>")));
        let escaped =
            name(br#"{"ph": "X", "cat": "cpu_op", "name": "a\"b\u00e9", "ts": 1, "dur": 2}"#);
        assert_eq!(escaped, "a\"b\u{e9}");
    }

    #[test]
    fn shapes_lose_whitespace_outside_strings_only() {
        let mut out = String::new();
        compact_json("[[4096, 100],\n [], [\"a b\\\" c\"]]", &mut out);
        assert_eq!(out, r#"[[4096,100],[],["a b\" c"]]"#);
    }

    #[test]
    fn times_are_read_to_the_nanosecond_from_their_text() {
        let read = |text: &str| serde_json::from_str::<Micros>(text).unwrap();
        let ns = |text: &str| match read(text) {
            Micros::Ns(ns) => ns,
            _ => panic!("{text}: not read as a time"),
        };
        // As an f64 this is 1712195495519689.0: the 47 ns are lost.
        assert_eq!(ns("1712195495519689.047"), 1_712_195_495_519_689_047);
        assert_eq!(ns("1712195495519689"), 1_712_195_495_519_689_000);
        assert_eq!(ns("2.5"), 2_500);
        assert_eq!(ns("0.0004"), 0);
        assert_eq!(ns("0.0005"), 1);
        assert_eq!(ns("-1.0005"), -1_001);
        assert_eq!(ns("1.5e3"), 1_500_000);
        assert_eq!(ns(r#""stream 7""#), 7_000);
        assert!(matches!(read("4600000000000001"), Micros::OutOfRange));
        assert!(matches!(read("-5e15"), Micros::OutOfRange));
        assert!(matches!(
            read("99999999999999999999999"),
            Micros::OutOfRange
        ));
        assert!(matches!(read("null"), Micros::Invalid));
        assert!(matches!(read("[1]"), Micros::Invalid));
    }
}
