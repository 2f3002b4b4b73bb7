//! The opcode interpreter: reads one opcode at a time from the input and applies it to the
//! stack, the marks and the memo, building values in the arenas. Opcodes that would import
//! or call code are refused before their arguments are read.
//!
//! Like Python's unpickler, a MARK fences the stack: opcodes after it see only the values
//! pushed since, until an opcode that collects them (LIST, TUPLE, DICT, APPENDS, SETITEMS,
//! ADDITEMS, FROZENSET, POP_MARK) takes them and removes the mark.
//!
//! Containers stored into others go past the [`Fold`] first, which may take them over.

use std::io::Read;

use super::arena::{Builder, Exhausted, Unfillable};
use super::error::PickleError;
use super::fold::Fold;
use super::input::Input;
use super::int;
use super::memo::Memo;
use super::opcodes::Op;
use super::runs::{memo_fetch, run_length, Run, Runs};
use super::text;
use super::value::{DictId, Pickle, SeqId, Value};

/// The highest protocol this reader (and Python 3.8+) knows.
const HIGHEST_PROTOCOL: u8 = 5;

pub(crate) struct Machine<'f, R, F: ?Sized> {
    input: Input<R>,
    stack: Vec<Value>,
    /// Stack length at each open MARK, and the MARK's byte offset.
    marks: Vec<(usize, u64)>,
    memo: Memo,
    arena: Builder,
    /// Reused for string and text arguments.
    scratch: Vec<u8>,
    /// The opcode being applied and its byte offset, for errors.
    op: Op,
    at: u64,
    fold: &'f mut F,
    /// The runs of memo references met, and the list the last one filled with its run's
    /// number (while nothing else was added to it).
    runs: Runs,
    run_list: Option<(SeqId, u32)>,
    /// That list and the run whose values it still lacks, when the run was met before and the
    /// fold declines items for good: torch stores such a list under `frames` right away,
    /// and a fold that knows the run takes it over without its items ever being copied.
    /// Every opcode but SETITEMS completes the list first ([`Machine::complete_run_list`]).
    pending: Option<(SeqId, Run)>,
    /// Set when the fold has asked to stop before the key just read
    /// ([`Fold::stop_before`]).
    stopping: bool,
    /// Whether the input after a stop is read past here; `false` when another reader
    /// checks the whole input (`read_folding_checked`).
    check_rest: bool,
}

/// Errors are boxed: the opcode loop's results stay a word wide on the way that succeeds.
type Fail = Box<PickleError>;
type Step = Result<(), Fail>;

impl<'f, R: Read, F: Fold> Machine<'f, R, F> {
    pub(crate) fn new(reader: R, fold: &'f mut F) -> Self {
        Machine {
            input: Input::new(reader),
            stack: Vec::new(),
            marks: Vec::new(),
            memo: Memo::default(),
            arena: Builder::default(),
            scratch: Vec::new(),
            op: Op::STOP,
            at: 0,
            fold,
            runs: Runs::default(),
            run_list: None,
            pending: None,
            stopping: false,
            check_rest: true,
        }
    }

    /// Leaves the input after a stop unread: the caller checks it.
    pub(crate) fn rest_checked_elsewhere(mut self) -> Self {
        self.check_rest = false;
        self
    }

    pub(crate) fn run(self) -> Result<Pickle, PickleError> {
        self.run_boxed().map_err(|e| *e)
    }

    fn run_boxed(mut self) -> Result<Pickle, Fail> {
        loop {
            self.pushes()?;
            self.at = self.input.pos();
            let Some(byte) = self.input.byte().map_err(|e| self.io(e))? else {
                return Err(Box::new(if self.at == 0 {
                    PickleError::NotAPickle {
                        what: "the input is empty".into(),
                        offset: 0,
                    }
                } else {
                    PickleError::MissingStop { offset: self.at }
                }));
            };
            let Some(op) = Op::from_byte(byte) else {
                return Err(Box::new(if self.at == 0 {
                    PickleError::NotAPickle {
                        what: format!("byte 0x{byte:02x} is no pickle opcode"),
                        offset: 0,
                    }
                } else {
                    PickleError::UnknownOpcode {
                        byte,
                        offset: self.at,
                    }
                }));
            };
            self.op = op;
            if op == Op::STOP {
                return self.stop();
            }
            if op != Op::SETITEMS {
                self.complete_run_list()?;
            }
            self.step(op)?;
            if F::STOPS && self.stopping {
                return self.stop_early();
            }
        }
    }

