//! Reads past the rest of a pickle without building anything: each opcode must be known
//! and not refused, its argument whole, and a STOP must end it. A read that a fold ends
//! early ([`Fold::stop_before`](super::Fold::stop_before)) runs this over the part it does
//! not read, or over the whole input on a second thread
//! ([`read_folding_checked`](super::read_folding_checked)), so that a file cut short, or
//! holding an opcode that would run code, is still refused there. The stack is not
//! followed: values are not built, so a pickle whose unread part would not unpickle for
//! want of a value (an underflow, a missing memo key) passes.

use std::io::Read;

use super::error::PickleError;
use super::input::Input;
use super::opcodes::{Arg, Op};

/// Reads a whole pickle from `reader` as [`check_rest`] reads the rest of one.
pub(crate) fn check_whole<R: Read>(reader: R) -> Result<(), PickleError> {
    check_rest(&mut Input::new(reader))
}

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
        if op.refusal().is_some() {
            return Err(op.refused_at(at));
        }
        if op == Op::STOP {
            return Ok(());
        }
        let whole = match op.argument() {
            Arg::None => true,
            Arg::Fixed(n) => input.skip(n.into()).map_err(io)?,
            Arg::Line => input.line(&mut line).map_err(io)?,
            arg @ (Arg::Counted(_) | Arg::SignedCounted4) => {
                match counted(input, arg).map_err(io)? {
                    Some(Ok(len)) => input.skip(len).map_err(io)?,
                    Some(Err(len)) => {
                        return Err(PickleError::BadArgument {
                            opcode: op.name(),
                            what: format!("negative length {len}"),
                            offset: at,
                        })
                    }
                    None => false,
                }
            }
        };
        if !whole {
            return Err(PickleError::Truncated {
                opcode: op.name(),
                offset: at,
            });
        }
    }
}

/// Reads the length before an argument laid out as `arg` (counted): `None` if the input
/// ends first, `Err` with the length if it is negative.
fn counted<R: Read>(input: &mut Input<R>, arg: Arg) -> std::io::Result<Option<Result<u64, i64>>> {
    Ok(match arg {
        Arg::Counted(1) => input.array::<1>()?.map(|[n]| Ok(n.into())),
        Arg::Counted(4) => input
            .array::<4>()?
            .map(|b| Ok(u32::from_le_bytes(b).into())),
        Arg::SignedCounted4 => input.array::<4>()?.map(|b| {
            let len = i32::from_le_bytes(b);
            u64::try_from(len).map_err(|_| len.into())
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
                _ if op.refusal().is_some() || matches!(op, Op::STOP) => SLOW,
                Arg::None => 1,
                Arg::Fixed(n) => 1 + n,
                Arg::Counted(1) => COUNTED_1,
                Arg::Counted(4) => COUNTED_4,
                Arg::Counted(_) | Arg::SignedCounted4 | Arg::Line => SLOW,
            };
        }
        byte += 1;
    }
    table
};
const SLOW: u8 = 0;
const COUNTED_1: u8 = 0x81;
const COUNTED_4: u8 = 0x84;

/// The longest opcode with a fixed length: FRAME and BINFLOAT, 1 + 8 bytes.
const LONGEST_FIXED: usize = 9;

/// Consumes the opcodes whole in the buffer that [`SKIPS`] can step over, a table lookup
/// and an add each. Leaves the rest, and the buffer's last bytes, to [`check_rest`].
fn skip_buffered<R: Read>(input: &mut Input<R>) {
    const BINGET: u8 = Op::BINGET.byte();
    const LONG_BINGET: u8 = Op::LONG_BINGET.byte();
    let buf = input.buffered();
    let mut i = 0;
    // A fixed-length opcode at `i` is whole: no check of its end.
    while i + LONGEST_FIXED <= buf.len() {
        let byte = buf[i];
        // Memo fetches are three opcodes in four of a snapshot's trace. Testing for them
        // first makes the next position a predicted branch instead of a wait for the
        // byte and then the table (bench/README.md, "--no-trace").
        if byte == BINGET {
            i += 2;
            continue;
        }
        if byte == LONG_BINGET {
            i += 5;
            continue;
        }
        let len = match SKIPS[usize::from(byte)] {
            SLOW => break,
            COUNTED_1 => 2 + usize::from(buf[i + 1]),
            COUNTED_4 => {
                let n = u32::from_le_bytes([buf[i + 1], buf[i + 2], buf[i + 3], buf[i + 4]]);
                5usize.saturating_add(n as usize)
            }
            fixed => usize::from(fixed),
        };
        if len > buf.len() - i {
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
    fn long_runs_are_stepped_over_to_the_opcode_that_matters() {
        let mut p = Vec::new();
        for _ in 0..40_000 {
            p.extend_from_slice(
                b"h\x01j\x01\x00\x00\x00(\x94\x8c\x03abcX\x02\x00\x00\x00xyG12345678",
            );
        }
        let end = p.len() as u64;
        let ended = |tail: &[u8]| [&p[..], tail].concat();
        assert_eq!(check(&ended(b".")).unwrap(), end + 1);
        let err = check(&ended(b"K\x01R.")).unwrap_err();
        assert!(
            matches!(err, PickleError::Refused { opcode: "REDUCE", offset, .. } if offset == end + 2)
        );
        let err = check(&ended(b"\x8c\x09abc")).unwrap_err();
        assert!(matches!(err, PickleError::Truncated { offset, .. } if offset == end));
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
