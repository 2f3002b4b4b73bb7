//! Each stream's queue length and each kind of copy's bandwidth as counter tracks, for
//! a copy of the trace that draws them (Holistic Trace Analysis'
//! `generate_trace_with_counters`): Perfetto and chrome://tracing show them under the
//! GPU's rows. `formats::trace::overlay` writes them.

use super::launches::Launch;
use super::queue::changes;
use super::rows::bandwidth_changes;
use super::scope::Scope;
use crate::model::trace::{CounterSample, Trace, NONE};

/// The counters to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracks {
    /// Each stream's launched work not started yet (`Queue Length`, `id` the stream).
    pub queue_length: bool,
    /// Each kind of copy's bandwidth, GB/s (`Memcpy BW`, named by the kind).
    pub copy_bandwidth: bool,
}

/// The samples of `tracks`, in time order per track, on `scope`'s clock (whole µs on
/// HTA's). Work without a numeric process or stream has no track to go on and is left
/// out.
pub fn counter_samples(
    trace: &Trace,
    scope: &Scope,
    launches: &[Launch],
    tracks: Tracks,
) -> Vec<CounterSample> {
    let e = &trace.events;
    let mut out = Vec::new();
    if tracks.queue_length {
        for (stream, list) in changes(trace, scope, launches) {
            for c in list {
                if stream == NONE || e.pid[c.work] == NONE {
                    continue;
                }
                out.push(CounterSample {
                    track: "Queue Length".to_owned(),
                    pid: e.pid[c.work],
                    id: Some(stream),
                    at: c.at,
                    counter: "Queue Length",
                    value: c.length as f64,
                });
            }
        }
    }
    if tracks.copy_bandwidth {
        for c in bandwidth_changes(trace, scope) {
            if e.pid[c.event] == NONE {
                continue;
            }
            out.push(CounterSample {
                track: c.kind,
                pid: e.pid[c.event],
                id: None,
                at: c.at,
                counter: "Memcpy BW",
                // A level that sums to a hair off zero is none.
                value: if c.gbps.abs() < 1e-9 { 0.0 } else { c.gbps },
            });
        }
    }
    out
}