    /// Applies the opcodes that only push or memoize a value, as long as the next one is
    /// such an opcode, whole in the buffer, and cannot fail: memo references, small ints,
    /// bools, None, MARK and MEMOIZE are nine in ten opcodes of a snapshot, and here each
    /// costs a pattern match instead of a trip through [`Machine::step`] with its offsets
    /// and error paths. A MARK that opens a run of memo references filling a new list
    /// applies the whole run ([`Machine::list_from_run`]). Anything else, or anything that
    /// would fail, is left to `step`, which reports it.
    fn pushes(&mut self) -> Step {
        const BININT: u8 = Op::BININT.byte();
        const BININT1: u8 = Op::BININT1.byte();
        const BININT2: u8 = Op::BININT2.byte();
        const LONG1: u8 = Op::LONG1.byte();
        const NONE: u8 = Op::NONE.byte();
        const NEWTRUE: u8 = Op::NEWTRUE.byte();
        const NEWFALSE: u8 = Op::NEWFALSE.byte();
        const MARK: u8 = Op::MARK.byte();
        const MEMOIZE: u8 = Op::MEMOIZE.byte();
        loop {
            let buffered = self.input.buffered();
            if let Some((key, len)) = memo_fetch(buffered) {
                let Some(value) = self.memo.get(key) else {
                    return Ok(());
                };
                self.stack.push(value);
                self.input.consume(len);
                continue;
            }
            let (value, len) = match *buffered {
                [BININT1, v, ..] => (Value::Int(v.into()), 2),
                [BININT2, a, b, ..] => (Value::Int(u16::from_le_bytes([a, b]).into()), 3),
                [BININT, a, b, c, d, ..] => {
                    (Value::Int(i32::from_le_bytes([a, b, c, d]).into()), 5)
                }
                [LONG1, n @ 1..=8, ref rest @ ..] if rest.len() >= usize::from(n) => {
                    let n = usize::from(n);
                    let negative = rest[n - 1] & 0x80 != 0;
                    let mut bytes = [if negative { 0xff } else { 0 }; 8];
                    bytes[..n].copy_from_slice(&rest[..n]);
                    (Value::Int(i64::from_le_bytes(bytes)), 2 + n)
                }
                [NONE, ..] => (Value::None, 1),
                [NEWTRUE, ..] => (Value::Bool(true), 1),
                [NEWFALSE, ..] => (Value::Bool(false), 1),
                [MARK, ..] => {
                    if self.list_from_run()? {
                        continue;
                    }
                    self.marks.push((self.stack.len(), self.input.pos()));
                    self.input.consume(1);
                    continue;
                }
                [MEMOIZE, ..] => match self.stack.last() {
                    Some(&top) if self.stack.len() > self.fence() => {
                        self.memo.put(self.memo.len(), top);
                        self.input.consume(1);
                        continue;
                    }
                    _ => return Ok(()),
                },
                _ => return Ok(()),
            };
            self.stack.push(value);
            self.input.consume(len);
        }
    }

