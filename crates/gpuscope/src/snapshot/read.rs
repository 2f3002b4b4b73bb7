//! Reads a CUDA allocator snapshot pickle (`torch.cuda.memory._dump_snapshot`) into the
//! [`Snapshot`] model through the safe pickle reader: nothing in the file is executed.
//!
//! Both layouts torch has written are accepted: the current one (a dict with `segments`,
//! `device_traces`, and in newer versions `allocator_settings` and
//! `external_annotations`; trace entries with or without `time_us`), and the oldest one, a
//! bare list of segments whose blocks keep their stack under `history`.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::model::snapshot::{
    Action, Annotation, Block, BlockState, Segment, Snapshot, StackId, Stacks, TraceEntry, NO_STACK,
};
use crate::pickle::{self, Pickle, PickleError, StrId, Value};
use crate::progress::Progress;
use crate::{Error, Result};

/// Reads the snapshot at `path`; `progress` is told the bytes read so far.
pub fn read_snapshot(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<Snapshot> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let total = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Progress::new(total, progress);
    decode(bytes.reader(file), path)
}

/// Reads a snapshot from the bytes of its pickle (`pickle.dumps(torch.cuda.memory.
/// _snapshot())`); `name` stands for the file in errors.
pub fn read_snapshot_bytes(data: &[u8], name: &str) -> Result<Snapshot> {
    decode(data, Path::new(name))
}

fn decode<R: Read>(reader: R, path: &Path) -> Result<Snapshot> {
    let pickle = pickle::read(reader).map_err(|e| match e {
        PickleError::Io { source, .. } => Error::io(path, source),
        other => Error::bad_input(path, format!("not a readable snapshot pickle: {other}")),
    })?;
    from_pickle(&pickle).map_err(|what| {
        Error::bad_input(
            path,
            format!("not a CUDA allocator snapshot (torch.cuda.memory._dump_snapshot): {what}"),
        )
    })
}

