//! Why a pickle could not be read. Every variant says where: the byte offset of the opcode
//! being read when the reader stopped.

/// What is wrong with a pickle, and at which byte offset (of the opcode being read).
#[derive(Debug, thiserror::Error)]
pub enum PickleError {
    /// The input does not start like a pickle (empty, or its first byte is no opcode).
    #[error("not a pickle: {what} at byte offset {offset}")]
    NotAPickle {
        /// What was found instead.
        what: String,
        /// Where.
        offset: u64,
    },
    /// An opcode that would run code, or needs something only the writer has; the reader
    /// never executes or imports anything.
    #[error("opcode {opcode} (0x{byte:02x}) at byte offset {offset} {reason}; refused")]
    Refused {
        /// The opcode's name, as `pickletools` spells it.
        opcode: &'static str,
        /// The opcode's byte.
        byte: u8,
        /// Why it is refused.
        reason: &'static str,
        /// Where.
        offset: u64,
    },
    /// A byte that is no opcode of protocols 0–5.
    #[error("unknown opcode byte 0x{byte:02x} at byte offset {offset}")]
    UnknownOpcode {
        /// The byte.
        byte: u8,
        /// Where.
        offset: u64,
    },
    /// The input ended inside an opcode's argument.
    #[error("truncated pickle: ended inside {opcode} at byte offset {offset}")]
    Truncated {
        /// The opcode whose argument is cut short.
        opcode: &'static str,
        /// Where the opcode starts.
        offset: u64,
    },
    /// The input ended between opcodes before a STOP.
    #[error("truncated pickle: ended without STOP at byte offset {offset}")]
    MissingStop {
        /// The length of the input.
        offset: u64,
    },
    /// A memo lookup of a key no PUT defined.
    #[error("memo key {key} not defined at byte offset {offset}")]
    MemoKeyUndefined {
        /// The key.
        key: u64,
        /// Where the lookup's opcode starts.
        offset: u64,
    },
    /// An opcode needs more values than the stack (above the last MARK) holds.
    #[error(
        "stack underflow: {opcode} at byte offset {offset} needs more values than the stack holds"
    )]
    StackUnderflow {
        /// The opcode.
        opcode: &'static str,
        /// Where.
        offset: u64,
    },
    /// An opcode that collects values up to a MARK found no MARK.
    #[error("{opcode} at byte offset {offset} needs a MARK and there is none")]
    NoMark {
        /// The opcode.
        opcode: &'static str,
        /// Where.
        offset: u64,
    },
    /// STOP came while a MARK was still open.
    #[error(
        "STOP at byte offset {offset} with the MARK at byte offset {mark_offset} never closed"
    )]
    UnclosedMark {
        /// Where the STOP is.
        offset: u64,
        /// Where the open MARK is.
        mark_offset: u64,
    },
    /// STOP left more than the one result on the stack.
    #[error("STOP at byte offset {offset} leaves {extra} values on the stack besides the result")]
    LeftoverValues {
        /// How many values are left besides the result.
        extra: usize,
        /// Where the STOP is.
        offset: u64,
    },
    /// An opcode applied to a value of the wrong kind (APPEND to a dict, SETITEM on a list).
    #[error("{opcode} at byte offset {offset} expects {expected}, found {found}")]
    WrongKind {
        /// The opcode.
        opcode: &'static str,
        /// What it needs.
        expected: &'static str,
        /// The Python type name of what it found.
        found: &'static str,
        /// Where.
        offset: u64,
    },
    /// Text that is not valid UTF-8 where a `str` must be.
    #[error("invalid UTF-8 in string at byte offset {offset} ({opcode})")]
    InvalidUtf8 {
        /// The opcode carrying the text.
        opcode: &'static str,
        /// Where the opcode starts.
        offset: u64,
    },
    /// An opcode argument that cannot be used (an unparsable text number, a negative
    /// length, an odd number of items for SETITEMS, an unsupported protocol).
    #[error("bad argument to {opcode} at byte offset {offset}: {what}")]
    BadArgument {
        /// The opcode.
        opcode: &'static str,
        /// What is wrong.
        what: String,
        /// Where.
        offset: u64,
    },
    /// More objects of one kind than the reader's 32-bit ids can number.
    #[error("too many {what} (more than 2^32) at byte offset {offset}")]
    TooMany {
        /// Which kind of object.
        what: &'static str,
        /// Where.
        offset: u64,
    },
    /// The reader under the pickle failed.
    #[error("read error at byte offset {offset}: {source}")]
    Io {
        /// The operating system's error.
        source: std::io::Error,
        /// How far reading had got.
        offset: u64,
    },
}

impl PickleError {
    /// The byte offset of the opcode being read when the reader stopped.
    pub fn offset(&self) -> u64 {
        match self {
            PickleError::NotAPickle { offset, .. }
            | PickleError::Refused { offset, .. }
            | PickleError::UnknownOpcode { offset, .. }
            | PickleError::Truncated { offset, .. }
            | PickleError::MissingStop { offset }
            | PickleError::MemoKeyUndefined { offset, .. }
            | PickleError::StackUnderflow { offset, .. }
            | PickleError::NoMark { offset, .. }
            | PickleError::UnclosedMark { offset, .. }
            | PickleError::LeftoverValues { offset, .. }
            | PickleError::WrongKind { offset, .. }
            | PickleError::InvalidUtf8 { offset, .. }
            | PickleError::BadArgument { offset, .. }
            | PickleError::TooMany { offset, .. }
            | PickleError::Io { offset, .. } => *offset,
        }
    }
}
