//! Reads a Kineto Chrome trace (`.json` or `.json.gz`) as a stream into the compact
//! [`Trace`] model: serde visits the `traceEvents` array one event at a time, so memory
//! holds the columns, never the document. Events that cannot be used (no timestamp, a
//! negative duration, an unknown phase) are counted, not fatal.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::model::trace::{Event, Kind, Trace, NONE, NO_SHAPES};
use crate::progress::Progress;
use crate::{Error, Result};

/// Reads the trace at `path`; `progress` is told the (compressed) bytes read so far.
pub fn read_trace(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<Trace> {
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    let total = file.metadata().map_or(0, |m| m.len());
    let mut magic = [0u8; 2];
    let gzip = file.read(&mut magic).map_err(|e| Error::io(path, e))? == 2 && magic == [0x1f, 0x8b];
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut bytes = Progress::new(total, progress);
    let counted = bytes.reader(file);
    let input: Box<dyn Read + '_> = if gzip {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(counted)))
    } else {
        Box::new(counted)
    };
    let mut trace = Trace::default();
    let mut seen = Seen::default();
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 18, input));
    let found = Document {
        trace: &mut trace,
        seen: &mut seen,
    }
    .deserialize(&mut de)
    .and_then(|found| de.end().map(|()| found))
    .map_err(|e| Error::bad_input(path, describe(&e)))?;
    if !found.events {
        return Err(Error::bad_input(
            path,
            "no traceEvents (not a PyTorch profiler trace)",
        ));
    }
    trace.rank = found
        .rank
        .or_else(|| rank_in_name(path))
        .unwrap_or_default();
    trace.dropped = seen.dropped.into_iter().collect();
    Ok(trace)
}

fn describe(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Io => format!("cannot be read to the end ({e}; a truncated .gz?)"),
        Category::Eof => format!("ends in the middle of the JSON (truncated?): {e}"),
        Category::Syntax | Category::Data => format!("not a valid trace: {e}"),
    }
}

/// `rank3`, `rank-3`, `rank_3` in the file name → 3.
fn rank_in_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_string_lossy().to_lowercase();
    let at = name.find("rank")? + 4;
    let rest = name[at..].trim_start_matches(['-', '_']);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// What the top level said.
struct Found {
    events: bool,
    rank: Option<u32>,
}

#[derive(Default)]
struct Seen {
    dropped: BTreeMap<String, u64>,
}

impl Seen {
    fn drop(&mut self, why: &str) {
        *self.dropped.entry(why.to_owned()).or_default() += 1;
    }
}

struct Document<'a> {
    trace: &'a mut Trace,
    seen: &'a mut Seen,
}

impl<'de> DeserializeSeed<'de> for Document<'_> {
    type Value = Found;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Found, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Document<'_> {
    type Value = Found;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object with traceEvents")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Found, A::Error> {
        let mut found = Found {
            events: false,
            rank: None,
        };
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => {
                    map.next_value_seed(EventList {
                        trace: &mut *self.trace,
                        seen: &mut *self.seen,
                    })?;
                    found.events = true;
                }
                "distributedInfo" => {
                    found.rank = map.next_value::<DistributedInfo>()?.rank;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

#[derive(Deserialize)]
struct DistributedInfo {
    #[serde(default)]
    rank: Option<u32>,
}

struct EventList<'a> {
    trace: &'a mut Trace,
    seen: &'a mut Seen,
}

impl<'de> DeserializeSeed<'de> for EventList<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventList<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of trace events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        while let Some(raw) = seq.next_element::<RawEvent>()? {
            add(self.trace, self.seen, raw);
        }
        Ok(())
    }
}

/// The fields of an event that the analyses use; the rest is skipped unparsed.
#[derive(Deserialize)]
struct RawEvent {
    #[serde(default)]
    ph: Phase,
    #[serde(default)]
    cat: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    ts: Option<Number>,
    #[serde(default)]
    dur: Option<Number>,
    #[serde(default)]
    pid: Option<Number>,
    #[serde(default)]
    tid: Option<Number>,
    #[serde(default)]
    args: Option<RawArgs>,
}

#[derive(Deserialize, Default)]
struct RawArgs {
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
    #[serde(default, rename = "Input Dims")]
    input_dims: Option<serde_json::Value>,
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

impl<'de> Deserialize<'de> for Phase {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Phase, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Phase;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a phase letter")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Phase, E> {
                Ok(match v {
                    "X" => Phase::Complete,
                    "i" | "I" => Phase::Instant,
                    "B" | "E" | "M" | "s" | "t" | "f" | "b" | "n" | "e" | "C" | "P" | "O" | "N"
                    | "D" | "R" | "c" | "(" | ")" => Phase::Ignored,
                    _ => Phase::Unknown,
                })
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

/// Microseconds (Kineto's unit, fractional on newer versions) to nanoseconds. The whole
/// microseconds are scaled as an integer: `us * 1000.0` in floating point would blur a
/// timestamp of 1.7e15 µs by hundreds of ns.
fn ns(us: f64) -> i64 {
    let whole = us.trunc();
    whole as i64 * 1000 + ((us - whole) * 1000.0).round() as i64
}

fn add(trace: &mut Trace, seen: &mut Seen, raw: RawEvent) {
    let kind = match raw.ph {
        Phase::Complete => {
            let category = raw.cat.as_deref().unwrap_or("");
            if category == "cuda_profiler_range" {
                trace.counter_ranges += 1;
            }
            Kind::of_category(category)
        }
        Phase::Instant if raw.name.as_deref() == Some("[memory]") => Kind::Memory,
        Phase::Instant | Phase::Ignored => return,
        Phase::Missing => return seen.drop("no phase (ph)"),
        Phase::Unknown => return seen.drop("unknown phase"),
    };
    let Some(ts) = raw.ts.and_then(|t| t.0) else {
        return seen.drop("no timestamp (ts)");
    };
    let dur = match (kind, raw.dur.and_then(|d| d.0)) {
        (Kind::Memory, _) => 0.0,
        (_, Some(d)) if d < 0.0 => return seen.drop("negative duration"),
        (_, Some(d)) => d,
        (_, None) => return seen.drop("no duration (dur)"),
    };
    let args = raw.args.unwrap_or_default();
    let name = trace.names.intern(raw.name.as_deref().unwrap_or(""));
    let shapes = match &args.input_dims {
        Some(dims @ serde_json::Value::Array(_)) => trace.names.intern(&dims.to_string()),
        _ => NO_SHAPES,
    };
    trace.events.push(Event {
        kind,
        name,
        ts: ns(ts),
        dur: ns(dur),
        pid: Number::int(raw.pid),
        tid: Number::int(raw.tid),
        stream: Number::int(args.stream),
        correlation: Number::int(args.correlation),
        external_id: Number::int(args.external_id),
        bytes: Number::int(args.bytes),
        device: Number::int(args.device),
        shapes,
    });
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
}
