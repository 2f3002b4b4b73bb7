//! The critical path of a window of one rank's trace (Holistic Trace Analysis'
//! `critical_path_analysis`): the chain of CPU calls, kernel launches, GPU work and
//! synchronisations that set how long the window took, each link with what held it
//! up — the CPU, the GPU's work, the gaps between kernels or the launches.
//!
//! The trace becomes a graph of moments: the start and the end of each CPU call
//! (operators, runtime and driver calls) that starts in the window and of each piece of
//! GPU work those calls launched. Its edges:
//! - on each CPU thread, from each moment to the next, through nested calls, weighted by
//!   the time between them; between top-level calls an edge of no weight (the thread's
//!   idle time is no one's work);
//! - each piece of GPU work's span, weighted by its duration;
//! - into the start of each piece of work, what held it up. Work that started after its
//!   launch call had returned and its stream's previous work was done waited for other
//!   work: what a `cudaStreamWaitEvent` made it wait for (the trace's `Stream Wait
//!   Event`), else the work on another stream of its GPU that ended last before it
//!   started (a stream dependency the trace does not record, or a GPU busy elsewhere);
//!   an edge from that work's end, weighted by the gap (a gap between kernels). Else,
//!   when its stream had nothing left to run at the launch call started, a launch edge
//!   from the call's start, weighted by the time between; else the gap after its
//!   stream's previous work. Where a wait held it up, the launch edge or the edge from
//!   the previous work is kept without weight. Work the window did not launch that an
//!   edge comes from (launched before it) joins the graph with its span from the
//!   window's start on;
//! - into the end of a blocking call (a device or stream synchronisation, a synchronous
//!   copy, a copy to or from pageable memory), from the end of the GPU work it waited
//!   for, weighted by the time the call took to return after that (CPU time); the
//!   call's own edge then weighs nothing, so the wait is the GPU's time. A copy waited
//!   for its copy; a `cudaEventSynchronize` for what its `Event Sync` names, if that
//!   was not done before the call; another call for the work launched before it that
//!   ended last while it ran (on its stream, when a `Stream Sync` event names one). A
//!   blocking call during which no such work ended keeps its own time.
//!
//! The critical path is the longest path through that graph. The README's "The
//! critical path of a step" lists where this departs from HTA 0.5: HTA finds waits only
//! through the trace's `cuda_sync` events, which most traces lack, and weighs none (the
//! gap before work that waited for another stream is lost), infers no stream
//! dependency, counts `cudaEventQuery` (which returns at once) as blocking, weighs a
//! blocking call's return as nothing, tells launch delays from gaps by queue lengths
//! (here: whether the stream's previous work, in the whole trace, was done when the
//! call started), attributes launch edges to nothing, and rounds nanosecond times to
//! microseconds.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use super::classify::{copy_launch_returns_at_once, Call, KernelType};
use super::launches::launches;
use super::rows::micros;
use super::scope::{on_gpu, scope_with, Clock};
use crate::model::trace::{Events, FlowArrow, FlowEnd, Kind, SyncKind, Trace, NONE};
use crate::model::words::words;

words! {
    /// What an edge of the graph stands for, named as HTA names it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum EdgeKind {
        /// Time inside a CPU call or a piece of GPU work.
        Operator = "critical_path_operator",
        /// One top-level call after another on a CPU thread (no weight).
        Dependency = "critical_path_dependency",
        /// From a launch call's start to its work's start, on an idle stream.
        KernelLaunchDelay = "critical_path_kernel_launch_delay",
        /// From the end of the work a piece of work waited for (its stream's previous
        /// work, or work on another stream) to its start.
        KernelKernelDelay = "critical_path_kernel_kernel_delay",
        /// From GPU work to the end of the blocking call that waited for it, weighted by
        /// the call's return after it.
        SyncDependency = "critical_path_sync_dependency",
    }
}

words! {
    /// What an edge of the critical path was bound by, named as HTA names it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Bound {
        /// Time in a CPU call.
        Cpu = "cpu_bound",
        /// Time in GPU work other than communication.
        GpuCompute = "gpu_compute_bound",
        /// Time in a communication kernel.
        GpuCommunication = "gpu_communication_bound",
        /// A gap between kernels on a busy stream.
        KernelKernelOverhead = "gpu_kernel_kernel_overhead",
        /// Waiting for a launch to reach an idle stream.
        KernelLaunchOverhead = "gpu_kernel_launch_overhead",
        /// An edge of no weight: an order, not time.
        Nothing = "",
    }
}

/// A moment of the graph: the start or the end of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    /// The event.
    pub event: usize,
    /// Its start (else its end).
    pub start: bool,
    /// When, ns: for work launched before the window, which ends in it, its start is
    /// taken as the window's.
    pub at: i64,
}

/// An edge of the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// From this node.
    pub from: u32,
    /// To this node.
    pub to: u32,
    /// What it stands for.
    pub kind: EdgeKind,
    /// Its time, ns.
    pub weight: i64,
    /// The event whose time it is, for time in a call or work, a gap between kernels
    /// (the earlier work's), a launch (the work launched) and a blocking call's return
    /// (the call).
    pub event: Option<usize>,
}

/// The graph of a window and its critical path.
#[derive(Debug, Clone, Default)]
pub struct CriticalPath {
    /// The window, ns: from the first instance's start to the last one's end.
    pub window: (i64, i64),
    /// The moments.
    pub nodes: Vec<Node>,
    /// The edges.
    pub edges: Vec<Edge>,
    /// The critical path: indices into `edges`, in order.
    pub path: Vec<u32>,
    /// Edges that ran backwards in time (a nested call ending after its parent, clocks
    /// that disagree), taken as of no weight.
    pub backwards: usize,
}

