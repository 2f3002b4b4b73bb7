//! Reads a CUDA allocator snapshot pickle (`torch.cuda.memory._dump_snapshot`) into the
//! [`Snapshot`] model through the safe pickle reader: nothing in the file is executed.
//!
//! Both layouts torch has written are accepted: the current one (a dict with `segments`,
//! `device_traces`, and in newer versions `allocator_settings` and
//! `external_annotations`; trace entries with or without `time_us`), and the oldest one, a
//! bare list of segments whose blocks keep their stack under `history`.
//!
//! Trace entries are most of a snapshot (a million of them in a long trace, each with its
//! own list of ~40 frames), so they are folded into the model while the pickle is read
//! ([`pickle::Fold`]): a list stored under `frames` becomes its interned stack as soon as
//! it is complete, and a dict with an `action` appended to a list becomes a
//! [`TraceEntry`]. Neither is kept as pickle values; a frame list the memo hands out again
//! is the same stack without being read twice, and so is a new frame list filled by the
//! same run of memo references as an earlier one ([`Fold::fold_run`]): its items are never
//! even copied. The rest (segments, blocks, settings) is small and is read from the
//! pickle's values afterwards, by the same code that reads a pickle nothing was folded
//! from ([`from_pickle`]).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::formats::pickle::{self, Fold, Pickle, PickleError, StrId, Value};
use crate::formats::progress::Progress;
use crate::model::snapshot::{
    Action, Annotation, Block, BlockState, Segment, Snapshot, StackId, Stacks, TraceEntry, NO_STACK,
};
use crate::{Error, Result};

/// How much of a snapshot to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Parts {
    /// Everything: the segments, the trace, annotations and allocator settings.
    #[default]
    All,
    /// The state at the dump only (the segments and their blocks). Reading stops at the
    /// `device_traces` key, which torch writes after `segments`; the trace and the
    /// annotations and settings after it are only read past, each opcode checked (known,
    /// not refused, a STOP at the end) but nothing built, so a file cut short or holding
    /// code is refused as by a whole read. That check reads the file on a second thread
    /// while the segments are read ([`pickle::read_folding_checked`]).
    /// [`Snapshot::trace_skipped`] tells whether it stopped; a file with the trace first,
    /// or none, is read whole.
    Segments,
}