    /// Applies MARK, the memo fetches after it and the APPENDS after them (a run, whole in
    /// the buffer) when the list on top of the stack is new and empty (torch's list of
    /// frames of a trace entry): the fetches' values come from [`Runs`], and when the run
    /// was met before and the fold declines items for good, they are not offered again.
    /// `false`, with nothing applied, when there is no run, the list does not fit or the
    /// run names a key the memo does not have (the opcode loop then reports it).
    fn list_from_run(&mut self) -> Result<bool, Fail> {
        // Most MARKs open the items of a dict (a trace entry): no run to look up there.
        if !matches!(self.stack.last(), Some(Value::List(_))) {
            return Ok(false);
        }
        let rest = self.input.buffered().get(1..).unwrap_or_default();
        let known = self.runs.known(rest, &self.memo);
        let Some(len) = known.map(|(_, len)| len).or_else(|| run_length(rest)) else {
            return Ok(false);
        };
        self.complete_run_list()?;
        let list = match self.stack.last() {
            Some(&Value::List(id)) if self.stack.len() > self.fence() => id,
            _ => return Ok(false),
        };
        if !self.arena.is_empty_seq(list) {
            return Ok(false);
        }
        let run = match known {
            Some((run, _)) => run,
            None => {
                let rest = self.input.buffered().get(1..).unwrap_or_default();
                match self.runs.find(rest, len, &self.memo) {
                    Some(run) => run,
                    None => return Ok(false),
                }
            }
        };
        // Errors from here on are the APPENDS's.
        self.at = self.input.pos() + 1 + len as u64;
        self.op = Op::APPENDS;
        self.input.consume(len + 2);
        if !F::FOLDS {
            self.fill(list, run)?;
        } else if F::ITEMS_ONCE && run.seen {
            self.pending = Some((list, run));
        } else {
            let from = self.stack.len();
            self.stack.extend_from_slice(self.runs.values(&run));
            self.extend_list(list, from)?;
        }
        self.run_list = Some((list, run.number));
        Ok(true)
    }

    /// Gives the list of the last run the values it still lacks, if any.
    #[inline]
    fn complete_run_list(&mut self) -> Step {
        match self.pending.take() {
            Some((list, run)) => self.fill(list, run),
            None => Ok(()),
        }
    }

    /// Appends the values of `run` to `list`, without offering them to the fold.
    fn fill(&mut self, list: SeqId, run: Run) -> Step {
        let from = self.stack.len();
        for &value in self.runs.values(&run) {
            // Items folded since the run was first met are stored as what they became.
            let value = if F::FOLDS {
                self.arena.resolve(value)
            } else {
                value
            };
            self.stack.push(value);
        }
        self.move_to_list(list, from)
    }

