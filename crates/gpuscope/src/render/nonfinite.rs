//! The human report of a non-finite event, written into the run directory when the
//! per-iteration check trips: what went non-finite, the iterations before, and where to
//! look.

use std::io::{self, Write};

use crate::analysis::report::nonfinite::{diagnose, Diagnosis};
use crate::model::health::NonfiniteEvent;

use super::{paragraph, right_align, table, write_table};

/// Components shown side by side in the history table; more would not fit 80 columns.
const HISTORY_COLUMNS: usize = 6;

/// The report on `event` with its diagnosis, as the bytes of the file written beside it.
pub fn report_of(event: &NonfiniteEvent, width: u16) -> io::Result<Vec<u8>> {
    let mut text = Vec::new();
    nonfinite_report(event, &diagnose(event), width, &mut text)?;
    Ok(text)
}

/// The report on `event`, `width` columns wide.
pub fn nonfinite_report(
    event: &NonfiniteEvent,
    diagnosis: &Diagnosis,
    width: u16,
    out: &mut dyn Write,
) -> io::Result<()> {
    let when = chrono::DateTime::from_timestamp(event.time as i64, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default();
    writeln!(
        out,
        "Non-finite values at iteration {} (rank {}), {when}",
        event.iteration, event.rank
    )?;
    writeln!(out)?;
    match &diagnosis.first_component {
        Some(first) => {
            let value = event
                .losses
                .get(first)
                .map_or("?".to_owned(), |&v| number(v));
            let others: Vec<&str> = event
                .nonfinite_components
                .iter()
                .map(String::as_str)
                .filter(|c| c != first)
                .collect();
            let also = if others.is_empty() {
                String::new()
            } else {
                format!(" Also non-finite: {}.", others.join(", "))
            };
            paragraph(
                out,
                &format!("First non-finite loss component: {first} = {value}.{also}"),
                width,
            )?;
        }
        None => paragraph(out, "Every loss component was finite.", width)?,
    }
    let norm = event.grad_norm.map_or("not checked".to_owned(), number);
    writeln!(out, "Global gradient norm: {norm}")?;
    parameters(event, width, out)?;
    history(event, width, out)?;
    writeln!(out)?;
    paragraph(out, &diagnosis.advice, width)?;
    let action = match event.action.as_str() {
        "raise" => "stop: gpuscope raised NonfiniteError",
        "skip" => "skip the step: its gradients were dropped before optimizer.step()",
        _ => "continue",
    };
    writeln!(out)?;
    writeln!(out, "Training was told to {action}.")
}

fn parameters(event: &NonfiniteEvent, width: u16, out: &mut dyn Write) -> io::Result<()> {
    if event.nonfinite_parameters.is_empty() {
        return match event.grad_norm {
            Some(n) if !n.is_finite() => paragraph(
                out,
                "No gradient holds NaN or Inf: their norm overflowed (gradients too large \
                 to square in their dtype).",
                width,
            ),
            Some(_) => writeln!(out, "Every gradient was finite."),
            None => Ok(()),
        };
    }
    writeln!(out)?;
    writeln!(
        out,
        "Parameters with non-finite gradients ({} of {} with a gradient):",
        event.nonfinite_parameters.len(),
        event.parameters_checked
    )?;
    let mut t = table(width);
    t.set_header(vec!["parameter", "NaN", "Inf", "elements"]);
    for p in &event.nonfinite_parameters {
        let count = |n: u64| match (p.counted, n) {
            (true, n) => n.to_string(),
            (false, 0) => "–".to_owned(),
            (false, _) => "some".to_owned(),
        };
        t.add_row(vec![
            p.name.clone(),
            count(p.nan),
            count(p.inf),
            p.elements.to_string(),
        ]);
    }
    right_align(&mut t, &[1, 2, 3]);
    write_table(out, &t)?;
    if event.nonfinite_parameters.iter().any(|p| !p.counted) {
        paragraph(
            out,
            "(\"some\": this check was read at the next record, after these gradients were \
             gone; their norms say which kind, not how many elements)",
            width,
        )?;
    }
    Ok(())
}

/// The loss components of the remembered iterations, this one last.
fn history(event: &NonfiniteEvent, width: u16, out: &mut dyn Write) -> io::Result<()> {
    let mut names: Vec<&str> = event
        .losses
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "total")
        .take(HISTORY_COLUMNS - 1)
        .collect();
    if event.losses.contains_key("total") {
        names.push("total");
    }
    if names.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "Loss components, the last {} iterations:",
        event.history.len() + 1
    )?;
    let mut t = table(width);
    let mut header = vec!["iteration".to_owned()];
    header.extend(names.iter().map(|n| n.to_string()));
    t.set_header(header);
    let rows = event
        .history
        .iter()
        .map(|h| (h.iteration, &h.losses))
        .chain([(event.iteration, &event.losses)]);
    for (iteration, losses) in rows {
        let mut row = vec![iteration.to_string()];
        row.extend(
            names
                .iter()
                .map(|n| losses.get(*n).map_or("–".to_owned(), |&v| number(v))),
        );
        t.add_row(row);
    }
    let columns: Vec<usize> = (0..=names.len()).collect();
    right_align(&mut t, &columns);
    write_table(out, &t)
}

/// A loss value in at most a dozen characters: fixed point for ordinary magnitudes,
/// scientific for the huge and tiny ones a diverging run produces.
fn number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-3..1e6).contains(&v.abs()) {
        format!("{v:.6}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    } else {
        format!("{v:.3e}")
    }
}
