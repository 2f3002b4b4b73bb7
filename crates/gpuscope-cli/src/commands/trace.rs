//! `gpuscope trace`: analyse PyTorch profiler traces.

use gpuscope::analysis::trace::report::report;
use gpuscope::analysis::trace::scope::Clock;
use gpuscope::render::trace as render;
use gpuscope::trace::load_traces;

use crate::args::{TraceArgs, TraceFormat};
use crate::{output, Failure};

pub fn run(args: TraceArgs) -> Result<(), Failure> {
    let loaded = load_traces(&args.path, &mut output::progress("reading"))?;
    for why in &loaded.skipped {
        eprintln!("skipped {why}");
    }
    let (clock, clock_name) = if args.hta_compat {
        (Clock::HtaRounded, "hta-rounded")
    } else {
        (Clock::Exact, "exact")
    };
    let ranks = report(&loaded.traces, clock, args.top);
    let mut out = output::open(args.output.as_deref())?;
    match args.format {
        TraceFormat::Text => render::text(&ranks, output::text_width(), &mut out)?,
        TraceFormat::Json => render::json(&ranks, clock_name, &mut out)?,
    }
    out.flush()?;
    Ok(())
}