    fn step(&mut self, op: Op) -> Step {
        match op {
            Op::PROTO => {
                let [version] = self.args()?;
                if version > HIGHEST_PROTOCOL {
                    return Err(self.bad(format!("unsupported pickle protocol {version}")));
                }
            }
            Op::FRAME => {
                self.args::<8>()?;
            }
            Op::MARK => self.marks.push((self.stack.len(), self.at)),
            Op::POP => {
                // As in Python, POP right after a MARK drops the mark (protocol 0 has no
                // POP_MARK, so its writer pops a recursive tuple's items and mark this way).
                if self
                    .marks
                    .last()
                    .is_some_and(|&(len, _)| len == self.stack.len())
                {
                    self.marks.pop();
                } else {
                    self.pop()?;
                }
            }
            Op::POP_MARK => {
                let mark = self.pop_mark()?;
                self.stack.truncate(mark);
            }
            Op::DUP => {
                let top = self.peek()?;
                self.stack.push(top);
            }

            Op::NONE => self.stack.push(Value::None),
            Op::NEWTRUE => self.stack.push(Value::Bool(true)),
            Op::NEWFALSE => self.stack.push(Value::Bool(false)),
            Op::INT => {
                self.text_line()?;
                let value = match self.scratch.as_slice() {
                    b"00" => Value::Bool(false),
                    b"01" => Value::Bool(true),
                    digits => self.int_text(digits)?,
                };
                self.stack.push(value);
            }
            Op::LONG => {
                self.text_line()?;
                let digits = self.scratch.strip_suffix(b"L").unwrap_or(&self.scratch);
                let value = self.int_text(digits)?;
                self.stack.push(value);
            }
            Op::BININT => {
                let value = i32::from_le_bytes(self.args()?);
                self.stack.push(Value::Int(value.into()));
            }
            Op::BININT1 => {
                let [value] = self.args()?;
                self.stack.push(Value::Int(value.into()));
            }
            Op::BININT2 => {
                let value = u16::from_le_bytes(self.args()?);
                self.stack.push(Value::Int(value.into()));
            }
            Op::LONG1 => {
                let [len] = self.args()?;
                self.long(len.into())?;
            }
            Op::LONG4 => {
                let len = i32::from_le_bytes(self.args()?);
                let len = self.length(len.into())?;
                self.long(len)?;
            }
            Op::FLOAT => {
                self.text_line()?;
                let value = text::parse_float(&self.scratch)
                    .ok_or_else(|| self.bad("not a float".into()))?;
                self.stack.push(Value::Float(value));
            }
            Op::BINFLOAT => {
                let value = f64::from_be_bytes(self.args()?);
                self.stack.push(Value::Float(value));
            }

            Op::STRING => {
                self.text_line()?;
                let bytes = text::unquote_string(&self.scratch).map_err(|w| self.bad(w.into()))?;
                self.scratch = bytes;
                self.push_py2_str()?;
            }
            Op::BINSTRING => {
                let len = i32::from_le_bytes(self.args()?);
                let len = self.length(len.into())?;
                self.read_scratch(len)?;
                self.push_py2_str()?;
            }
            Op::SHORT_BINSTRING => {
                let [len] = self.args()?;
                self.read_scratch(len.into())?;
                self.push_py2_str()?;
            }
            Op::UNICODE => {
                self.text_line()?;
                let text =
                    text::raw_unicode_escape(&self.scratch).map_err(|w| self.bad(w.into()))?;
                let value = self.arena.intern(&text).map_err(|e| self.exhausted(e))?;
                self.push_text(value);
            }
            Op::SHORT_BINUNICODE => {
                let [len] = self.args()?;
                self.unicode(len.into())?;
            }
            Op::BINUNICODE => {
                let len = u32::from_le_bytes(self.args()?);
                self.unicode(len.into())?;
            }
            Op::BINUNICODE8 => {
                let len = u64::from_le_bytes(self.args()?);
                self.unicode(len)?;
            }
            Op::SHORT_BINBYTES => {
                let [len] = self.args()?;
                self.bytes(len.into())?;
            }
            Op::BINBYTES => {
                let len = u32::from_le_bytes(self.args()?);
                self.bytes(len.into())?;
            }
            Op::BINBYTES8 | Op::BYTEARRAY8 => {
                let len = u64::from_le_bytes(self.args()?);
                self.bytes(len)?;
            }

            Op::EMPTY_LIST | Op::EMPTY_SET => self.push_seq(self.stack.len(), Value::List)?,
            Op::EMPTY_TUPLE => self.push_seq(self.stack.len(), Value::Tuple)?,
            Op::LIST | Op::FROZENSET | Op::TUPLE => {
                let mark = self.pop_mark()?;
                let kind = if op == Op::TUPLE {
                    Value::Tuple
                } else {
                    Value::List
                };
                self.push_seq(mark, kind)?;
            }
            Op::TUPLE1 | Op::TUPLE2 | Op::TUPLE3 => {
                let n = match op {
                    Op::TUPLE1 => 1,
                    Op::TUPLE2 => 2,
                    _ => 3,
                };
                let start = self.stack.len().saturating_sub(n);
                if start < self.fence() || self.stack.len() < n {
                    return Err(self.underflow());
                }
                self.push_seq(start, Value::Tuple)?;
            }
            Op::APPEND => {
                let len = self.stack.len();
                if len <= self.fence() {
                    return Err(self.underflow());
                }
                let list = self.list_below(len - 1)?;
                self.extend_list(list, len - 1)?;
            }
            Op::APPENDS | Op::ADDITEMS => {
                let mark = self.pop_mark()?;
                let list = self.list_below(mark)?;
                self.extend_list(list, mark)?;
            }

            Op::EMPTY_DICT => {
                let id = self.arena.new_dict().map_err(|e| self.exhausted(e))?;
                self.stack.push(Value::Dict(id));
            }
            Op::DICT => {
                let mark = self.pop_mark()?;
                self.check_pairs(mark)?;
                let id = self.arena.new_dict().map_err(|e| self.exhausted(e))?;
                self.set_items(id, mark)?;
                self.stack.push(Value::Dict(id));
            }
            Op::SETITEM => {
                let len = self.stack.len();
                if len < self.fence() + 3 {
                    return Err(self.underflow());
                }
                let id = self.dict_at(len - 3)?;
                self.set_items(id, len - 2)?;
            }
            Op::SETITEMS => {
                let mark = self.pop_mark()?;
                self.check_pairs(mark)?;
                if mark <= self.fence() {
                    return Err(self.underflow());
                }
                let id = self.dict_at(mark - 1)?;
                self.set_items(id, mark)?;
            }

            Op::PUT => {
                self.text_line()?;
                let key = self.memo_key_text()?;
                self.put(key)?;
            }
            Op::BINPUT => {
                let [key] = self.args()?;
                self.put(key.into())?;
            }
            Op::LONG_BINPUT => {
                let key = u32::from_le_bytes(self.args()?);
                self.put(key.into())?;
            }
            Op::MEMOIZE => {
                let key = self.memo.len();
                self.put(key)?;
            }
            Op::GET => {
                self.text_line()?;
                let key = self.memo_key_text()?;
                self.get(key)?;
            }
            Op::BINGET => {
                let [key] = self.args()?;
                self.get(key.into())?;
            }
            Op::LONG_BINGET => {
                let key = u32::from_le_bytes(self.args()?);
                self.get(key.into())?;
            }

            // STOP is handled by `run`.
            Op::STOP => {}
            // Refused before their arguments are read.
            Op::PERSID
            | Op::BINPERSID
            | Op::REDUCE
            | Op::BUILD
            | Op::GLOBAL
            | Op::STACK_GLOBAL
            | Op::INST
            | Op::OBJ
            | Op::NEWOBJ
            | Op::NEWOBJ_EX
            | Op::EXT1
            | Op::EXT2
            | Op::EXT4
            | Op::NEXT_BUFFER
            | Op::READONLY_BUFFER => return Err(self.refused()),
        }
        Ok(())
    }

