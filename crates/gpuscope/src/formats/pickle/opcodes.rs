//! The pickle opcodes of protocols 0–5, one table: byte, name (as `pickletools` spells it)
//! and whether the reader builds data from it or refuses it.
//!
//! Owns only the table; what each opcode does is in `machine.rs`.

use super::error::PickleError;

/// Why an opcode is refused: each reason is the rest of the sentence "opcode X at byte
/// offset N …; refused".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Imports a module attribute, or calls or builds an object of some class.
    Code,
    /// Refers to an object by a persistent id that only the writer's program can resolve.
    PersistentId,
    /// Takes an out-of-band buffer (protocol 5), and the reader is given none.
    Buffer,
}

impl Refusal {
    /// The middle of the refusal message.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Refusal::Code => "would import or call code",
            Refusal::PersistentId => "refers to a persistent id only the writer can resolve",
            Refusal::Buffer => "needs an out-of-band buffer and none is supplied",
        }
    }
}

/// How an opcode's argument is laid out after it, for reading past it unread
/// (`scan.rs`); the interpreter reads each argument in its own code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arg {
    /// No argument.
    None,
    /// This many bytes.
    Fixed(u8),
    /// A little-endian length of this many bytes (1, 4 or 8), then that many bytes.
    Counted(u8),
    /// A little-endian signed 4-byte length, then that many bytes (BINSTRING, LONG4).
    SignedCounted4,
    /// Text through a newline (protocol 0); GLOBAL's two lines are never read past.
    Line,
}

macro_rules! opcodes {
    ($($name:ident = $byte:literal $(, $refusal:ident)?;)*) => {
        /// Every opcode of pickle protocols 0–5, named as in Python's `pickletools`.
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Op {
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                $name,
            )*
        }

        impl Op {
            /// Every opcode, in table order.
            #[cfg(test)]
            pub(crate) const ALL: &'static [Op] = &[$(Op::$name,)*];

            /// The opcode a byte stands for, if any (a table lookup: it runs for every
            /// opcode read).
            #[inline]
            pub(crate) const fn from_byte(byte: u8) -> Option<Op> {
                const BY_BYTE: [Option<Op>; 256] = {
                    let mut table = [None; 256];
                    $(table[$byte as usize] = Some(Op::$name);)*
                    table
                };
                BY_BYTE[byte as usize]
            }

            /// The byte that stands for the opcode.
            pub(crate) const fn byte(self) -> u8 {
                match self {
                    $(Op::$name => $byte,)*
                }
            }

            /// The opcode's name, as `pickletools` spells it.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Op::$name => stringify!($name),)*
                }
            }

            /// Why the reader refuses this opcode, or `None` for a data opcode.
            pub(crate) const fn refusal(self) -> Option<Refusal> {
                match self {
                    $($(Op::$name => Some(Refusal::$refusal),)?)*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }
    };
}

opcodes! {
    // Protocol 0 (text arguments end in a newline).
    MARK = b'(';
    STOP = b'.';
    POP = b'0';
    POP_MARK = b'1';
    DUP = b'2';
    FLOAT = b'F';
    INT = b'I';
    LONG = b'L';
    NONE = b'N';
    PERSID = b'P', PersistentId;
    REDUCE = b'R', Code;
    STRING = b'S';
    UNICODE = b'V';
    APPEND = b'a';
    BUILD = b'b', Code;
    GLOBAL = b'c', Code;
    DICT = b'd';
    GET = b'g';
    INST = b'i', Code;
    LIST = b'l';
    PUT = b'p';
    SETITEM = b's';
    TUPLE = b't';
    // Protocol 1 (binary arguments).
    BINFLOAT = b'G';
    BININT = b'J';
    BININT1 = b'K';
    BININT2 = b'M';
    BINPERSID = b'Q', PersistentId;
    BINSTRING = b'T';
    SHORT_BINSTRING = b'U';
    BINUNICODE = b'X';
    EMPTY_LIST = b']';
    APPENDS = b'e';
    BINGET = b'h';
    LONG_BINGET = b'j';
    OBJ = b'o', Code;
    BINPUT = b'q';
    LONG_BINPUT = b'r';
    SETITEMS = b'u';
    EMPTY_TUPLE = b')';
    EMPTY_DICT = b'}';
    // Protocol 2.
    PROTO = 0x80;
    NEWOBJ = 0x81, Code;
    EXT1 = 0x82, Code;
    EXT2 = 0x83, Code;
    EXT4 = 0x84, Code;
    TUPLE1 = 0x85;
    TUPLE2 = 0x86;
    TUPLE3 = 0x87;
    NEWTRUE = 0x88;
    NEWFALSE = 0x89;
    LONG1 = 0x8a;
    LONG4 = 0x8b;
    // Protocol 3.
    BINBYTES = b'B';
    SHORT_BINBYTES = b'C';
    // Protocol 4.
    SHORT_BINUNICODE = 0x8c;
    BINUNICODE8 = 0x8d;
    BINBYTES8 = 0x8e;
    EMPTY_SET = 0x8f;
    ADDITEMS = 0x90;
    FROZENSET = 0x91;
    NEWOBJ_EX = 0x92, Code;
    STACK_GLOBAL = 0x93, Code;
    MEMOIZE = 0x94;
    FRAME = 0x95;
    // Protocol 5.
    BYTEARRAY8 = 0x96;
    NEXT_BUFFER = 0x97, Buffer;
    READONLY_BUFFER = 0x98, Buffer;
}

