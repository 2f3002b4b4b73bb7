//! A safe reader of Python pickles that hold plain data — torch's CUDA allocator snapshots
//! (`torch.cuda.memory._dump_snapshot`) above all. It builds only `None`, bools, ints,
//! floats, strings, bytes, lists, tuples, sets (as lists) and dicts, and never imports or
//! calls anything: every opcode that would (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
//! NEWOBJ, NEWOBJ_EX, EXT1/2/4), or that needs what only the writer has (PERSID,
//! BINPERSID, NEXT_BUFFER, READONLY_BUFFER), is refused with its name and byte offset.
//!
//! Why by hand: serde-pickle 1.2 rejects the real snapshots with `Syntax(Recursive)`,
//! because torch's pickles reference the same list or dict (a frame, a stack of frames)
//! from many places through the memo, and serde-pickle takes any memo entry met twice for
//! a cycle. Its `replace_recursive_structures` option silently puts `None` in place of the
//! shared entries and took 410–540 MB to read a 3 MB snapshot. Here containers live in
//! flat arenas ([`Pickle`]: one vector of items for all sequences, one of entries for all
//! dicts, a span each) and a [`Value`] is a 16-byte `Copy` id, so a shared entry stays one
//! span referenced many times, and a mutation after memoization (APPENDS, SETITEMS on a
//! memoized container) is seen by every reference, as in Python. Strings are interned, so
//! a file name repeated in a thousand frames is stored once and compares by [`StrId`].
//!
//! [`read_folding`] hands each container, as it is stored in another, to a [`Fold`] that
//! may take it over (the snapshot reader turns trace entries and frame lists into its
//! model there), so a file of a million records is never held as a tree of values. A
//! fold may also end the read before a key of the outermost dict ([`Fold::stop_before`]):
//! the rest is then only checked, opcode by opcode, not built (`gpuscope snapshot
//! --no-trace`).
//!
//! The reader streams opcodes from any `Read`, supports every data opcode of protocols
//! 0–5, never allocates for a length the input claims before the bytes are there, and
//! never panics on bad input: the cargo-fuzz target `pickle_read` in
//! `crates/gpuscope/fuzz` feeds it arbitrary bytes (see its README).
//!
//! Two fast paths serve what a snapshot is mostly made of, with the same result as reading
//! opcode by opcode (a test and the fuzz target compare the two): opcodes that only push a
//! value are applied in a loop of their own, and a run of memo references filling a new
//! list (a trace entry's frames) that was met before is one lookup (`runs.rs`).
//!
//! Files: `opcodes.rs` (the table), `machine.rs` (the interpreter), `input.rs` (counted,
//! bounded reads), `text.rs` (protocol 0's text arguments), `int.rs` (integers of any
//! width), `memo.rs`, `runs.rs`,
//! `arena.rs` (building) and `value.rs` (the result and its accessors), `fold.rs` (the
//! hook), `scan.rs` (reading past what a fold stops before), `error.rs`.

mod arena;
mod error;
mod fold;
mod input;
mod int;
mod machine;
mod memo;
mod opcodes;
mod runs;
mod scan;
mod text;
mod value;

use std::io::Read;
use std::path::Path;

pub use error::PickleError;
pub use fold::Fold;
pub use value::{BytesId, DictId, Pickle, SeqId, StrId, Value};

use crate::{Error, Result};

/// Reads one pickle from `reader`, opcode by opcode (buffered here; pass the plain
/// reader), up to its STOP; bytes after the STOP are left unread.
///
/// ```
/// let pickle = gpuscope::formats::pickle::read(&b"\x80\x04}\x94\x8c\x01a\x94K\x01s."[..]).unwrap();
/// assert_eq!(pickle.get(pickle.root(), "a"), Some(gpuscope::formats::pickle::Value::Int(1)));
/// ```
pub fn read<R: Read>(reader: R) -> std::result::Result<Pickle, PickleError> {
    machine::Machine::new(reader, &mut fold::NoFold).run()
}

/// [`read`], offering each container to `fold` as it is stored in another: what `fold`
/// takes over is [`Value::Folded`] in the result and its items are not kept.
pub fn read_folding<R: Read, F: Fold>(
    reader: R,
    fold: &mut F,
) -> std::result::Result<Pickle, PickleError> {
    machine::Machine::new(reader, fold).run()
}

/// [`read_folding`] for a fold that may stop early ([`Fold::stop_before`]), with the
/// whole input checked as the rest of it would be (`scan.rs`) on a second thread from
/// `check`, a second reader of the same bytes, while `reader` is read up to the stop, so
/// that on two cores the check overlaps the reading. The reading's error comes first, as
/// it is the earlier in the input (the check finds nothing before the stop that the
/// reading would not); a reading that does not stop is checked all the same.
pub fn read_folding_checked<R: Read, C: Read + Send, F: Fold>(
    reader: R,
    check: C,
    fold: &mut F,
) -> std::result::Result<Pickle, PickleError> {
    std::thread::scope(|scope| {
        let checking = std::thread::Builder::new()
            .name("pickle check".into())
            .spawn_scoped(scope, || scan::check_whole(check));
        // Without a thread (the system refused one), the reading checks the rest itself.
        let Ok(checking) = checking else {
            return machine::Machine::new(reader, fold).run();
        };
        let read = machine::Machine::new(reader, fold)
            .rest_checked_elsewhere()
            .run()?;
        match checking.join() {
            Ok(checked) => checked.map(|()| read),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Reads the pickle file at `path`. A file that cannot be opened or read is
/// [`Error::Io`]; one that is not a readable plain-data pickle is [`Error::BadInput`] with
/// what is wrong and its byte offset.
pub fn read_path(path: &Path) -> Result<Pickle> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    read(file).map_err(|e| match e {
        PickleError::Io { source, .. } => Error::io(path, source),
        other => Error::bad_input(path, other.to_string()),
    })
}