    /// Ends the read before the key on top of the stack, as the fold asked: the pairs
    /// before it go into the outermost dict, which is the result, and the rest of the
    /// input is read past (`scan.rs`).
    fn stop_early(mut self) -> Result<Pickle, Fail> {
        self.stack.pop();
        self.complete_run_list()?;
        let root = self.dict_at(0)?;
        self.set_items(root, 1)?;
        if self.check_rest {
            super::scan::check_rest(&mut self.input).map_err(Box::new)?;
        }
        let root = self.arena.resolve(Value::Dict(root));
        Ok(self.arena.finish(root))
    }

    fn stop(mut self) -> Result<Pickle, Fail> {
        if let Some(&(_, mark_offset)) = self.marks.last() {
            return Err(Box::new(PickleError::UnclosedMark {
                offset: self.at,
                mark_offset,
            }));
        }
        self.complete_run_list()?;
        let root = self.pop()?;
        if !self.stack.is_empty() {
            return Err(Box::new(PickleError::LeftoverValues {
                extra: self.stack.len(),
                offset: self.at,
            }));
        }
        let root = self.arena.resolve(root);
        Ok(self.arena.finish(root))
    }

    // ---- the stack and its marks

    /// Stack length at the innermost open MARK: values below it are out of reach.
    fn fence(&self) -> usize {
        self.marks.last().map_or(0, |&(len, _)| len)
    }

    fn pop(&mut self) -> Result<Value, Fail> {
        if self.stack.len() <= self.fence() {
            return Err(self.underflow());
        }
        self.stack.pop().ok_or_else(|| self.underflow())
    }

    fn peek(&self) -> Result<Value, Fail> {
        match self.stack.last() {
            Some(&v) if self.stack.len() > self.fence() => Ok(v),
            _ => Err(self.underflow()),
        }
    }

    /// Closes the innermost MARK and returns where its values start on the stack.
    fn pop_mark(&mut self) -> Result<usize, Fail> {
        let (mark, _) = self.marks.pop().ok_or_else(|| {
            Box::new(PickleError::NoMark {
                opcode: self.op.name(),
                offset: self.at,
            })
        })?;
        // Values below a mark are fenced off, so the stack never shrinks below one; the
        // `min` keeps `drain(mark..)` safe even so.
        Ok(mark.min(self.stack.len()))
    }