impl Op {
    /// The error for this opcode, refused at byte `offset` (the reason is empty for a
    /// data opcode).
    pub(crate) fn refused_at(self, offset: u64) -> PickleError {
        PickleError::Refused {
            opcode: self.name(),
            byte: self.byte(),
            reason: self.refusal().map_or("", Refusal::reason),
            offset,
        }
    }

    /// The layout of the opcode's argument.
    pub(crate) const fn argument(self) -> Arg {
        match self {
            Op::PROTO | Op::BININT1 | Op::BINGET | Op::BINPUT | Op::EXT1 => Arg::Fixed(1),
            Op::BININT2 | Op::EXT2 => Arg::Fixed(2),
            Op::BININT | Op::LONG_BINGET | Op::LONG_BINPUT | Op::EXT4 => Arg::Fixed(4),
            Op::BINFLOAT | Op::FRAME => Arg::Fixed(8),
            Op::SHORT_BINSTRING | Op::SHORT_BINUNICODE | Op::SHORT_BINBYTES | Op::LONG1 => {
                Arg::Counted(1)
            }
            Op::BINUNICODE | Op::BINBYTES => Arg::Counted(4),
            Op::BINSTRING | Op::LONG4 => Arg::SignedCounted4,
            Op::BINUNICODE8 | Op::BINBYTES8 | Op::BYTEARRAY8 => Arg::Counted(8),
            Op::INT
            | Op::LONG
            | Op::FLOAT
            | Op::STRING
            | Op::UNICODE
            | Op::PUT
            | Op::GET
            | Op::PERSID
            | Op::GLOBAL
            | Op::INST => Arg::Line,
            _ => Arg::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_every_opcode_of_protocol_5_once() {
        // pickletools.opcodes has 68 entries in Python 3.8 and later.
        assert_eq!(Op::ALL.len(), 68);
        for &op in Op::ALL {
            assert_eq!(Op::from_byte(op.byte()), Some(op), "{}", op.name());
        }
        let mut bytes: Vec<u8> = Op::ALL.iter().map(|op| op.byte()).collect();
        bytes.sort_unstable();
        bytes.dedup();
        assert_eq!(bytes.len(), Op::ALL.len());
    }

    #[test]
    fn code_running_opcodes_are_refused() {
        let refused: Vec<&str> = Op::ALL
            .iter()
            .filter(|op| op.refusal().is_some())
            .map(|op| op.name())
            .collect();
        assert_eq!(
            refused,
            [
                "PERSID",
                "REDUCE",
                "BUILD",
                "GLOBAL",
                "INST",
                "BINPERSID",
                "OBJ",
                "NEWOBJ",
                "EXT1",
                "EXT2",
                "EXT4",
                "NEWOBJ_EX",
                "STACK_GLOBAL",
                "NEXT_BUFFER",
                "READONLY_BUFFER"
            ]
        );
        assert_eq!(Op::from_byte(0xff), None);
    }
}
