//! `gpuscope compare` as one self-contained page: the gate first, then each rank's figures
//! and verdicts and the sites at the snapshot peaks. Every string from the runs (paths,
//! call sites, the verdicts' words) is escaped.

use std::fmt::Write as _;
use std::io::{self, Write};

use html_escape::encode_text;

use super::{figure_rows, gate_headline, site_rows, step_label, verdict};
use crate::model::compare::RunComparison;
use crate::render::html::{page_end, page_start, table, table_named_by};

/// The page.
pub fn html(c: &RunComparison, out: &mut dyn Write) -> io::Result<()> {
    let meta = format!(
        "BASE {} · NEW {}",
        encode_text(&c.base.path.display().to_string()),
        encode_text(&c.new.path.display().to_string())
    );
    let mut page = page_start("gpuscope compare", &meta);
    let class = if c.passed() { "ok" } else { "leak" };
    let _ = write!(
        page,
        "<div class=\"verdict {class}\"><b>Gate:</b> {}",
        encode_text(&gate_headline(c))
    );
    if !c.regressions.is_empty() || !c.unchecked.is_empty() {
        page.push_str("<ul>");
        for r in &c.regressions {
            let _ = write!(page, "<li>{}</li>", encode_text(&r.line));
        }
        for u in &c.unchecked {
            let line = format!("not checked: {}: {}", u.rule, u.reason);
            let _ = write!(page, "<li>{}</li>", encode_text(&line));
        }
        page.push_str("</ul>");
    }
    page.push_str("</div>");
    let step = step_label(c);
    for rank in &c.ranks {
        let _ = write!(page, "<h2>Rank {}</h2>", rank.rank);
        table_named_by(
            &mut page,
            &["figure", "base", "new", "change"],
            &figure_rows(rank, &step),
            0,
        );
        let rows: Vec<Vec<String>> = rank
            .checks
            .iter()
            .map(|p| {
                let detail = |f: &Option<crate::model::compare::CheckOutcome>| {
                    f.as_ref().map_or(String::new(), |f| f.detail.clone())
                };
                vec![
                    p.check.to_string(),
                    format!("{}: {}", verdict(&p.base), detail(&p.base)),
                    format!("{}: {}", verdict(&p.new), detail(&p.new)),
                ]
            })
            .collect();
        page.push_str("<h3>Verdicts</h3>");
        table(&mut page, &["verdict", "base", "new"], &rows);
    }
    let sites = site_rows(c);
    if !sites.is_empty() {
        page.push_str("<h2>Call sites alive at the snapshot peak</h2>");
        table_named_by(&mut page, &["site", "base", "new", "change"], &sites, 0);
    }
    page_end(&mut page);
    out.write_all(page.as_bytes())
}