    /// The list (or set) just below stack position `pos`, which must be within reach.
    fn list_below(&self, pos: usize) -> Result<SeqId, Fail> {
        if pos <= self.fence() {
            return Err(self.underflow());
        }
        match self.stack.get(pos - 1) {
            Some(&Value::List(id)) => Ok(id),
            Some(&other) => Err(self.wrong_kind("a list or set", other)),
            None => Err(self.underflow()),
        }
    }

    fn dict_at(&self, pos: usize) -> Result<DictId, Fail> {
        match self.stack.get(pos) {
            Some(&Value::Dict(id)) => Ok(id),
            Some(&other) => Err(self.wrong_kind("a dict", other)),
            None => Err(self.underflow()),
        }
    }

    fn check_pairs(&self, mark: usize) -> Step {
        if (self.stack.len().saturating_sub(mark)) % 2 == 1 {
            return Err(self.bad("an odd number of values for keys and values".into()));
        }
        Ok(())
    }

    /// Sets the key/value pairs on the stack from `from` up into the dict, and drops them.
    fn set_items(&mut self, dict: DictId, from: usize) -> Step {
        let end = self.stack.len();
        if F::FOLDS {
            for k in (from + 1..end).step_by(2) {
                let key = self.stack[k - 1];
                if let Some(folded) = self.offer(Some(key), self.stack[k], Value::Dict(dict))? {
                    self.stack[k] = folded;
                }
            }
            self.arena.release_folded();
            // Stored, not taken over.
            self.complete_run_list()?;
        }
        let pairs = self.stack.get(from..).unwrap_or_default();
        self.arena
            .dict_extend(dict, pairs)
            .map_err(|e| self.unfillable(e, "a dict"))?;
        self.stack.truncate(from);
        Ok(())
    }

    /// Appends the values on the stack from `from` up to the list, and drops them.
    fn extend_list(&mut self, list: SeqId, from: usize) -> Step {
        if self.run_list.is_some_and(|(filled, _)| filled == list) {
            self.run_list = None;
        }
        if F::FOLDS {
            for k in from..self.stack.len() {
                if let Some(folded) = self.offer(None, self.stack[k], Value::List(list))? {
                    self.stack[k] = folded;
                }
            }
            self.arena.release_folded();
        }
        self.move_to_list(list, from)
    }

    /// Appends the values on the stack from `from` up to the list as they are, and drops
    /// them.
    fn move_to_list(&mut self, list: SeqId, from: usize) -> Step {
        let items = self.stack.get(from..).unwrap_or_default();
        self.arena
            .seq_extend(list, items)
            .map_err(|e| self.unfillable(e, "a list"))?;
        self.stack.truncate(from);
        Ok(())
    }

    /// Offers `value`, about to be stored into `into`, to the fold; what to store
    /// instead, if anything (the stack is written only then: rewriting every item with
    /// itself costs a store-forwarding stall per item).
    #[inline(always)]
    fn offer(
        &mut self,
        key: Option<Value>,
        value: Value,
        into: Value,
    ) -> Result<Option<Value>, Fail> {
        // Most values stored are numbers and strings: no call for those.
        if !matches!(value, Value::List(_) | Value::Tuple(_) | Value::Dict(_)) {
            return Ok(None);
        }
        self.offer_container(key, value, into)
    }