/// The window of the `first` to `last` (counted from 0, inclusive) events on CPU threads
/// whose name contains `annotation` (`record_function` ranges such as `ProfilerStep#N`;
/// older traces record those as operators), in order of start; the whole trace for an
/// empty `annotation`. An error says what is missing.
pub fn window(
    trace: &Trace,
    annotation: &str,
    first: usize,
    last: usize,
) -> Result<(i64, i64), String> {
    let e = &trace.events;
    if annotation.is_empty() {
        let start = e.ts.iter().copied().min();
        let end = (0..e.len()).map(|i| e.end(i)).max();
        return start
            .zip(end)
            .ok_or_else(|| "the trace has no events".to_owned());
    }
    let matches = trace.names.containing(annotation);
    let mut instances: Vec<(i64, i64)> = (0..e.len())
        .filter(|&i| e.kind[i].is_cpu() && matches[e.name[i] as usize])
        .map(|i| (e.ts[i], e.end(i)))
        .collect();
    instances.sort_unstable();
    if instances.is_empty() {
        return Err(format!(
            "no event on a CPU thread has {annotation:?} in its name"
        ));
    }
    if first > last || last >= instances.len() {
        return Err(format!(
            "instances {first} to {last} asked for, but {annotation:?} has {} (counted from 0)",
            instances.len()
        ));
    }
    let chosen = &instances[first..=last];
    let end = chosen.iter().map(|w| w.1).fold(chosen[0].1, i64::max);
    Ok((chosen[0].0, end))
}

/// Builds the graph of `window` in `trace` and finds its critical path. The window holds
/// the CPU calls that start in it (with a duration) and the GPU work their launch calls
/// launched. An error says why there is no path.
pub fn critical_path(trace: &Trace, window: (i64, i64)) -> Result<CriticalPath, String> {
    let mut g = Graph::new(trace, window);
    if g.nodes.is_empty() {
        return Err("no CPU call with a duration starts in the window".to_owned());
    }
    let syncs = g.event_syncs();
    let waited = g.waits_of_blocking_calls(&syncs.calls);
    g.cpu_edges(&waited);
    g.gpu_edges(&waited, &syncs.streams);
    let path = longest_path(&g.nodes, &g.edges)?;
    Ok(CriticalPath {
        window,
        nodes: g.nodes,
        edges: g.edges,
        path,
        backwards: g.backwards,
    })
}

/// What edge `edge` of a critical path was bound by.
pub fn bound(trace: &Trace, edge: &Edge) -> Bound {
    match (edge.kind, edge.event) {
        (EdgeKind::KernelKernelDelay, _) => Bound::KernelKernelOverhead,
        (EdgeKind::KernelLaunchDelay, _) => Bound::KernelLaunchOverhead,
        (EdgeKind::Operator, Some(i)) if on_gpu(trace, i) => {
            match KernelType::of(trace.names.get(trace.events.name[i])) {
                KernelType::Communication => Bound::GpuCommunication,
                _ => Bound::GpuCompute,
            }
        }
        (EdgeKind::Operator, Some(_)) => Bound::Cpu,
        // A blocking call's return after the work it waited for.
        (EdgeKind::SyncDependency, Some(_)) if edge.weight > 0 => Bound::Cpu,
        _ => Bound::Nothing,
    }
}

/// The critical path as a table, a row per edge in order (HTA's
/// `get_critical_path_breakdown`), with what the overlay needs.
#[derive(Debug, Default, Serialize)]
pub struct PathTable {
    /// The event each edge's time is attributed to, by its position in the file's
    /// `traceEvents` (its index among the events read, for a trace built in memory), or
    /// -1.
    pub event_idx: Vec<i64>,
    /// The edge's time, µs.
    pub duration: Vec<f64>,
    /// What the edge stands for.
    #[serde(rename = "type")]
    pub kind: Vec<EdgeKind>,
    /// The attributed event's name, or `None`.
    pub s_name: Vec<Option<String>>,
    /// Its category, as gpuscope names kinds of events, or `None`.
    pub cat: Vec<Option<Kind>>,
    /// Its process, or `None`.
    pub pid: Vec<Option<i64>>,
    /// Its thread (for GPU work, what the trace gives as `tid`), or `None`.
    pub tid: Vec<Option<i64>>,
    /// Its stream (-1 for a CPU call), or `None`.
    pub stream: Vec<Option<i64>>,
    /// What held the path up.
    pub bound_by: Vec<Bound>,
    /// The window, µs on the trace's clock.
    pub window: (f64, f64),
    /// Graph size: moments, edges.
    pub graph: (usize, usize),
    /// Edges taken as of no weight because they ran backwards in time.
    pub backwards: usize,
    /// The events the path runs through (those of its moments), by position as
    /// `event_idx`, ascending.
    pub critical_events: Vec<i64>,
}

/// `cp` as a [`PathTable`].
pub fn path_table(trace: &Trace, cp: &CriticalPath) -> PathTable {
    let e = &trace.events;
    let position = |i: usize| trace.position(i).map_or(i as i64, i64::from);
    let on_path = on_path(e.len(), cp);
    let mut critical_events: Vec<i64> =
        (0..e.len()).filter(|&i| on_path[i]).map(position).collect();
    critical_events.sort_unstable();
    let mut t = PathTable {
        window: (micros(cp.window.0), micros(cp.window.1)),
        graph: (cp.nodes.len(), cp.edges.len()),
        backwards: cp.backwards,
        critical_events,
        ..PathTable::default()
    };
    for &k in &cp.path {
        let edge = &cp.edges[k as usize];
        let i = edge.event;
        t.event_idx.push(i.map_or(-1, position));
        t.duration.push(micros(edge.weight));
        t.kind.push(edge.kind);
        t.s_name
            .push(i.map(|i| trace.names.get(e.name[i]).to_owned()));
        t.cat.push(i.map(|i| e.kind[i]));
        t.pid.push(i.map(|i| e.pid[i]));
        t.tid.push(i.map(|i| e.tid[i]));
        t.stream
            .push(i.map(|i| if on_gpu(trace, i) { e.stream[i] } else { -1 }));
        t.bound_by.push(bound(trace, edge));
    }
    t
}

