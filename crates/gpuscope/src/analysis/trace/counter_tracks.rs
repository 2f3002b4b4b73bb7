//! Each stream's queue length and each kind of copy's bandwidth as Chrome-trace counter
//! events (`"ph": "C"`), to add to a copy of the trace (Holistic Trace Analysis'
//! `generate_trace_with_counters`): Perfetto and chrome://tracing draw them as tracks
//! under the GPU's rows.

use std::fmt::Write as _;

use super::launches::Launch;
use super::queue::changes;
use super::rows::bandwidth_changes;
use super::scope::Scope;
use crate::model::trace::{Trace, NONE};

/// The counters to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracks {
    /// Each stream's launched work not started yet (`Queue Length`, `id` the stream).
    pub queue_length: bool,
    /// Each kind of copy's bandwidth, GB/s (`Memcpy BW`, named by the kind).
    pub copy_bandwidth: bool,
}

/// The counter events of `tracks`, each as the JSON text of one event, in time order
/// per track. Times are on `scope`'s clock (whole µs on HTA's), written in µs to the
/// nanosecond as the trace's events are (never through a float, which holds a 16-digit
/// microsecond time to a quarter of a microsecond). Work without a numeric process or
/// stream has no track to go on and is left out.
pub fn counter_events(
    trace: &Trace,
    scope: &Scope,
    launches: &[Launch],
    tracks: Tracks,
) -> Vec<String> {
    let e = &trace.events;
    let mut out = Vec::new();
    if tracks.queue_length {
        for (stream, list) in changes(trace, scope, launches) {
            let mut length = 0i64;
            for c in list {
                length += c.delta;
                if stream == NONE || e.pid[c.work] == NONE {
                    continue;
                }
                let head = head("Queue Length", e.pid[c.work], c.at);
                out.push(format!(
                    r#"{head},"id":{stream},"args":{{"Queue Length":{length}}}}}"#
                ));
            }
        }
    }
    if tracks.copy_bandwidth {
        for c in bandwidth_changes(trace, scope) {
            if e.pid[c.event] == NONE {
                continue;
            }
            let head = head(&c.kind, e.pid[c.event], c.at);
            // A level that sums to a hair off zero is none; JSON has no infinity.
            let gbps = if c.gbps.abs() < 1e-9 { 0.0 } else { c.gbps };
            let gbps = serde_json::to_string(&gbps).expect("a float is JSON or null");
            out.push(format!(r#"{head},"args":{{"Memcpy BW":{gbps}}}}}"#));
        }
    }
    out
}

/// `{"ph":"C","name":…,"pid":…,"ts":…` of a counter event at `ns`.
fn head(name: &str, pid: i64, ns: i64) -> String {
    let mut text = String::from(r#"{"ph":"C","name":"#);
    text.push_str(&serde_json::to_string(name).expect("a string is JSON"));
    let sign = if ns < 0 { "-" } else { "" };
    let (us, frac) = (ns.unsigned_abs() / 1000, ns.unsigned_abs() % 1000);
    let _ = write!(text, r#","pid":{pid},"ts":{sign}{us}.{frac:03}"#);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_to_the_nanosecond_without_a_float() {
        let at = |ns| head("Memcpy HtoD", 0, ns);
        assert_eq!(
            at(1_712_195_495_519_689_047),
            r#"{"ph":"C","name":"Memcpy HtoD","pid":0,"ts":1712195495519689.047"#
        );
        assert!(at(-1_500).ends_with(r#""ts":-1.500"#));
        assert!(at(7).ends_with(r#""ts":0.007"#));
    }
}