    /// [`Machine::offer`] of a list, tuple or dict.
    fn offer_container(
        &mut self,
        key: Option<Value>,
        value: Value,
        into: Value,
    ) -> Result<Option<Value>, Fail> {
        let resolved = self.arena.resolve(value);
        if let Value::Folded(_) = resolved {
            return Ok(Some(resolved));
        }
        let into_itself = match (value, into) {
            (Value::List(a) | Value::Tuple(a), Value::List(b)) => a == b,
            (Value::Dict(a), Value::Dict(b)) => a == b,
            _ => false,
        };
        if into_itself {
            return Ok(None);
        }
        let token = match (self.run_list, value) {
            (Some((filled, run)), Value::List(id)) if id == filled => {
                match self.fold.fold_run(key, run) {
                    Some(token) => {
                        // Taken over: the values it lacked are not needed.
                        if self.pending.is_some_and(|(pending, _)| pending == id) {
                            self.pending = None;
                        }
                        Some(token)
                    }
                    None => {
                        self.complete_run_list()?;
                        let token = self.fold.fold(&self.arena.pickle, key, value);
                        if let Some(token) = token {
                            self.fold.folded_run(key, run, token);
                        }
                        token
                    }
                }
            }
            _ => self.fold.fold(&self.arena.pickle, key, value),
        };
        let Some(token) = token else {
            return Ok(None);
        };
        self.arena.fold(value, token);
        Ok(Some(Value::Folded(token)))
    }

    /// A new sequence of the values on the stack from `from` up, in their place.
    fn push_seq(&mut self, from: usize, kind: fn(SeqId) -> Value) -> Step {
        if F::FOLDS {
            for k in from..self.stack.len() {
                let resolved = self.arena.resolve(self.stack[k]);
                if let Value::Folded(_) = resolved {
                    self.stack[k] = resolved;
                }
            }
        }
        let items = self.stack.get(from..).unwrap_or_default();
        let id = self.arena.new_seq(items).map_err(|e| self.exhausted(e))?;
        self.stack.truncate(from);
        self.stack.push(kind(id));
        Ok(())
    }

    // ---- the memo

    fn put(&mut self, key: u64) -> Step {
        let top = self.peek()?;
        self.memo.put(key, top);
        Ok(())
    }

    fn get(&mut self, key: u64) -> Step {
        let Some(value) = self.memo.get(key) else {
            return Err(Box::new(PickleError::MemoKeyUndefined {
                key,
                offset: self.at,
            }));
        };
        // Not resolved here: a container the fold took over is seen as what it became
        // where it is stored (`offer`, `push_seq`) or returned.
        self.stack.push(value);
        Ok(())
    }

    fn memo_key_text(&self) -> Result<u64, Fail> {
        match text::parse_int(&self.scratch) {
            Ok(key) => u64::try_from(key).map_err(|_| self.bad("negative memo key".into())),
            Err(_) => Err(self.bad("not a memo key".into())),
        }
    }

    // ---- arguments

    /// The opcode's fixed-size argument.
    #[inline(always)]
    fn args<const N: usize>(&mut self) -> Result<[u8; N], Fail> {
        match self.input.array::<N>() {
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => Err(self.truncated()),
            Err(e) => Err(self.io(e)),
        }
    }