/// What a copy of the trace shows of a critical path (HTA's
/// `overlay_critical_path_analysis`), by position in the file's `traceEvents`.
#[derive(Debug, Default)]
pub struct PathOverlay {
    /// The events the path passes through, to mark `args.critical`.
    pub critical: Vec<u32>,
    /// The complete events to leave out.
    pub drop: FxHashSet<u32>,
    /// Arrows for edges.
    pub flows: Vec<FlowArrow>,
}

/// The overlay of `cp`: its events marked; its edges that are not time in one event
/// (dependencies, launches, waits) as arrows, or with `all_edges` every edge of the
/// graph; with `only_critical`, the copy keeps of the complete events only those on the
/// path, the annotations and the Python functions (and then shows no other edges).
pub fn path_overlay(
    trace: &Trace,
    cp: &CriticalPath,
    only_critical: bool,
    all_edges: bool,
) -> PathOverlay {
    let e = &trace.events;
    let position = |i: usize| trace.position(i);
    let on_path = on_path(e.len(), cp);
    let critical = (0..e.len())
        .filter(|&i| on_path[i])
        .filter_map(position)
        .collect();
    let drop = if only_critical {
        let kept = |i: usize| {
            on_path[i]
                || matches!(
                    e.kind[i],
                    Kind::Memory | Kind::UserAnnotation | Kind::PythonFunction
                )
        };
        (0..e.len())
            .filter(|&i| !kept(i))
            .filter_map(position)
            .collect()
    } else {
        FxHashSet::default()
    };
    let mut chosen: Vec<(u32, bool)> = if all_edges && !only_critical {
        let mut critical = vec![false; cp.edges.len()];
        for &k in &cp.path {
            critical[k as usize] = true;
        }
        (0..cp.edges.len() as u32)
            .map(|k| (k, critical[k as usize]))
            .collect()
    } else {
        // Not the time in one event or the gap after the previous on its stream; waits
        // on another stream are drawn.
        let drawn = |edge: &Edge| match edge.kind {
            EdgeKind::Operator => false,
            EdgeKind::KernelKernelDelay => {
                let (a, b) = (
                    cp.nodes[edge.from as usize].event,
                    cp.nodes[edge.to as usize].event,
                );
                (e.pid[a], e.stream[a]) != (e.pid[b], e.stream[b])
            }
            _ => true,
        };
        cp.path
            .iter()
            .filter(|&&k| drawn(&cp.edges[k as usize]))
            .map(|&k| (k, true))
            .collect()
    };
    chosen.sort_unstable();
    let end_of = |node: u32| {
        let n = cp.nodes[node as usize];
        let i = n.event;
        // An arrow ending at the end of GPU work points just inside it.
        let back = if !n.start && on_gpu(trace, i) {
            e.dur[i].min(1000)
        } else {
            0
        };
        Some(FlowEnd {
            event: position(i)?,
            at: n.at - back,
        })
    };
    let flows = chosen
        .into_iter()
        .filter_map(|(k, critical)| {
            let edge = &cp.edges[k as usize];
            Some(FlowArrow {
                name: "critical_path",
                cat: edge.kind.as_str(),
                from: end_of(edge.from)?,
                to: end_of(edge.to)?,
                weight: edge.weight,
                critical,
            })
        })
        .collect();
    PathOverlay {
        critical,
        drop,
        flows,
    }
}

/// Which events the path runs through (the events of its moments), by index.
fn on_path(events: usize, cp: &CriticalPath) -> Vec<bool> {
    let mut on_path = vec![false; events];
    for &k in &cp.path {
        let edge = &cp.edges[k as usize];
        for node in [edge.from, edge.to] {
            on_path[cp.nodes[node as usize].event] = true;
        }
    }
    on_path
}

/// The graph being built.
struct Graph<'t> {
    trace: &'t Trace,
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    /// Each event's start node (its end node is the next one).
    start_of: FxHashMap<usize, u32>,
    /// The CPU calls, by thread, in order of start (the longer first).
    threads: FxHashMap<(i64, i64), Vec<usize>>,
    /// The runtime and driver calls of the whole trace, by correlation.
    call_by_correlation: FxHashMap<i64, usize>,
    /// The GPU work, in order of start.
    work: Vec<usize>,
    /// The GPU work, in order of end.
    by_end: Vec<usize>,
    /// All GPU work of the trace, in order of start.
    all_by_start: Vec<usize>,
    /// All GPU work of the trace, in order of end.
    all_by_end: Vec<usize>,
    /// The call that launched each piece of work.
    call_of: FxHashMap<usize, usize>,
    /// The window's start: work the window did not launch counts from there.
    from: i64,
    backwards: usize,
}

