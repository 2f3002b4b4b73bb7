//! Reads past the rest of a pickle without building anything: each opcode must be known
//! and not refused, its argument whole, and a STOP must end it. A read that a fold ends
//! early ([`Fold::stop_before`](super::Fold::stop_before)) runs this over the part it does
//! not read, so that a file cut short, or holding an opcode that would run code, is still
//! refused there. The stack is not followed: values are not built, so a pickle whose
//! unread part would not unpickle for want of a value (an underflow, a missing memo key)
//! passes.

use std::io::Read;

use super::error::PickleError;
use super::input::Input;
use super::opcodes::{Arg, Op};

/// Reads opcodes from `input` up to and including a STOP.
pub(crate) fn check_rest<R: Read>(input: &mut Input<R>) -> Result<(), PickleError> {
    let mut line = Vec::new();
    loop {
        skip_buffered(input);
        let at = input.pos();
        let io = |source| PickleError::Io { source, offset: at };
        let byte = input
            .byte()
            .map_err(io)?
            .ok_or(PickleError::MissingStop { offset: at })?;
        let op = Op::from_byte(byte).ok_or(PickleError::UnknownOpcode { byte, offset: at })?;
        if let Some(refusal) = op.refusal() {
            return Err(PickleError::Refused {
                opcode: op.name(),
                byte,
                reason: refusal.reason(),
                offset: at,
            });
        }
        if op == Op::STOP {
            return Ok(());
        }
        let whole = match op.argument() {
            Arg::None => true,
            Arg::Fixed(n) => input.skip(n.into()).map_err(io)?,
            Arg::Line => input.line(&mut line).map_err(io)?,
            Arg::Counted(width) => match counted(input, op, width).map_err(io)? {
                Some(Ok(len)) => input.skip(len).map_err(io)?,
                Some(Err(len)) => {
                    return Err(PickleError::BadArgument {
                        opcode: op.name(),
                        what: format!("negative length {len}"),
                        offset: at,
                    })
                }
                None => false,
            },
        };
        if !whole {
            return Err(PickleError::Truncated {
                opcode: op.name(),
                offset: at,
            });
        }
    }
}

/// Reads the length before a counted argument: `None` if the input ends first, `Err`
/// with the length if it is negative (BINSTRING's and LONG4's are signed).
fn counted<R: Read>(
    input: &mut Input<R>,
    op: Op,
    width: u8,
) -> std::io::Result<Option<Result<u64, i64>>> {
    Ok(match width {
        1 => input.array::<1>()?.map(|[n]| Ok(n.into())),
        4 => input.array::<4>()?.map(|b| {
            let len = u32::from_le_bytes(b);
            match op {
                Op::BINSTRING | Op::LONG4 if len > i32::MAX as u32 => {
                    Err(i32::from_le_bytes(b).into())
                }
                _ => Ok(len.into()),
            }
        }),
        _ => input.array::<8>()?.map(|b| Ok(u64::from_le_bytes(b))),
    })
}

/// What [`skip_buffered`] makes of each byte: the opcode's whole length when it is fixed
/// (1 to 9 bytes); [`COUNTED_1`] or [`COUNTED_4`] for a 1- or 4-byte length, then that
/// many bytes; [`SLOW`] for what only [`check_rest`] reads (STOP, a refused or unknown
/// byte, a text argument, a signed or 8-byte length).
const SKIPS: [u8; 256] = {
    let mut table = [SLOW; 256];
    let mut byte = 0;
    while byte < 256 {
        if let Some(op) = Op::from_byte(byte as u8) {
            table[byte] = match op.argument() {
                _ if op.refusal().is_some() => SLOW,
                _ if matches!(op, Op::STOP | Op::BINSTRING | Op::LONG4) => SLOW,
                Arg::None => 1,
                Arg::Fixed(n) => 1 + n,
                Arg::Counted(1) => COUNTED_1,
                Arg::Counted(4) => COUNTED_4,
                Arg::Counted(_) | Arg::Line => SLOW,
            };
        }
        byte += 1;
    }
    table
};
const SLOW: u8 = 0;
const COUNTED_1: u8 = 0x81;
const COUNTED_4: u8 = 0x84;

/// Consumes the opcodes whole in the buffer that [`SKIPS`] can step over: a table lookup
/// and an add each, with no branch on the opcode (most of a snapshot's trace is two-byte
/// memo fetches and one-byte MARKs and MEMOIZEs). Leaves the rest, and an opcode across
/// the buffer's end, to [`check_rest`].
fn skip_buffered<R: Read>(input: &mut Input<R>) {
    let buf = input.buffered();
    let mut i = 0;
    while let Some(&byte) = buf.get(i) {
        let len = match SKIPS[usize::from(byte)] {
            SLOW => break,
            COUNTED_1 => match buf.get(i + 1) {
                Some(&n) => 2 + usize::from(n),
                None => break,
            },
            COUNTED_4 => match buf.get(i + 1..i + 5) {
                Some(&[a, b, c, d]) => 5 + u32::from_le_bytes([a, b, c, d]) as usize,
                _ => break,
            },
            fixed => usize::from(fixed),
        };
        if i + len > buf.len() {
            break;
        }
        i += len;
    }
    input.consume(i);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(bytes: &[u8]) -> Result<u64, PickleError> {
        let mut input = Input::new(bytes);
        check_rest(&mut input).map(|()| input.pos())
    }

    #[test]
    fn stops_after_the_stop_and_reads_every_argument_layout() {
        let mut p = vec![0x95];
        p.extend_from_slice(&5u64.to_le_bytes());
        p.extend_from_slice(b"K\x07h\x01]\x94(I12\n");
        p.extend_from_slice(b"X\x03\x00\x00\x00abc\x8c\x02hie.");
        p.extend_from_slice(b"trailing");
        assert_eq!(check(&p).unwrap(), p.len() as u64 - 8);
    }

    #[test]
    fn code_a_cut_and_a_negative_length_are_refused_where_they_are() {
        let err = check(b"K\x01\x93R.").unwrap_err();
        assert!(matches!(
            err,
            PickleError::Refused {
                opcode: "STACK_GLOBAL",
                offset: 2,
                ..
            }
        ));
        let err = check(b"K\x01X\x09\x00\x00\x00abc").unwrap_err();
        assert!(matches!(
            err,
            PickleError::Truncated {
                opcode: "BINUNICODE",
                offset: 2
            }
        ));
        let err = check(b"K\x01").unwrap_err();
        assert!(matches!(err, PickleError::MissingStop { offset: 2 }));
        let err = check(b"T\xff\xff\xff\xffab.").unwrap_err();
        assert!(matches!(
            err,
            PickleError::BadArgument {
                opcode: "BINSTRING",
                ..
            }
        ));
        let err = check(b"K\x01\xff").unwrap_err();
        assert!(matches!(
            err,
            PickleError::UnknownOpcode {
                byte: 0xff,
                offset: 2
            }
        ));
    }
}