    /// The opcode's text argument (protocol 0), into `scratch`.
    fn text_line(&mut self) -> Step {
        match self.input.line(&mut self.scratch) {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.truncated()),
            Err(e) => Err(self.io(e)),
        }
    }

    /// `len` bytes of argument into `scratch`.
    fn read_scratch(&mut self, len: u64) -> Step {
        self.scratch.clear();
        match self.input.read_n(len, &mut self.scratch) {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.truncated()),
            Err(e) => Err(self.io(e)),
        }
    }

    fn length(&self, len: i64) -> Result<u64, Fail> {
        u64::try_from(len).map_err(|_| self.bad(format!("negative length {len}")))
    }

    fn int_text(&self, digits: &[u8]) -> Result<Value, Fail> {
        int::from_decimal(digits).ok_or_else(|| self.bad("not a decimal integer".into()))
    }

    /// A little-endian two's-complement integer of `len` bytes (LONG1, LONG4).
    fn long(&mut self, len: u64) -> Step {
        self.read_scratch(len)?;
        self.stack.push(int::from_le_bytes(&self.scratch));
        Ok(())
    }

    fn unicode(&mut self, len: u64) -> Step {
        self.read_scratch(len)?;
        let text = std::str::from_utf8(&self.scratch).map_err(|_| {
            Box::new(PickleError::InvalidUtf8 {
                opcode: self.op.name(),
                offset: self.at,
            })
        })?;
        let value = self.arena.intern(text).map_err(|e| self.exhausted(e))?;
        self.push_text(value);
        Ok(())
    }

    /// Pushes a string read from the input and, where the next key of the outermost dict
    /// goes, asks the fold whether to stop before it.
    fn push_text(&mut self, value: Value) {
        self.stack.push(value);
        if F::STOPS && self.at_root_key() {
            if let Value::Str(id) = value {
                self.stopping = self.fold.stop_before(&self.arena.pickle, id);
            }
        }
    }

    /// Whether the top of the stack is where the next key of the outermost dict goes, as
    /// far as the stack shows: the dict is its first value, one MARK follows it (SETITEMS:
    /// protocols 1 and up), and pairs fill the rest. A string that is the second item of a
    /// tuple or list being built right there looks the same; the pickle is not read ahead
    /// to tell (see [`Fold::stop_before`]).
    fn at_root_key(&self) -> bool {
        matches!(self.marks.as_slice(), [(1, _)])
            && self.stack.len() % 2 == 0
            && matches!(self.stack.first(), Some(Value::Dict(_)))
    }

    fn bytes(&mut self, len: u64) -> Step {
        let start = self.arena.byte_data().len();
        match self.input.read_n(len, self.arena.byte_data()) {
            Ok(true) => {}
            Ok(false) => return Err(self.truncated()),
            Err(e) => return Err(self.io(e)),
        }
        let value = self
            .arena
            .seal_bytes(start)
            .map_err(|e| self.exhausted(e))?;
        self.stack.push(value);
        Ok(())
    }

    /// A Python 2 `str` in `scratch`: text if it is UTF-8, bytes otherwise.
    fn push_py2_str(&mut self) -> Step {
        let value = match std::str::from_utf8(&self.scratch) {
            Ok(text) => self.arena.intern(text),
            Err(_) => {
                let data = self.arena.byte_data();
                let start = data.len();
                data.extend_from_slice(&self.scratch);
                self.arena.seal_bytes(start)
            }
        }
        .map_err(|e| self.exhausted(e))?;
        self.stack.push(value);
        Ok(())
    }

    // ---- errors at the current opcode

    #[cold]
    fn refused(&self) -> Fail {
        Box::new(self.op.refused_at(self.at))
    }

    fn truncated(&self) -> Fail {
        Box::new(PickleError::Truncated {
            opcode: self.op.name(),
            offset: self.at,
        })
    }

    fn underflow(&self) -> Fail {
        Box::new(PickleError::StackUnderflow {
            opcode: self.op.name(),
            offset: self.at,
        })
    }

    fn bad(&self, what: String) -> Fail {
        Box::new(PickleError::BadArgument {
            opcode: self.op.name(),
            what,
            offset: self.at,
        })
    }

    fn wrong_kind(&self, expected: &'static str, found: Value) -> Fail {
        Box::new(PickleError::WrongKind {
            opcode: self.op.name(),
            expected,
            found: found.type_name(),
            offset: self.at,
        })
    }

    fn exhausted(&self, e: Exhausted) -> Fail {
        Box::new(PickleError::TooMany {
            what: e.0,
            offset: self.at,
        })
    }

    fn unfillable(&self, e: Unfillable, expected: &'static str) -> Fail {
        match e {
            Unfillable::Exhausted(e) => self.exhausted(e),
            Unfillable::Folded => self.wrong_kind(expected, Value::Folded(0)),
        }
    }

    fn io(&self, source: std::io::Error) -> Fail {
        Box::new(PickleError::Io {
            source,
            offset: self.at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::pickle::fold::NoFold;

    #[test]
    fn every_refused_opcode_is_refused_and_no_other() {
        for &op in Op::ALL {
            let input = [0x80, 0x04, op.byte()];
            let err = Machine::new(&input[..], &mut NoFold).run().unwrap_err();
            let refused = matches!(err, PickleError::Refused { opcode, .. } if opcode == op.name());
            assert_eq!(refused, op.refusal().is_some(), "{}: {err}", op.name());
        }
    }
}