/// Reads the snapshot at `path`; `progress` is told the bytes read so far.
pub fn read_snapshot(
    path: &Path,
    parts: Parts,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Snapshot> {
    let open = || File::open(path).map_err(|e| Error::io(path, e));
    let file = open()?;
    let total = file.metadata().map_or(0, |m| m.len());
    let check = match parts {
        Parts::All => None,
        Parts::Segments => Some(open()?),
    };
    let mut bytes = Progress::new(total, progress);
    decode(bytes.reader(file), check, path)
}

/// Reads a snapshot from the bytes of its pickle (`pickle.dumps(torch.cuda.memory.
/// _snapshot())`); `name` stands for the file in errors.
pub fn read_snapshot_bytes(data: &[u8], name: &str, parts: Parts) -> Result<Snapshot> {
    let check = (parts == Parts::Segments).then_some(data);
    decode(data, check, Path::new(name))
}

/// Reads from `reader`, all of it ([`Parts::All`]) without `check`; with it, only the
/// segments ([`Parts::Segments`]), while another thread reads past the whole file from
/// `check`, a second reader of the same bytes.
fn decode<R: Read, C: Read + Send>(reader: R, check: Option<C>, path: &Path) -> Result<Snapshot> {
    let parts = if check.is_some() {
        Parts::Segments
    } else {
        Parts::All
    };
    let mut builder = Builder {
        parts,
        ..Builder::default()
    };
    let read = match check {
        Some(check) => pickle::read_folding_checked(reader, check, &mut builder),
        None => pickle::read_folding(reader, &mut builder),
    };
    let pickle = read.map_err(|e| match e {
        PickleError::Io { source, .. } => Error::io(path, source),
        other => Error::bad_input(path, format!("not a readable snapshot pickle: {other}")),
    })?;
    builder.build(&pickle).map_err(|what| {
        Error::bad_input(
            path,
            format!("not a CUDA allocator snapshot (torch.cuda.memory._dump_snapshot): {what}"),
        )
    })
}

/// Builds the model from a pickle's plain data (read without folding); the error says
/// what is missing.
pub fn from_pickle(p: &Pickle) -> std::result::Result<Snapshot, String> {
    Builder::default().build(p)
}

/// A size read as `v` under `name`: an integer from 0 to 2^63 − 1 (the figures add and
/// subtract sizes as signed 64-bit numbers; no memory comes near).
fn size_of(v: Option<Value>, name: &str) -> std::result::Result<u64, String> {
    match v {
        Some(Value::Int(i)) if i < 0 => Err(format!("negative `{name}` ({i})")),
        Some(Value::Int(i)) => Ok(i as u64),
        Some(Value::UInt(u)) => Err(format!("`{name}` too large ({u})")),
        Some(Value::BigInt(_)) => Err(format!("`{name}` wider than 64 bits")),
        _ => Err(format!("no integer `{name}`")),
    }
}

/// The 64 bits of an integer that is a pointer or an id (an address, a stream, a pool
/// id), whether torch's `size_t` put it above `i64::MAX` or not.
fn word(p: &Pickle, v: Value) -> Option<u64> {
    p.as_u64(v).or_else(|| p.as_int(v).map(|i| i as u64))
}

/// A frame's line: `None` unless a line number (torch writes 2^64 − 1, `size_t(-1)`, for
/// a C++ frame it could not place).
fn line_of(p: &Pickle, v: Option<Value>) -> Option<i64> {
    v.and_then(|v| p.as_int(v)).filter(|&line| line >= 0)
}

/// Levels of nesting shown of an allocator setting's value.
const PLAIN_DEPTH: usize = 4;

/// A key of torch's dicts: its id in the pickle's strings (`None` while no string of the
/// pickle spells it, so no dict has it) and its text, for errors.
type Key = (Option<StrId>, &'static str);

/// The keys the reader looks up, resolved to string ids: a snapshot has hundreds of
/// thousands of dicts, and comparing ids is cheaper than hashing and comparing text.
/// While the pickle is being read, keys not met yet are looked up again whenever it has
/// new strings.
macro_rules! keys {
    ($($name:ident),* $(,)?) => {
        struct Keys {
            $($name: Key,)*
        }

        impl Default for Keys {
            fn default() -> Keys {
                Keys {
                    $($name: (None, stringify!($name)),)*
                }
            }
        }

        impl Keys {
            fn resolve(&mut self, p: &Pickle) {
                $(if self.$name.0.is_none() {
                    self.$name.0 = p.find_str(stringify!($name));
                })*
            }
        }
    };
}

keys!(
    action,
    active_size,
    addr,
    address,
    allocated_size,
    blocks,
    device,
    device_free,
    filename,
    frames,
    history,
    is_expandable,
    line,
    name,
    real_size,
    requested_size,
    segment_pool_id,
    segment_type,
    size,
    stage,
    state,
    stream,
    time_us,
    total_size,
);

/// How many spellings of actions [`Builder::action`] remembers (torch has nine).
const ACTIONS_KEPT: usize = 16;

/// Tokens of folded trace entries have this bit set (the index into
/// [`Builder::entries`] below it); tokens without it are stacks.
const ENTRY_TOKEN: u32 = 1 << 31;

/// Builds the model: folds trace entries and stacks while the pickle is read, then walks
/// what is left. The lists and frames torch shares between entries (through the pickle's
/// memo) are converted once.
#[derive(Default)]
struct Builder {
    /// What to read.
    parts: Parts,
    /// Whether the read stopped before `device_traces`.
    stopped: bool,
    k: Keys,
    /// How many strings the pickle had when [`Builder::k`] was last resolved.
    strings_seen: usize,
    stacks: Stacks,
    /// The stack of each list of frames converted so far, by its sequence index.
    by_list: ById,
    /// The frame id of each frame dict converted so far, by its dict index.
    by_frame: ById,
    /// The stack of each run of memo references (see [`Fold::fold_run`]) converted so far.
    by_run: ById,
    /// Reused for the frame ids of the stack being converted.
    frame_ids: Vec<u32>,
    /// The actions of trace entries met so far, by the id of their string.
    actions: Vec<(StrId, Action)>,
    /// The trace entries folded while reading, in the order they were read.
    entries: Vec<TraceEntry>,
    /// Why folded entries could not be read, by index in `entries` (reported only if the
    /// entry is in `device_traces`).
    entry_errors: Vec<(usize, String)>,
}

impl Fold for Builder {
    /// Items of lists are taken over only when they are dicts with an `action` (trace
    /// entries): what was declined is a list, or a dict without an `action`, and torch
    /// never changes a dict once written.
    const ITEMS_ONCE: bool = true;

    #[inline]
    fn fold(&mut self, p: &Pickle, key: Option<Value>, value: Value) -> Option<u32> {
        if let (None, Value::Dict(id)) = (key, value) {
            // A frame dict, offered once per stack that holds it: known after the first.
            if self.by_frame.get(id.index()).is_some() {
                return None;
            }
        }
        self.fold_new(p, key, value)
    }

    /// A list of frames whose run of memo references was met before is the stack that
    /// run's first list became.
    fn fold_run(&mut self, key: Option<Value>, run: u32) -> Option<u32> {
        match key {
            Some(Value::Str(key)) if Some(key) == self.k.frames.0 => self.by_run.get(run as usize),
            _ => None,
        }
    }

    const STOPS: bool = true;

    fn stop_before(&mut self, p: &Pickle, key: StrId) -> bool {
        self.stopped = self.parts == Parts::Segments && p.str_by_id(key) == "device_traces";
        self.stopped
    }

    fn folded_run(&mut self, _: Option<Value>, run: u32, token: u32) {
        // A list is taken over only as a stack, under `frames`.
        if token < ENTRY_TOKEN {
            self.by_run.set(run as usize, token);
        }
    }
}

impl Builder {
    /// [`Fold::fold`] of what is not known to be a frame.
    #[inline(never)]
    fn fold_new(&mut self, p: &Pickle, key: Option<Value>, value: Value) -> Option<u32> {
        if p.str_count() != self.strings_seen {
            self.k.resolve(p);
            self.strings_seen = p.str_count();
        }
        match (key, value) {
            (Some(Value::Str(key)), Value::List(_) | Value::Tuple(_))
                if Some(key) == self.k.frames.0 =>
            {
                let stack = self.stack_of(p, value);
                (stack < ENTRY_TOKEN).then_some(stack)
            }
            (None, Value::Dict(_)) if self.get(p, value, self.k.action).is_some() => {
                let index = self.entries.len();
                let token = u32::try_from(index).ok().filter(|&i| i < ENTRY_TOKEN)?;
                let entry = self.entry(p, value).unwrap_or_else(|why| {
                    self.entry_errors.push((index, why));
                    TraceEntry {
                        action: Action::Snapshot,
                        addr: 0,
                        size: 0,
                        stream: 0,
                        time_us: None,
                        device_free: None,
                        stack: NO_STACK,
                    }
                });
                self.entries.push(entry);
                Some(ENTRY_TOKEN | token)
            }
            _ => None,
        }
    }
}

/// A `u32` per arena index of the pickle, for the ids met so far: arena indices are dense
/// from 0, so a vector does what a hash map would, at an index's cost.
#[derive(Default)]
struct ById(Vec<Option<u32>>);

impl ById {
    fn get(&self, index: usize) -> Option<u32> {
        self.0.get(index).copied().flatten()
    }

    fn set(&mut self, index: usize, value: u32) {
        if index >= self.0.len() {
            self.0.resize(index + 1, None);
        }
        self.0[index] = Some(value);
    }
}

impl Builder {
    /// The model from the pickle's values and what was folded while reading it.
    fn build(mut self, p: &Pickle) -> std::result::Result<Snapshot, String> {
        self.k.resolve(p);
        let root = p.root();
        let (segments, traces) = if let Some(segments) = p.as_seq(root) {
            (segments, &[][..])
        } else if p.as_dict(root).is_some() {
            let segments = p
                .get(root, "segments")
                .and_then(|v| p.as_seq(v))
                .ok_or("the top-level dict has no list of `segments`")?;
            let traces = p
                .get(root, "device_traces")
                .and_then(|v| p.as_seq(v))
                .unwrap_or(&[]);
            (segments, traces)
        } else {
            return Err(format!(
                "its top level is of type {}, not a dict or a list of segments",
                root.type_name()
            ));
        };
        let segments = segments
            .iter()
            .enumerate()
            .map(|(k, &s)| self.segment(p, s).map_err(|e| format!("segment {k}: {e}")))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let device_traces = self.device_traces(p, traces)?;
        let annotations = p
            .get(root, "external_annotations")
            .and_then(|v| p.as_seq(v))
            .unwrap_or(&[])
            .iter()
            .map(|&a| Annotation {
                stage: self.text(p, a, self.k.stage),
                name: self.text(p, a, self.k.name),
                device: self.int(p, a, self.k.device).unwrap_or(0).max(0) as u32,
                time_us: self.int(p, a, self.k.time_us),
            })
            .collect();
        let allocator_settings = p
            .get(root, "allocator_settings")
            .and_then(|v| p.as_dict(v))
            .unwrap_or(&[])
            .iter()
            .map(|&(k, v)| (self.plain(p, k, PLAIN_DEPTH), self.plain(p, v, PLAIN_DEPTH)))
            .collect();
        Ok(Snapshot {
            segments,
            device_traces,
            stacks: self.stacks,
            annotations,
            allocator_settings,
            trace_skipped: self.stopped,
        })
    }

    /// The trace of each device. When the lists hold exactly the entries folded while
    /// reading, in order (as torch writes them), the folded entries are split into the
    /// devices' traces without copying the first; otherwise each item is converted.
    fn device_traces(
        &mut self,
        p: &Pickle,
        traces: &[Value],
    ) -> std::result::Result<Vec<Vec<TraceEntry>>, String> {
        let lists = traces
            .iter()
            .enumerate()
            .map(|(device, &t)| {
                p.as_seq(t)
                    .ok_or_else(|| format!("device_traces[{device}] is not a list"))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let mut next = 0;
        let in_order = self.entry_errors.is_empty()
            && lists.iter().flat_map(|l| l.iter()).all(|&e| {
                let this = e == Value::Folded(ENTRY_TOKEN | next);
                next += 1;
                this
            })
            && next as usize == self.entries.len();
        if in_order && !lists.is_empty() {
            // The last devices' entries are split off the end; the first device keeps the
            // vector (`split_off(0)` would copy it all).
            let mut rest = std::mem::take(&mut self.entries);
            let mut traces: Vec<Vec<TraceEntry>> = lists[1..]
                .iter()
                .rev()
                .map(|l| rest.split_off(rest.len() - l.len()))
                .collect();
            traces.push(rest);
            traces.reverse();
            return Ok(traces);
        }
        lists
            .iter()
            .enumerate()
            .map(|(device, entries)| {
                entries
                    .iter()
                    .enumerate()
                    .map(|(k, &e)| {
                        self.entry_or_folded(p, e)
                            .map_err(|why| format!("device_traces[{device}][{k}]: {why}"))
                    })
                    .collect()
            })
            .collect()
    }

    /// The trace entry `e` is, or was folded into.
    fn entry_or_folded(&mut self, p: &Pickle, e: Value) -> std::result::Result<TraceEntry, String> {
        let Value::Folded(token) = e else {
            return self.entry(p, e);
        };
        let index = (token & !ENTRY_TOKEN) as usize;
        match self.entries.get(index) {
            Some(&entry) if token & ENTRY_TOKEN != 0 => {
                match self.entry_errors.iter().find(|(i, _)| *i == index) {
                    Some((_, why)) => Err(why.clone()),
                    None => Ok(entry),
                }
            }
            _ => Err("a list of frames, not a dict".into()),
        }
    }

    /// `dict[key]`, comparing interned ids rather than text.
    fn get(&self, p: &Pickle, dict: Value, key: Key) -> Option<Value> {
        let id = Value::Str(key.0?);
        let items = p.as_dict(dict)?;
        items.iter().find(|(k, _)| *k == id).map(|&(_, v)| v)
    }

    fn int(&self, p: &Pickle, dict: Value, key: Key) -> Option<i64> {
        p.as_int(self.get(p, dict, key)?)
    }

    fn word(&self, p: &Pickle, dict: Value, key: Key) -> Option<u64> {
        word(p, self.get(p, dict, key)?)
    }

    fn size(&self, p: &Pickle, dict: Value, key: Key) -> std::result::Result<u64, String> {
        size_of(self.get(p, dict, key), key.1)
    }

    fn text(&self, p: &Pickle, dict: Value, key: Key) -> String {
        self.get(p, dict, key)
            .and_then(|v| p.as_str(v))
            .unwrap_or("")
            .to_owned()
    }

    /// A plain value as short text (allocator settings are numbers, bools, strings and
    /// small dicts), `…` below `depth` levels: a pickle may hold a container that
    /// contains itself.
    fn plain(&self, p: &Pickle, v: Value, depth: usize) -> String {
        match v {
            Value::None => "None".into(),
            Value::Bool(b) => if b { "True" } else { "False" }.into(),
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            Value::Float(f) => f.to_string(),
            // The nearest float of an int wider than 64 bits: its digits are not all known.
            Value::BigInt(f) => format!("{f:e}"),
            Value::Str(_) => p.as_str(v).unwrap_or("").to_owned(),
            Value::Bytes(_) => format!("<{} bytes>", p.as_bytes(v).map_or(0, <[u8]>::len)),
            Value::List(_) | Value::Tuple(_) | Value::Dict(_) | Value::Folded(_) if depth == 0 => {
                "…".into()
            }
            Value::Folded(_) => "…".into(),
            Value::List(_) | Value::Tuple(_) => {
                let items: Vec<String> = p
                    .as_seq(v)
                    .unwrap_or(&[])
                    .iter()
                    .map(|&x| self.plain(p, x, depth - 1))
                    .collect();
                format!("[{}]", items.join(", "))
            }
            Value::Dict(_) => {
                let items: Vec<String> = p
                    .as_dict(v)
                    .unwrap_or(&[])
                    .iter()
                    .map(|&(k, x)| {
                        format!(
                            "{}: {}",
                            self.plain(p, k, depth - 1),
                            self.plain(p, x, depth - 1)
                        )
                    })
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
        }
    }

    /// The stack under `frames` (a list of `{name, filename, line}` dicts, or the stack
    /// it was folded into).
    fn stack(&mut self, p: &Pickle, frames: Option<Value>) -> StackId {
        match frames {
            Some(Value::Folded(token)) if token < ENTRY_TOKEN => token,
            Some(list @ (Value::List(id) | Value::Tuple(id))) => {
                if let Some(stack) = self.by_list.get(id.index()) {
                    return stack;
                }
                let stack = self.stack_of(p, list);
                self.by_list.set(id.index(), stack);
                stack
            }
            _ => NO_STACK,
        }
    }

    /// The stack of a list of frames.
    fn stack_of(&mut self, p: &Pickle, list: Value) -> StackId {
        let mut ids = std::mem::take(&mut self.frame_ids);
        ids.clear();
        for &f in p.as_seq(list).unwrap_or(&[]) {
            ids.push(self.frame(p, f));
        }
        let stack = self.stacks.stack(&ids);
        self.frame_ids = ids;
        stack
    }

    /// The id of a `{name, filename, line}` frame; torch's pickles share each distinct
    /// frame dict among all the stacks that hold it.
    fn frame(&mut self, p: &Pickle, f: Value) -> u32 {
        if let Value::Dict(id) = f {
            if let Some(frame) = self.by_frame.get(id.index()) {
                return frame;
            }
        }
        let text = |key| {
            self.get(p, f, key)
                .and_then(|v| p.as_str(v))
                .unwrap_or("??")
        };
        let (name, file) = (text(self.k.name), text(self.k.filename));
        let line = line_of(p, self.get(p, f, self.k.line));
        let frame = self.stacks.frame(name, file, line);
        if let Value::Dict(id) = f {
            self.by_frame.set(id.index(), frame);
        }
        frame
    }

    fn segment(&mut self, p: &Pickle, s: Value) -> std::result::Result<Segment, String> {
        if p.as_dict(s).is_none() {
            return Err(format!("of type {}, not a dict", s.type_name()));
        }
        let blocks = self
            .get(p, s, self.k.blocks)
            .and_then(|v| p.as_seq(v))
            .ok_or("no list of `blocks`")?
            .iter()
            .enumerate()
            .map(|(k, &b)| self.block(p, b).map_err(|e| format!("block {k}: {e}")))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let pool = self
            .get(p, s, self.k.segment_pool_id)
            .and_then(|v| p.as_seq(v))
            .map_or((0, 0), |ids| {
                let id = |k: usize| ids.get(k).and_then(|&v| word(p, v)).unwrap_or(0) as i64;
                (id(0), id(1))
            });
        let active = |b: &Block| b.state.is_active();
        let allocated = |b: &Block| b.state == BlockState::ActiveAllocated;
        let sum = |f: &dyn Fn(&Block) -> bool, size: fn(&Block) -> u64| {
            blocks.iter().filter(|b| f(b)).map(size).sum::<u64>()
        };
        // Segments of the oldest layout lack the sums: they follow from the blocks.
        let or_blocks = |key: Key, from_blocks: u64| {
            self.int(p, s, key)
                .and_then(|v| u64::try_from(v).ok())
                .unwrap_or(from_blocks)
        };
        Ok(Segment {
            device: self.int(p, s, self.k.device).unwrap_or(0).max(0) as u32,
            address: self.word(p, s, self.k.address).unwrap_or(0),
            total_size: self.size(p, s, self.k.total_size)?,
            allocated_size: or_blocks(self.k.allocated_size, sum(&allocated, |b| b.size)),
            active_size: or_blocks(self.k.active_size, sum(&active, |b| b.size)),
            requested_size: or_blocks(self.k.requested_size, sum(&allocated, |b| b.requested_size)),
            stream: self.word(p, s, self.k.stream).unwrap_or(0) as i64,
            segment_type: match self.text(p, s, self.k.segment_type) {
                t if t.is_empty() => "large".to_owned(),
                t => t,
            },
            pool,
            expandable: self
                .get(p, s, self.k.is_expandable)
                .and_then(|v| p.as_bool(v))
                .unwrap_or(false),
            stack: self.stack(p, self.get(p, s, self.k.frames)),
            blocks,
        })
    }

    fn block(&mut self, p: &Pickle, b: Value) -> std::result::Result<Block, String> {
        if p.as_dict(b).is_none() {
            return Err(format!("of type {}, not a dict", b.type_name()));
        }
        let size = self.size(p, b, self.k.size)?;
        let state = BlockState::parse(
            self.get(p, b, self.k.state)
                .and_then(|v| p.as_str(v))
                .ok_or("no `state`")?,
        );
        // The oldest layout keeps the stack and requested size in `history[0]`.
        let first = self
            .get(p, b, self.k.history)
            .and_then(|v| p.as_seq(v))
            .and_then(|h| h.first().copied());
        let (frames, requested) = match (self.get(p, b, self.k.frames), first) {
            (Some(frames), _) => (Some(frames), self.get(p, b, self.k.requested_size)),
            (None, Some(h)) => (
                self.get(p, h, self.k.frames),
                self.get(p, h, self.k.real_size),
            ),
            (None, None) => (None, self.get(p, b, self.k.requested_size)),
        };
        let requested_size = match requested {
            Some(r) => size_of(Some(r), "requested size")?,
            None if state.is_active() => size,
            None => 0,
        };
        Ok(Block {
            address: self.word(p, b, self.k.address).unwrap_or(0),
            size,
            requested_size,
            state,
            stack: self.stack(p, frames),
        })
    }

    /// A trace entry: one pass over its dict (a long trace has a million of them).
    fn entry(&mut self, p: &Pickle, e: Value) -> std::result::Result<TraceEntry, String> {
        let Some(items) = p.as_dict(e) else {
            return Err(format!("of type {}, not a dict", e.type_name()));
        };
        let k = &self.k;
        let keys = [
            k.action.0,
            k.addr.0,
            k.size.0,
            k.stream.0,
            k.time_us.0,
            k.device_free.0,
            k.frames.0,
        ];
        let mut found = [None; 7];
        for &(key, value) in items {
            if let Value::Str(key) = key {
                if let Some(k) = keys.iter().position(|&id| id == Some(key)) {
                    found[k] = Some(value);
                }
            }
        }
        let [action, addr, size, stream, time_us, device_free, frames] = found;
        let Some(Value::Str(action)) = action else {
            return Err("no `action`".into());
        };
        let action = self.action(p, action);
        let int = |v: Option<Value>| v.and_then(|v| p.as_int(v));
        let word = |v: Option<Value>| v.and_then(|v| word(p, v));
        let size = match size_of(size, self.k.size.1) {
            // `snapshot` entries carry no size in some versions.
            Err(_) if action == Action::Snapshot => 0,
            size => size?,
        };
        Ok(TraceEntry {
            action,
            addr: word(addr).unwrap_or(0),
            size,
            stream: word(stream).unwrap_or(0) as i64,
            time_us: int(time_us),
            device_free: device_free.and_then(|v| p.as_u64(v)),
            stack: self.stack(p, frames),
        })
    }

    /// The action a string of the pickle spells; the first few are remembered by id.
    fn action(&mut self, p: &Pickle, id: StrId) -> Action {
        if let Some(&(_, action)) = self.actions.iter().find(|&&(known, _)| known == id) {
            return action;
        }
        let action = Action::parse(p.str_by_id(id), &mut self.stacks.names);
        if self.actions.len() < ACTIONS_KEPT {
            self.actions.push((id, action));
        }
        action
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two trace entries whose frame lists start with the same run of memo references
    /// (`](h\x00e`: a list of the frame dict memoized first); the second list is then given
    /// one more frame (`h\x01a`), so it is not the stack the run's first list became.
    const SAME_RUN_THEN_EXTENDED: &[u8] = b"\x80\x04\
        }\x94(\x8c\x04name\x8c\x01f\x8c\x08filename\x8c\x04a.py\x8c\x04lineK\x01u0\
        }\x94(\x8c\x04name\x8c\x01g\x8c\x08filename\x8c\x04b.py\x8c\x04lineK\x02u0\
        }(\x8c\x08segments]\x8c\x0ddevice_traces]](\
        }(\x8c\x06action\x8c\x05alloc\x8c\x04addrK\x01\x8c\x04sizeM\x00\x02\x8c\x06streamK\x00\
        \x8c\x06frames](h\x00eu\
        }(\x8c\x06action\x8c\x05alloc\x8c\x04addrK\x01\x8c\x04sizeM\x00\x02\x8c\x06streamK\x00\
        \x8c\x06frames](h\x00eh\x01aueau.";

    #[test]
    fn a_list_of_a_known_run_changed_afterwards_is_its_own_stack() {
        let folded = read_snapshot_bytes(SAME_RUN_THEN_EXTENDED, "<test>", Parts::All).unwrap();
        let plain = from_pickle(&pickle::read(SAME_RUN_THEN_EXTENDED).unwrap()).unwrap();
        let stacks = |s: &Snapshot| -> Vec<Vec<u32>> {
            s.device_traces[0]
                .iter()
                .map(|e| {
                    s.stacks
                        .frames(e.stack)
                        .map(|f| f.line.unwrap() as u32)
                        .collect()
                })
                .collect()
        };
        assert_eq!(stacks(&folded), stacks(&plain));
        assert_eq!(stacks(&folded), [vec![1], vec![1, 2]]);
    }
}
