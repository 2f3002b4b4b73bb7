//! A reader that hands out one byte per read, so that nothing is ever buffered ahead: the
//! pickle reader's fast paths (runs of pushes, runs of memo references) need their bytes
//! in its buffer, so through this it reads opcode by opcode. Shared by the pickle tests
//! and the fuzz target (`#[path]`), which compare the two readings.

pub struct OneByte<'a>(pub &'a [u8]);

impl std::io::Read for OneByte<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match (self.0.split_first(), buf.first_mut()) {
            (Some((&byte, rest)), Some(slot)) => {
                *slot = byte;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}
