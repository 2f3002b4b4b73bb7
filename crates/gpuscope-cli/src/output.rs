//! Where a command's output goes (stdout or `-o FILE`), how wide text may be, and the
//! progress bar shown on stderr while long inputs are parsed.

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;

use gpuscope::{Format, Render};

use crate::Failure;

/// Inputs smaller than this parse too fast for a progress bar to help.
const PROGRESS_MIN_BYTES: u64 = 16 << 20;

/// Writes a command's result as `format` into `-o FILE`, or to stdout when none is given.
/// The file is created at the result's first byte: a result that fails before writing
/// anything leaves no file behind, and an existing file as it was.
pub fn emit(
    format: impl Into<Format>,
    path: Option<&Path>,
    result: &dyn Render,
) -> Result<(), Failure> {
    let (format, width) = (format.into(), text_width());
    match path {
        Some(path) => {
            let mut out = OnFirstWrite { path, file: None };
            result
                .render(format, width, &mut out)
                .and_then(|()| out.file()?.flush())
                .map_err(|e| gpuscope::Error::output(path, e))?;
            Ok(())
        }
        None => {
            let mut out = BufWriter::new(io::stdout().lock());
            result.render(format, width, &mut out)?;
            Ok(out.flush()?)
        }
    }
}

/// A file created when it is first written to.
struct OnFirstWrite<'a> {
    path: &'a Path,
    file: Option<BufWriter<File>>,
}

impl OnFirstWrite<'_> {
    /// The file, created now if it was not yet.
    fn file(&mut self) -> io::Result<&mut BufWriter<File>> {
        if self.file.is_none() {
            self.file = Some(BufWriter::new(File::create(self.path)?));
        }
        Ok(self.file.as_mut().expect("created above"))
    }
}

impl Write for OnFirstWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

/// Refuses an output file that is one of the command's inputs: the input is read first,
/// but the report written over it would leave nothing to read again.
pub fn not_an_input(output: Option<&Path>, inputs: &[Option<&Path>]) -> Result<(), Failure> {
    let Some(output) = output else {
        return Ok(());
    };
    if inputs
        .iter()
        .flatten()
        .any(|input| same_file::is_same_file(output, input).unwrap_or(false))
    {
        return Err(Failure::Usage(format!(
            "{}: the output file is an input; writing there would replace it",
            output.display()
        )));
    }
    Ok(())
}

/// Columns available for text: the terminal's width, or 80 when not writing to one.
pub fn text_width() -> u16 {
    if io::stdout().is_terminal() {
        terminal_size::terminal_size().map_or(80, |(w, _)| w.0)
    } else {
        80
    }
}

/// A byte-progress callback that draws a bar on stderr once the input turns out to be
/// large, and only when stderr is a terminal.
pub fn progress(label: &'static str) -> impl FnMut(u64, u64) {
    let mut bar: Option<indicatif::ProgressBar> = None;
    let terminal = io::stderr().is_terminal();
    move |done, total| {
        if total < PROGRESS_MIN_BYTES || !terminal {
            return;
        }
        let bar = bar.get_or_insert_with(|| {
            let b = indicatif::ProgressBar::new(total);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {eta}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            b.set_message(label);
            b
        });
        bar.set_position(done);
        if done >= total {
            bar.finish_and_clear();
        }
    }
}