/// Builds the model from a pickle's plain data; the error says what is missing.
pub fn from_pickle(p: &Pickle) -> std::result::Result<Snapshot, String> {
    let mut b = Builder {
        p,
        k: Keys::of(p),
        stacks: Stacks::default(),
        by_list: ById::default(),
        by_frame: ById::default(),
        frame_ids: Vec::new(),
    };
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
        .map(|(k, &s)| b.segment(s).map_err(|e| format!("segment {k}: {e}")))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let device_traces = traces
        .iter()
        .enumerate()
        .map(|(device, &t)| {
            let entries = p
                .as_seq(t)
                .ok_or_else(|| format!("device_traces[{device}] is not a list"))?;
            entries
                .iter()
                .enumerate()
                .map(|(k, &e)| {
                    b.entry(e)
                        .map_err(|why| format!("device_traces[{device}][{k}]: {why}"))
                })
                .collect()
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    let annotations = p
        .get(root, "external_annotations")
        .and_then(|v| p.as_seq(v))
        .unwrap_or(&[])
        .iter()
        .map(|&a| Annotation {
            stage: b.text(a, b.k.stage),
            name: b.text(a, b.k.name),
            device: b.int(a, b.k.device).unwrap_or(0).max(0) as u32,
            time_us: b.int(a, b.k.time_us),
        })
        .collect();
    let allocator_settings = p
        .get(root, "allocator_settings")
        .and_then(|v| p.as_dict(v))
        .unwrap_or(&[])
        .iter()
        .map(|&(k, v)| (b.plain(k, PLAIN_DEPTH), b.plain(v, PLAIN_DEPTH)))
        .collect();
    Ok(Snapshot {
        segments,
        device_traces,
        stacks: b.stacks,
        annotations,
        allocator_settings,
    })
}

/// Levels of nesting shown of an allocator setting's value.
const PLAIN_DEPTH: usize = 4;

/// A key of torch's dicts: its id in the pickle's strings (`None` when no string of the
/// pickle spells it, so no dict has it) and its text, for errors.
type Key = (Option<StrId>, &'static str);

/// The keys the reader looks up, resolved to string ids once: a snapshot has hundreds of
/// thousands of dicts, and comparing ids is cheaper than hashing and comparing text.
macro_rules! keys {
    ($($name:ident),* $(,)?) => {
        struct Keys {
            $($name: Key,)*
        }

        impl Keys {
            fn of(p: &Pickle) -> Keys {
                Keys {
                    $($name: (p.find_str(stringify!($name)), stringify!($name)),)*
                }
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

/// Walks the pickle, interning stacks; the lists and frames torch shares between entries
/// (through the pickle's memo) are converted once.
struct Builder<'p> {
    p: &'p Pickle,
    k: Keys,
    stacks: Stacks,
    /// The stack of each list of frames converted so far, by its sequence index.
    by_list: ById,
    /// The frame id of each frame dict converted so far, by its dict index.
    by_frame: ById,
    /// Reused for the frame ids of the stack being converted.
    frame_ids: Vec<u32>,
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

impl Builder<'_> {
    /// `dict[key]`, comparing interned ids rather than text.
    fn get(&self, dict: Value, key: Key) -> Option<Value> {
        let id = Value::Str(key.0?);
        let items = self.p.as_dict(dict)?;
        items.iter().find(|(k, _)| *k == id).map(|&(_, v)| v)
    }

    fn int(&self, dict: Value, key: Key) -> Option<i64> {
        self.p.as_int(self.get(dict, key)?)
    }

    fn size(&self, dict: Value, key: Key) -> std::result::Result<u64, String> {
        let name = key.1;
        let v = self
            .int(dict, key)
            .ok_or_else(|| format!("no integer `{name}`"))?;
        u64::try_from(v).map_err(|_| format!("negative `{name}` ({v})"))
    }

    fn text(&self, dict: Value, key: Key) -> String {
        self.get(dict, key)
            .and_then(|v| self.p.as_str(v))
            .unwrap_or("")
            .to_owned()
    }

    /// A plain value as short text (allocator settings are numbers, bools, strings and
    /// small dicts), `…` below `depth` levels: a pickle may hold a container that
    /// contains itself.
    fn plain(&self, v: Value, depth: usize) -> String {
        let p = self.p;
        match v {
            Value::None => "None".into(),
            Value::Bool(b) => if b { "True" } else { "False" }.into(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Str(_) => p.as_str(v).unwrap_or("").to_owned(),
            Value::Bytes(_) => format!("<{} bytes>", p.as_bytes(v).map_or(0, <[u8]>::len)),
            Value::List(_) | Value::Tuple(_) | Value::Dict(_) if depth == 0 => "…".into(),
            Value::List(_) | Value::Tuple(_) => {
                let items: Vec<String> = p
                    .as_seq(v)
                    .unwrap_or(&[])
                    .iter()
                    .map(|&x| self.plain(x, depth - 1))
                    .collect();
                format!("[{}]", items.join(", "))
            }
            Value::Dict(_) => {
                let items: Vec<String> = p
                    .as_dict(v)
                    .unwrap_or(&[])
                    .iter()
                    .map(|&(k, x)| {
                        format!("{}: {}", self.plain(k, depth - 1), self.plain(x, depth - 1))
                    })
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
        }
    }

    /// The stack under `frames` (a list of `{name, filename, line}` dicts).
    fn stack(&mut self, frames: Option<Value>) -> StackId {
        let Some(list @ (Value::List(id) | Value::Tuple(id))) = frames else {
            return NO_STACK;
        };
        if let Some(stack) = self.by_list.get(id.index()) {
            return stack;
        }
        let mut ids = std::mem::take(&mut self.frame_ids);
        ids.clear();
        for &f in self.p.as_seq(list).unwrap_or(&[]) {
            ids.push(self.frame(f));
        }
        let stack = self.stacks.stack(&ids);
        self.frame_ids = ids;
        self.by_list.set(id.index(), stack);
        stack
    }

    /// The id of a `{name, filename, line}` frame; torch's pickles share each distinct
    /// frame dict among all the stacks that hold it.
    fn frame(&mut self, f: Value) -> u32 {
        if let Value::Dict(id) = f {
            if let Some(frame) = self.by_frame.get(id.index()) {
                return frame;
            }
        }
        let p = self.p;
        let text = |key| self.get(f, key).and_then(|v| p.as_str(v)).unwrap_or("??");
        let (name, file) = (text(self.k.name), text(self.k.filename));
        let line = self.int(f, self.k.line).unwrap_or(0);
        let frame = self.stacks.frame(name, file, line);
        if let Value::Dict(id) = f {
            self.by_frame.set(id.index(), frame);
        }
        frame
    }

    fn segment(&mut self, s: Value) -> std::result::Result<Segment, String> {
        let p = self.p;
        if p.as_dict(s).is_none() {
            return Err(format!("of type {}, not a dict", s.type_name()));
        }
        let blocks = self
            .get(s, self.k.blocks)
            .and_then(|v| p.as_seq(v))
            .ok_or("no list of `blocks`")?
            .iter()
            .enumerate()
            .map(|(k, &b)| self.block(b).map_err(|e| format!("block {k}: {e}")))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let pool = self
            .get(s, self.k.segment_pool_id)
            .and_then(|v| p.as_seq(v))
            .map_or((0, 0), |ids| {
                let id = |k: usize| ids.get(k).and_then(|&v| p.as_int(v)).unwrap_or(0);
                (id(0), id(1))
            });
        let active = |b: &Block| b.state.is_active();
        let allocated = |b: &Block| b.state == BlockState::ActiveAllocated;
        let sum = |f: &dyn Fn(&Block) -> bool, size: fn(&Block) -> u64| {
            blocks.iter().filter(|b| f(b)).map(size).sum::<u64>()
        };
        // Segments of the oldest layout lack the sums: they follow from the blocks.
        let or_blocks = |key: Key, from_blocks: u64| {
            self.int(s, key)
                .and_then(|v| u64::try_from(v).ok())
                .unwrap_or(from_blocks)
        };
        Ok(Segment {
            device: self.int(s, self.k.device).unwrap_or(0).max(0) as u32,
            address: self.int(s, self.k.address).unwrap_or(0) as u64,
            total_size: self.size(s, self.k.total_size)?,
            allocated_size: or_blocks(self.k.allocated_size, sum(&allocated, |b| b.size)),
            active_size: or_blocks(self.k.active_size, sum(&active, |b| b.size)),
            requested_size: or_blocks(self.k.requested_size, sum(&allocated, |b| b.requested_size)),
            stream: self.int(s, self.k.stream).unwrap_or(0),
            segment_type: match self.text(s, self.k.segment_type) {
                t if t.is_empty() => "large".to_owned(),
                t => t,
            },
            pool,
            expandable: self
                .get(s, self.k.is_expandable)
                .and_then(|v| p.as_bool(v))
                .unwrap_or(false),
            stack: self.stack(self.get(s, self.k.frames)),
            blocks,
        })
    }

    fn block(&mut self, b: Value) -> std::result::Result<Block, String> {
        let p = self.p;
        if p.as_dict(b).is_none() {
            return Err(format!("of type {}, not a dict", b.type_name()));
        }
        let size = self.size(b, self.k.size)?;
        let state = BlockState::parse(
            self.get(b, self.k.state)
                .and_then(|v| p.as_str(v))
                .ok_or("no `state`")?,
        );
        // The oldest layout keeps the stack and requested size in `history[0]`.
        let first = self
            .get(b, self.k.history)
            .and_then(|v| p.as_seq(v))
            .and_then(|h| h.first().copied());
        let (frames, requested) = match (self.get(b, self.k.frames), first) {
            (Some(frames), _) => (Some(frames), self.int(b, self.k.requested_size)),
            (None, Some(h)) => (self.get(h, self.k.frames), self.int(h, self.k.real_size)),
            (None, None) => (None, self.int(b, self.k.requested_size)),
        };
        let requested_size = match requested {
            Some(r) => u64::try_from(r).map_err(|_| format!("negative requested size ({r})"))?,
            None if state.is_active() => size,
            None => 0,
        };
        Ok(Block {
            address: self.int(b, self.k.address).unwrap_or(0) as u64,
            size,
            requested_size,
            state,
            stack: self.stack(frames),
        })
    }

    fn entry(&mut self, e: Value) -> std::result::Result<TraceEntry, String> {
        let p = self.p;
        if p.as_dict(e).is_none() {
            return Err(format!("of type {}, not a dict", e.type_name()));
        }
        let action = self
            .get(e, self.k.action)
            .and_then(|v| p.as_str(v))
            .ok_or("no `action`")?;
        let action = Action::parse(action, &mut self.stacks.names);
        Ok(TraceEntry {
            action,
            addr: self.int(e, self.k.addr).unwrap_or(0) as u64,
            size: self.size(e, self.k.size).or_else(|why| {
                // `snapshot` entries carry no size in some versions.
                if action == Action::Snapshot {
                    Ok(0)
                } else {
                    Err(why)
                }
            })?,
            stream: self.int(e, self.k.stream).unwrap_or(0),
            time_us: self.int(e, self.k.time_us),
            device_free: self
                .int(e, self.k.device_free)
                .and_then(|v| u64::try_from(v).ok()),
            stack: self.stack(self.get(e, self.k.frames)),
        })
    }
}
