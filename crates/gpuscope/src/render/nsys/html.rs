//! `gpuscope nsys stats --format html`: the report's tables (the same ones as the text,
//! every name whole, kernels with grid and block) and a chart of GPU memory in use over
//! time per device, on one self-contained page.

use std::fmt::Write as _;
use std::io::{self, Write};

use html_escape::encode_text;

use super::parts;
use crate::analysis::nsys::NsysReport;
use crate::analysis::report::timeline::Unit;
use crate::render::html::{page_end, page_start, table_named_by};
use crate::render::svg::{chart, Chart, Line};

/// The page.
pub fn html(r: &NsysReport, out: &mut dyn Write) -> io::Result<()> {
    let version = r.nsys_version.as_deref().unwrap_or("unknown version");
    let meta = format!("Nsight Systems {} export", encode_text(version));
    let mut page = page_start("gpuscope nsys stats", &meta);
    let _ = write!(
        page,
        "<p>{}</p>",
        encode_text(&r.path.display().to_string())
    );
    for part in parts(r, true, usize::MAX) {
        let _ = write!(page, "<h2>{}</h2>", encode_text(&part.title));
        match part.body {
            Ok(t) => {
                let _ = write!(page, "<p class=\"meta\">{}</p>", encode_text(&t.note));
                let header: Vec<&str> = t.header.iter().map(String::as_str).collect();
                // nsys stats' order: the figures, then the name of the row.
                let name = header.len().saturating_sub(1);
                table_named_by(&mut page, &header, &t.rows, name);
            }
            Err(why) => {
                let _ = write!(page, "<p class=\"skipped\">{}</p>", encode_text(&why));
            }
        }
    }
    for d in r.memory_usage.iter().flatten() {
        let x: Vec<i64> = d
            .timeline
            .iter()
            .map(|p| (p.at_us / 1000.0).round() as i64)
            .collect();
        let values: Vec<Option<f64>> = d
            .timeline
            .iter()
            .map(|p| Some(p.in_use_bytes as f64))
            .collect();
        let title = match d.device {
            Some(id) => format!("Memory in use on device {id}"),
            None => "Memory in use".to_owned(),
        };
        let _ = write!(page, "<h3>{}</h3>", encode_text(&title));
        chart(
            &Chart {
                title: &title,
                x_label: "ms",
                x: &x,
                lines: vec![Line {
                    name: "in use",
                    dashed: false,
                    values: &values,
                }],
                stacked: false,
                unit: Unit::Bytes,
                iec_bytes: false,
                markers: Vec::new(),
            },
            &mut page,
        );
    }
    page_end(&mut page);
    out.write_all(page.as_bytes())
}