impl<'t> Graph<'t> {
    fn new(trace: &'t Trace, (from, to): (i64, i64)) -> Graph<'t> {
        let e = &trace.events;
        let in_window = |i: usize| e.ts[i] >= from && e.ts[i] <= to && e.dur[i] > 0;
        let calls: Vec<usize> = (0..e.len())
            .filter(|&i| matches!(e.kind[i], Kind::CpuOp | Kind::Runtime | Kind::Driver))
            .filter(|&i| in_window(i))
            .collect();
        let call_by_correlation: FxHashMap<i64, usize> = (0..e.len())
            .filter(|&i| matches!(e.kind[i], Kind::Runtime | Kind::Driver))
            .filter(|&i| e.correlation[i] != NONE)
            .map(|i| (e.correlation[i], i))
            .collect();
        let mut all_by_start: Vec<usize> = (0..e.len())
            .filter(|&i| e.kind[i].is_gpu() && on_gpu(trace, i))
            .collect();
        all_by_start.sort_unstable_by_key(|&i| (e.ts[i], i));
        let mut all_by_end = all_by_start.clone();
        all_by_end.sort_unstable_by_key(|&w| (e.end(w), w));
        let call_of: FxHashMap<usize, usize> = all_by_start
            .iter()
            .filter_map(|&i| {
                let call = *call_by_correlation.get(&e.correlation[i])?;
                in_window(call).then_some((i, call))
            })
            .collect();
        let launched = |i: &usize| call_of.contains_key(i);
        let work: Vec<usize> = all_by_start.iter().copied().filter(launched).collect();
        let by_end: Vec<usize> = all_by_end.iter().copied().filter(launched).collect();
        let mut threads: FxHashMap<(i64, i64), Vec<usize>> = FxHashMap::default();
        for &i in &calls {
            threads.entry((e.pid[i], e.tid[i])).or_default().push(i);
        }
        for list in threads.values_mut() {
            list.sort_unstable_by_key(|&i| (e.ts[i], std::cmp::Reverse(e.end(i)), i));
        }
        let mut g = Graph {
            trace,
            nodes: Vec::with_capacity(2 * (calls.len() + work.len())),
            edges: Vec::new(),
            start_of: FxHashMap::default(),
            threads,
            call_by_correlation,
            work,
            by_end,
            all_by_start,
            all_by_end,
            call_of,
            from,
            backwards: 0,
        };
        let work = std::mem::take(&mut g.work);
        for &i in calls.iter().chain(&work) {
            g.add_nodes(i);
        }
        g.work = work;
        g
    }

    /// The start and end moments of event `i`.
    fn add_nodes(&mut self, i: usize) {
        let e = &self.trace.events;
        self.start_of.insert(i, self.nodes.len() as u32);
        for (start, at) in [(true, e.ts[i]), (false, e.end(i))] {
            self.nodes.push(Node {
                event: i,
                start,
                at,
            });
        }
    }

    fn start(&self, i: usize) -> u32 {
        self.start_of[&i]
    }

    fn end(&self, i: usize) -> u32 {
        self.start_of[&i] + 1
    }

    /// Adds an edge; time edges weigh the time between their nodes (none if backwards).
    fn add(&mut self, from: u32, to: u32, kind: EdgeKind, event: Option<usize>) {
        let weight = match kind {
            EdgeKind::Dependency | EdgeKind::SyncDependency => 0,
            _ => self.nodes[to as usize].at - self.nodes[from as usize].at,
        };
        if weight < 0 {
            self.backwards += 1;
        }
        self.edges.push(Edge {
            from,
            to,
            kind,
            weight: weight.max(0),
            event,
        });
    }

    /// The GPU work each blocking call in the graph waited for: a copy's own copy; what
    /// an `Event Sync` says a `cudaEventSynchronize` waited for; else, of the work in the
    /// graph launched before the call that ended while it ran (on the stream of its
    /// `Stream Sync` event, if it has one), the one that ended last.
    fn waits_of_blocking_calls(
        &self,
        event_syncs: &FxHashMap<i64, usize>,
    ) -> FxHashMap<usize, usize> {
        let (trace, e) = (self.trace, &self.trace.events);
        let names = Call::names_in(trace, &[Call::DeviceSync, Call::StreamSync, Call::Copy]);
        let copy_launches = Call::names_in(trace, &[Call::CopyLaunch]);
        let work_of_call: FxHashMap<usize, usize> =
            self.call_of.iter().map(|(&w, &c)| (c, w)).collect();
        let blocking = |call: &usize| {
            let waits_for_copy =
                |w: &usize| !copy_launch_returns_at_once(trace.names.get(e.name[*w]));
            names.contains(&e.name[*call])
                || (copy_launches.contains(&e.name[*call])
                    && work_of_call.get(call).is_some_and(waits_for_copy))
        };
        // The stream each `Stream Sync` event says its call waited on, by correlation.
        let synced_stream: FxHashMap<i64, (i64, i64)> = (0..e.len())
            .filter(|&i| e.kind[i] == Kind::Sync && e.correlation[i] != NONE)
            .filter(|&i| SyncKind::of(trace.names.get(e.name[i])) == Some(SyncKind::StreamSync))
            .map(|i| (e.correlation[i], (e.pid[i], e.stream[i])))
            .collect();
        let mut waited = FxHashMap::default();
        for list in self.threads.values() {
            for &call in list.iter().filter(|c| blocking(c)) {
                // A copy waits for itself, even where the GPU's clock puts its end after
                // the call's.
                if let Some(&copy) = work_of_call.get(&call) {
                    waited.insert(call, copy);
                    continue;
                }
                // A `cudaEventSynchronize` waits for what was launched before the record.
                let recorded = event_syncs.get(&e.correlation[call]);
                // (It waited only if that work was not done before it started.)
                let pending = |w: &&usize| self.start_of.contains_key(w) && e.end(**w) > e.ts[call];
                if let Some(&w) = recorded.filter(pending) {
                    waited.insert(call, w);
                    continue;
                }
                let stream = synced_stream.get(&e.correlation[call]).copied();
                let last = ended_last(e, &self.by_end, (e.ts[call], e.end(call)), |w| {
                    e.ts[self.call_of[&w]] < e.ts[call]
                        && stream.is_none_or(|s| s == (e.pid[w], e.stream[w]))
                });
                if let Some(w) = last {
                    waited.insert(call, w);
                }
            }
        }
        waited
    }

    /// Each CPU thread's chain of moments through its nested calls.
    fn cpu_edges(&mut self, waited: &FxHashMap<usize, usize>) {
        let e = &self.trace.events;
        let mut threads: Vec<_> = std::mem::take(&mut self.threads).into_iter().collect();
        threads.sort_unstable_by_key(|t| t.0);
        for (_, calls) in &threads {
            let mut open: Vec<usize> = Vec::new();
            let mut last: Option<u32> = None;
            let mut last_top_end: Option<u32> = None;
            for &i in calls.iter().chain(std::iter::once(&usize::MAX)) {
                // Close the calls this one does not start inside (all, after the last).
                while let Some(&top) = open.last() {
                    if i != usize::MAX && e.ts[i] < e.end(top) {
                        break;
                    }
                    open.pop();
                    let end = self.end(top);
                    let from = last.expect("a call is open, so a moment came before");
                    // A blocking call that waited for GPU work ends when that work does.
                    if waited.contains_key(&top) {
                        self.add(from, end, EdgeKind::Dependency, None);
                    } else {
                        self.add(from, end, EdgeKind::Operator, Some(top));
                    }
                    last = Some(end);
                    if open.is_empty() {
                        last_top_end = Some(end);
                        last = None;
                    }
                }
                if i == usize::MAX {
                    break;
                }
                let start = self.start(i);
                match (open.last(), last, last_top_end) {
                    (Some(&parent), Some(from), _) => {
                        self.add(from, start, EdgeKind::Operator, Some(parent))
                    }
                    (None, _, Some(prev)) => self.add(prev, start, EdgeKind::Dependency, None),
                    _ => {}
                }
                open.push(i);
                last = Some(start);
            }
        }
    }

    /// The GPU work's spans, launches, gaps and waits.
    fn gpu_edges(&mut self, waited: &FxHashMap<usize, usize>, waits_for: &FxHashMap<usize, usize>) {
        let e = &self.trace.events;
        let previous = self.previous_on_stream();
        for k in 0..self.work.len() {
            let w = self.work[k];
            self.add(self.start(w), self.end(w), EdgeKind::Operator, Some(w));
            let call = self.call_of[&w];
            let prev = previous.get(&w).copied();
            // The moment its launch and its stream's order let it start.
            let ready = prev.map_or(e.end(call), |p| e.end(p).max(e.end(call)));
            // Work that started later waited for other work: what a `cudaStreamWaitEvent`
            // names, else what ended last on another stream before it started.
            let recorded = waits_for.get(&w).copied().filter(|&s| e.end(s) > ready);
            let waited_for = recorded.or_else(|| self.ended_last_elsewhere(w, ready));
            let idle_at_call = prev.is_none_or(|p| e.end(p) < e.ts[call]);
            // What held it up last carries the time; what came before it, an order only.
            let (launch, after_prev) = match waited_for {
                Some(other) => {
                    self.add_outside(other);
                    let (from, to) = (self.end(other), self.start(w));
                    self.add(from, to, EdgeKind::KernelKernelDelay, Some(other));
                    (EdgeKind::Dependency, EdgeKind::Dependency)
                }
                None => (EdgeKind::KernelLaunchDelay, EdgeKind::KernelKernelDelay),
            };
            if idle_at_call {
                let event = (launch == EdgeKind::KernelLaunchDelay).then_some(w);
                self.add(self.start(call), self.start(w), launch, event);
            } else if let Some(p) = prev {
                // Its stream's previous work, launched before the window if need be.
                self.add_outside(p);
                let event = (after_prev == EdgeKind::KernelKernelDelay).then_some(p);
                self.add(self.end(p), self.start(w), after_prev, event);
            }
        }
        let mut waits: Vec<(usize, usize)> = waited.iter().map(|(&c, &w)| (c, w)).collect();
        waits.sort_unstable();
        for (call, w) in waits {
            // What the call took to return once the work was done (or, for work done
            // before it, once it started) is the call's time.
            let (from, to) = (self.end(w), self.end(call));
            let weight = e.end(call) - e.end(w).max(e.ts[call]);
            self.backwards += usize::from(weight < 0);
            let weight = weight.max(0);
            self.edges.push(Edge {
                from,
                to,
                kind: EdgeKind::SyncDependency,
                weight,
                event: Some(call),
            });
        }
    }

    /// The work on another stream of `w`'s GPU that ended last after `ready` and before
    /// `w` started, if any: what `w`, which could start at `ready`, waited for. It may be
    /// work the window did not launch (launched before it, or before the trace began).
    fn ended_last_elsewhere(&self, w: usize, ready: i64) -> Option<usize> {
        let e = &self.trace.events;
        ended_last(e, &self.all_by_end, (ready + 1, e.ts[w]), |o| {
            e.pid[o] == e.pid[w] && e.stream[o] != e.stream[w]
        })
    }

    /// Adds work the window did not launch, if not there yet: its span from the window's
    /// start on (what ran before is another window's time), reached by no edge (what came
    /// before it is outside the window).
    fn add_outside(&mut self, w: usize) {
        if self.start_of.contains_key(&w) {
            return;
        }
        self.add_nodes(w);
        let (start, end) = (self.start(w), self.trace.events.end(w));
        let at = &mut self.nodes[start as usize].at;
        *at = (*at).max(self.from).min(end);
        self.add(start, self.end(w), EdgeKind::Operator, Some(w));
    }

    /// The work that ran before each piece of work of the graph on its stream, in the
    /// whole trace: work launched before the window can keep a stream busy into it.
    fn previous_on_stream(&self) -> FxHashMap<usize, usize> {
        let e = &self.trace.events;
        let mut last_on: FxHashMap<(i64, i64), usize> = FxHashMap::default();
        let mut previous = FxHashMap::default();
        for &w in &self.all_by_start {
            let prev = last_on.insert((e.pid[w], e.stream[w]), w);
            if let (Some(p), true) = (prev, self.start_of.contains_key(&w)) {
                previous.insert(w, p);
            }
        }
        previous
    }

    /// What the trace's synchronisations on CUDA events waited for: each is the work
    /// launched last on the recorded stream before the `cudaEventRecord` call (any
    /// thread). For a `Stream Wait Event`, by the work launched next on the waiting stream
    /// from the `cudaStreamWaitEvent` call's thread; for an `Event Sync`, by the
    /// correlation of its `cudaEventSynchronize` call.
    fn event_syncs(&self) -> EventSyncs {
        let (trace, e) = (self.trace, &self.trace.events);
        let mut out = EventSyncs::default();
        if trace.event_waits.is_empty() {
            return out;
        }
        let call_by_correlation = &self.call_by_correlation;
        let every = scope_with(trace, Clock::Exact, true);
        let mut launches = launches(trace, &every);
        launches.sort_unstable_by_key(|l| (e.ts[l.call], l.call));
        // Launches (call start, work) in order, onto each stream (GPU, stream), and from
        // each thread (process, thread) onto each stream.
        let mut to_stream: FxHashMap<Track, Launched> = FxHashMap::default();
        let mut from_thread: FxHashMap<(Track, Track), Launched> = FxHashMap::default();
        for l in &launches {
            let (c, w) = (l.call, l.work);
            let stream = (e.pid[w], e.stream[w]);
            to_stream.entry(stream).or_default().push((e.ts[c], w));
            let key = ((e.pid[c], e.tid[c]), stream);
            from_thread.entry(key).or_default().push((e.ts[c], w));
        }
        for &(i, wait) in &trace.event_waits {
            let Some(&record) = call_by_correlation.get(&wait.record_correlation) else {
                continue;
            };
            let Some(source) = to_stream.get(&(e.pid[i], wait.on_stream)).and_then(|list| {
                let k = list.partition_point(|&(at, _)| at <= e.ts[record]);
                k.checked_sub(1).map(|k| list[k].1)
            }) else {
                continue;
            };
            match SyncKind::of(trace.names.get(e.name[i])) {
                Some(SyncKind::StreamWaitEvent) => {
                    let Some(&wait_call) = call_by_correlation.get(&e.correlation[i]) else {
                        continue;
                    };
                    let key = (
                        (e.pid[wait_call], e.tid[wait_call]),
                        (e.pid[i], e.stream[i]),
                    );
                    let dest = from_thread.get(&key).and_then(|list| {
                        let k = list.partition_point(|&(at, _)| at < e.ts[wait_call]);
                        list.get(k).map(|l| l.1)
                    });
                    // Of several waits before one launch, the one that ended last holds it.
                    if let Some(dest) = dest {
                        let kept = out.streams.entry(dest).or_insert(source);
                        if e.end(source) > e.end(*kept) {
                            *kept = source;
                        }
                    }
                }
                Some(SyncKind::EventSync) => {
                    out.calls.insert(e.correlation[i], source);
                }
                _ => {}
            }
        }
        out
    }
}

/// Of `by_end` (events in order of end), the one that ended last within `(from, to)`
/// (ns, inclusive) for which `wanted` holds.
fn ended_last(
    e: &Events,
    by_end: &[usize],
    (from, to): (i64, i64),
    wanted: impl Fn(usize) -> bool,
) -> Option<usize> {
    let after = by_end.partition_point(|&o| e.end(o) < from);
    let until = by_end.partition_point(|&o| e.end(o) <= to);
    by_end[after..until.max(after)]
        .iter()
        .rev()
        .copied()
        .find(|&o| wanted(o))
}

/// Launches in order of their calls: (the call's start, the work launched).
type Launched = Vec<(i64, usize)>;

/// A thread (process, thread) or a stream (GPU, stream).
type Track = (i64, i64);

/// What the trace's synchronisations on CUDA events waited for.
#[derive(Default)]
struct EventSyncs {
    /// By work that waited (`cudaStreamWaitEvent`): the work it waited for.
    streams: FxHashMap<usize, usize>,
    /// By correlation of a `cudaEventSynchronize` call: the work it waited for.
    calls: FxHashMap<i64, usize>,
}

/// The longest path through the graph (edge indices, in order), or an error when it has
/// a cycle (clocks that disagree can make one).
fn longest_path(nodes: &[Node], edges: &[Edge]) -> Result<Vec<u32>, String> {
    let n = nodes.len();
    // Edges by source node, as offsets into one list.
    let mut first = vec![0u32; n + 1];
    for edge in edges {
        first[edge.from as usize + 1] += 1;
    }
    for k in 0..n {
        first[k + 1] += first[k];
    }
    let mut out = vec![0u32; edges.len()];
    let mut fill = first.clone();
    let mut incoming = vec![0u32; n];
    for (k, edge) in edges.iter().enumerate() {
        out[fill[edge.from as usize] as usize] = k as u32;
        fill[edge.from as usize] += 1;
        incoming[edge.to as usize] += 1;
    }
    let mut ready: Vec<u32> = (0..n as u32)
        .filter(|&v| incoming[v as usize] == 0)
        .collect();
    let mut length = vec![0i64; n];
    let mut via: Vec<Option<u32>> = vec![None; n];
    let mut done = 0;
    while let Some(v) = ready.pop() {
        done += 1;
        let v = v as usize;
        for &k in &out[first[v] as usize..first[v + 1] as usize] {
            let edge = &edges[k as usize];
            let to = edge.to as usize;
            if via[to].is_none() || length[v] + edge.weight > length[to] {
                length[to] = length[v] + edge.weight;
                via[to] = Some(k);
            }
            incoming[to] -= 1;
            if incoming[to] == 0 {
                ready.push(edge.to);
            }
        }
    }
    if done < n {
        return Err(format!(
            "the graph has a cycle through {} of its {n} moments: the trace's times disagree",
            n - done
        ));
    }
    let Some(mut v) = (0..n).max_by_key(|&v| (length[v], std::cmp::Reverse(v))) else {
        return Ok(Vec::new());
    };
    let mut path = Vec::new();
    while let Some(k) = via[v] {
        path.push(k);
        v = edges[k as usize].from as usize;
    }
    path.reverse();
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::trace::test_traces::trace;
    use Kind::{CpuOp, Kernel, Memcpy, Runtime, UserAnnotation};

    /// The path's time by bound, ns.
    fn by_bound(t: &Trace, cp: &CriticalPath) -> FxHashMap<Bound, i64> {
        let mut out = FxHashMap::default();
        for &k in &cp.path {
            let edge = &cp.edges[k as usize];
            *out.entry(bound(t, edge)).or_default() += edge.weight;
        }
        out
    }

    fn total(cp: &CriticalPath) -> i64 {
        cp.path.iter().map(|&k| cp.edges[k as usize].weight).sum()
    }

    fn whole(t: &Trace) -> CriticalPath {
        critical_path(t, window(t, "", 0, 0).unwrap()).unwrap()
    }

    #[test]
    fn a_thread_busier_than_its_gpu_is_cpu_bound() {
        let t = trace(&[
            (CpuOp, "aten::mm", 0, 100, 1, NONE),
            (Runtime, "cudaLaunchKernel", 10, 10, 1, 1),
            (Kernel, "gemm", 25, 5, 7, 1),
        ]);
        let cp = whole(&t);
        assert_eq!(total(&cp), 100);
        assert_eq!(by_bound(&t, &cp)[&Bound::Cpu], 100);
    }

    #[test]
    fn a_synchronised_queue_of_kernels_is_gpu_bound() {
        let t = trace(&[
            (Runtime, "cudaLaunchKernel", 0, 5, 1, 1),
            (Runtime, "cudaLaunchKernel", 6, 5, 1, 2),
            (Runtime, "cudaDeviceSynchronize", 12, 2003, 1, NONE),
            (Kernel, "gemm", 10, 1000, 7, 1),
            (Kernel, "gemm", 1010, 1000, 7, 2),
        ]);
        let cp = whole(&t);
        // Launch 10, two kernels back to back, then 5 for the sync to return.
        assert_eq!(total(&cp), 2015);
        let bounds = by_bound(&t, &cp);
        assert_eq!(bounds[&Bound::KernelLaunchOverhead], 10);
        assert_eq!(bounds[&Bound::GpuCompute], 2000);
        assert_eq!(bounds[&Bound::Cpu], 5);
        let last = &cp.edges[*cp.path.last().unwrap() as usize];
        assert_eq!((last.kind, last.event), (EdgeKind::SyncDependency, Some(2)));
    }

    #[test]
    fn work_that_starts_when_another_stream_s_ends_waited_for_it() {
        let mut t = trace(&[
            (Runtime, "cudaLaunchKernel", 0, 5, 1, 1),
            (Runtime, "cudaLaunchKernel", 6, 4, 1, 2),
            (Kernel, "producer", 10, 500, 7, 1),
            (Kernel, "consumer", 511, 100, 8, 2),
        ]);
        t.events.stream[3] = 8;
        let cp = whole(&t);
        assert_eq!(total(&cp), 611);
        let bounds = by_bound(&t, &cp);
        // Not a launch delay of 505: the consumer waited for the producer.
        assert_eq!(bounds[&Bound::KernelLaunchOverhead], 10);
        assert_eq!(bounds[&Bound::KernelKernelOverhead], 1);
        assert_eq!(bounds[&Bound::GpuCompute], 600);
    }

    #[test]
    fn a_recorded_stream_wait_names_what_the_work_waited_for() {
        // Stream 8's work waits (cudaStreamWaitEvent) for the event recorded after the
        // first kernel on stream 7; a later kernel on stream 7 ends just before it starts,
        // and would be taken for what it waited for without the record.
        let mut t = trace(&[
            (Runtime, "cudaLaunchKernel", 0, 2, 1, 1),
            (Runtime, "cudaEventRecord", 3, 1, 1, 5),
            (Runtime, "cudaLaunchKernel", 4, 2, 1, 3),
            (Runtime, "cudaStreamWaitEvent", 7, 1, 1, 6),
            (Runtime, "cudaLaunchKernel", 9, 2, 1, 2),
            (Kernel, "producer", 10, 500, 7, 1),
            (Kernel, "bystander", 510, 80, 7, 3),
            (Kernel, "consumer", 600, 100, 8, 2),
            (Kind::Sync, "Stream Wait Event", 8, 1, 8, 6),
        ]);
        t.events.stream[7] = 8;
        t.events.stream[8] = 8;
        t.event_waits.push((
            8,
            crate::model::trace::EventWait {
                on_stream: 7,
                record_correlation: 5,
            },
        ));
        let cp = whole(&t);
        let table = path_table(&t, &cp);
        let gap = table
            .kind
            .iter()
            .position(|&k| k == EdgeKind::KernelKernelDelay);
        let gap = gap.expect("a gap on the path");
        // From the producer's end (510) to the consumer's start (600).
        assert_eq!((table.event_idx[gap], table.duration[gap]), (5, 0.09));
        assert_eq!(total(&cp), 700);
    }

    #[test]
    fn a_stream_busy_since_before_the_window_is_not_idle_at_a_launch() {
        let t = trace(&[
            (Runtime, "cudaLaunchKernel", 0, 5, 1, 1),
            (UserAnnotation, "ProfilerStep#2", 100, 900, 1, NONE),
            (Runtime, "cudaLaunchKernel", 110, 5, 1, 2),
            (Kernel, "long", 10, 800, 7, 1),
            (Kernel, "next", 810, 10, 7, 2),
        ]);
        let cp = critical_path(&t, window(&t, "ProfilerStep", 0, 0).unwrap()).unwrap();
        // "next" waited for "long", launched before the window, whose span in the window
        // counts: the path is the window's 720 from its start to the end of "next".
        assert_eq!(total(&cp), 720);
        let bounds = by_bound(&t, &cp);
        assert_eq!(bounds[&Bound::GpuCompute], 720);
        assert!(!bounds.contains_key(&Bound::KernelLaunchOverhead));
    }

    #[test]
    fn a_sync_on_work_queued_before_the_window_is_gpu_time() {
        let t = trace(&[
            (Runtime, "cudaLaunchKernel", 0, 5, 1, 1),
            (UserAnnotation, "ProfilerStep#2", 100, 2000, 1, NONE),
            (CpuOp, "aten::mm", 100, 1000, 1, NONE),
            (Runtime, "cudaLaunchKernel", 1100, 5, 1, 2),
            (Runtime, "cudaStreamSynchronize", 1105, 995, 1, NONE),
            (Kernel, "queued", 10, 1890, 7, 1),
            (Kernel, "last", 1900, 90, 7, 2),
        ]);
        let cp = critical_path(&t, window(&t, "ProfilerStep", 0, 0).unwrap()).unwrap();
        // The thread was busy for the whole window of 2000: the path is no shorter and,
        // as the kernel queued before counts from the window's start, no longer; the
        // sync's wait is the kernels' time.
        assert_eq!(total(&cp), 2000);
        let bounds = by_bound(&t, &cp);
        assert_eq!(bounds[&Bound::GpuCompute], 1890);
        assert_eq!(bounds[&Bound::Cpu], 110);
    }

    #[test]
    fn an_event_sync_waits_for_the_work_recorded_if_it_was_not_done() {
        let mut t = trace(&[
            (Runtime, "cudaLaunchKernel", 0, 2, 1, 1),
            (Runtime, "cudaEventRecord", 2, 1, 1, 5),
            (Runtime, "cudaLaunchKernel", 3, 2, 1, 2),
            (Runtime, "cudaEventSynchronize", 6, 500, 1, 6),
            (Kernel, "recorded", 10, 490, 7, 1),
            (Kernel, "bystander", 20, 484, 8, 2),
            (Kind::Sync, "Event Sync", 6, 500, NONE, 6),
        ]);
        t.events.stream[5] = 8;
        t.event_waits.push((
            6,
            crate::model::trace::EventWait {
                on_stream: 7,
                record_correlation: 5,
            },
        ));
        let cp = whole(&t);
        let last = &cp.edges[*cp.path.last().unwrap() as usize];
        assert_eq!(last.kind, EdgeKind::SyncDependency);
        // From the recorded kernel, not the bystander that ended later.
        assert_eq!(cp.nodes[last.from as usize].event, 4);
        assert_eq!(last.weight, 6);
        // Recorded work done before the call started: no wait, the call's time is CPU.
        let mut done = t.clone();
        done.events.ts[3] = 600;
        done.events.ts[6] = 600;
        let cp = whole(&done);
        let last = &cp.edges[*cp.path.last().unwrap() as usize];
        assert_eq!((last.kind, last.event), (EdgeKind::Operator, Some(3)));
        assert_eq!(last.weight, 500);
    }

    #[test]
    fn a_blocking_copy_waits_for_its_copy_whatever_the_clocks_say() {
        let t = trace(&[
            (Runtime, "cudaMemcpyAsync", 0, 100, 1, 1),
            (Memcpy, "Memcpy DtoH (Device -> Pageable)", 20, 90, 7, 1),
        ]);
        let cp = whole(&t);
        assert_eq!(total(&cp), 110);
        let bounds = by_bound(&t, &cp);
        assert_eq!(bounds[&Bound::KernelLaunchOverhead], 20);
        assert_eq!(bounds[&Bound::GpuCompute], 90);
        assert!(!bounds.contains_key(&Bound::Cpu));
    }

    #[test]
    fn a_sync_does_not_wait_for_work_launched_after_it() {
        // A skewed GPU clock puts the kernel inside the earlier sync: it was launched
        // after the sync, so the sync did not wait for it (and no cycle is made).
        let t = trace(&[
            (Runtime, "cudaDeviceSynchronize", 0, 10, 1, NONE),
            (Runtime, "cudaLaunchKernel", 20, 5, 1, 1),
            (Kernel, "gemm", 5, 3, 7, 1),
        ]);
        let cp = whole(&t);
        assert_eq!(by_bound(&t, &cp).get(&Bound::Cpu), Some(&15));
    }

    #[test]
    fn nested_calls_attribute_time_to_the_call_it_was_spent_in() {
        let t = trace(&[
            (CpuOp, "outer", 0, 100, 1, NONE),
            (CpuOp, "inner", 10, 30, 1, NONE),
            (CpuOp, "next", 200, 50, 1, NONE),
        ]);
        let cp = whole(&t);
        let table = path_table(&t, &cp);
        let spent: Vec<(i64, f64)> = table
            .event_idx
            .iter()
            .zip(&table.duration)
            .map(|(&i, &d)| (i, d))
            .collect();
        // outer until inner, inner, outer after it, (the idle gap: no one's), next.
        assert_eq!(
            spent,
            [(0, 0.01), (1, 0.03), (0, 0.06), (-1, 0.0), (2, 0.05)]
        );
    }

    #[test]
    fn windows_are_found_by_name_and_instance() {
        let t = trace(&[
            (UserAnnotation, "ProfilerStep#1", 0, 100, 1, NONE),
            (UserAnnotation, "ProfilerStep#2", 100, 50, 1, NONE),
            (CpuOp, "aten::mm", 10, 5, 1, NONE),
        ]);
        assert_eq!(window(&t, "ProfilerStep", 1, 1), Ok((100, 150)));
        assert_eq!(window(&t, "ProfilerStep", 0, 1), Ok((0, 150)));
        assert_eq!(window(&t, "", 0, 0), Ok((0, 150)));
        assert!(window(&t, "ProfilerStep", 2, 2)
            .unwrap_err()
            .contains("has 2"));
        assert!(window(&t, "Nothing", 0, 0)
            .unwrap_err()
            .contains("\"Nothing\""));
        assert!(critical_path(&t, (500, 600)).is_err());
    }
}
