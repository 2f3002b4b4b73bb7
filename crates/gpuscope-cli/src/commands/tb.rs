//! `gpuscope tb`: read TensorBoard event files on a headless box.

use gpuscope::render::tb::{self as render, Listing, TextView};
use gpuscope::{load_log_dir, LoadOptions};

use crate::args::{TbArgs, TbFormat};
use crate::{output, Failure};

pub fn run(args: TbArgs) -> Result<(), Failure> {
    // --tags keeps no values; --tag keeps only those tags'; otherwise keep everything.
    let keep_points = if args.tags {
        Some(Vec::new())
    } else if args.tag.is_empty() {
        None
    } else {
        Some(args.tag.clone())
    };
    let options = LoadOptions {
        keep_points,
        keep_going: args.keep_going,
    };
    output::not_an_input(args.output.as_deref(), &[Some(&args.path)])?;
    let mut data = load_log_dir(&args.path, &options, &mut output::progress("reading"))?;
    if let Some(why) = render::no_file_has_records(&args.path, &data.files) {
        return Err(Failure::Usage(why));
    }
    let empty: Vec<String> = data
        .files
        .iter()
        .filter_map(render::empty_file_warning)
        .collect();
    if !args.tag.is_empty() {
        if let Some(wanted) = data.select_tags(&args.tag).first() {
            return Err(Failure::Usage(format!(
                "{}: no tag {wanted:?} (run `gpuscope tb {} --tags` to list them)",
                args.path.display(),
                args.path.display()
            )));
        }
    }
    if !matches!(args.format, TbFormat::Text) {
        // The text lists them with its other notes; JSON and CSV keep stdout for data.
        for line in &empty {
            eprintln!("{line}");
        }
    }
    let listing = Listing {
        data: &data,
        view: if args.tag.is_empty() {
            TextView::Tags
        } else {
            TextView::Series
        },
        tags_only: args.tags,
    };
    output::emit(args.format, args.output.as_deref(), &listing)
}
