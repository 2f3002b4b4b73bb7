//! What every HTML page of gpuscope shares: the page frame with its inline style, and
//! tables whose cells are escaped. Pages are one file each: no script, nothing fetched.

use std::fmt::Write;

use html_escape::{encode_double_quoted_attribute, encode_text};

use super::short_names::short_names;

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;color:#222;margin:24px auto;\
max-width:980px;padding:0 16px}h1{font-size:22px}h2{font-size:18px;border-bottom:2px solid \
#4e79a7;padding-bottom:4px;margin-top:36px}h3{font-size:15px;margin:18px 0 4px}\
table{border-collapse:collapse;margin:6px 0}td,th{padding:2px 10px;text-align:right;\
border-bottom:1px solid #e4e4ea}td:first-child,th:first-child{text-align:left}\
.verdict{padding:8px 12px;border-radius:4px;margin:10px 0}.leak{background:#fde2e1}\
.unjudged{background:#eee}.ok{background:#e3f1e1}.advice li{margin:3px 0}.chart{display:block;max-width:100%;height:auto}\
.tick{font-size:11px;fill:#555}.axis{font-size:11px;fill:#333}.legend{font-size:12px}\
.marker-label{font-size:10px}.meta,.skipped{color:#666}td.name{max-width:460px;\
overflow-wrap:anywhere}td.name,th.name{text-align:left}td.num,th.num{text-align:right}\
td.num{white-space:nowrap}.findings li{margin:6px 0}.severity{display:inline-block;\
min-width:56px;font-weight:600;text-transform:uppercase;font-size:12px}.high .severity{color:#b22}\
.medium .severity{color:#c60}.low .severity{color:#776}.info .severity{color:#4e79a7}\
.source{color:#666}.next{margin-left:64px;color:#444}a.summary{color:inherit;\
text-decoration:none;border-bottom:1px dotted #888}a.summary:hover{border-bottom-style:solid}";

/// Starts a page titled `title`, with `meta` (already escaped HTML) under the heading.
pub fn page_start(title: &str, meta: &str) -> String {
    let mut page = String::with_capacity(64 * 1024);
    let title = encode_text(title);
    let _ = write!(
        page,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{title}</title><style>{STYLE}</style></head><body>\
         <h1>{title}</h1><p class=\"meta\">{meta} · gpuscope {}</p>",
        env!("CARGO_PKG_VERSION")
    );
    page
}

/// Ends the page.
pub fn page_end(page: &mut String) {
    page.push_str("</body></html>\n");
}

/// A table with a header row; every cell is escaped, the first column may wrap.
pub fn table<S: AsRef<str>>(page: &mut String, header: &[&str], rows: &[Vec<S>]) {
    let first = |i: usize| (i == 0).then_some("name");
    classed_table(page, header, rows, |_| None, first, (0, &[]));
}

/// A table like [`table`] whose first column names things that can run to thousands of
/// characters (CUDA kernels' C++ signatures, operators with their input shapes): a long
/// name shows as [`short_names`] shortens it, whole in the cell's `title` (shown on
/// hover), so that its row stays at most three lines tall.
pub fn table_of_names<S: AsRef<str>>(page: &mut String, header: &[&str], rows: &[Vec<S>]) {
    let first = |i: usize| (i == 0).then_some("name");
    classed_table(page, header, rows, |_| None, first, (0, &shown(rows, 0)));
}

/// A table whose rows are named in column `name` (left-aligned, may wrap; a long name
/// short, as in [`table_of_names`]) and whose other columns are figures (right-aligned):
/// nsys stats' tables, which name the row last.
pub fn table_named_by<S: AsRef<str>>(
    page: &mut String,
    header: &[&str],
    rows: &[Vec<S>],
    name: usize,
) {
    let class = |i: usize| Some(if i == name { "name" } else { "num" });
    classed_table(page, header, rows, class, class, (name, &shown(rows, name)));
}

/// What the cells of `column` show ([`short_names`]).
fn shown<S: AsRef<str>>(rows: &[Vec<S>], column: usize) -> Vec<Option<String>> {
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r.get(column).map_or("", |c| c.as_ref()))
        .collect();
    short_names(&names)
}

/// A table whose header cells and body cells of column `i` get the classes `th(i)` and
/// `td(i)`; every cell is escaped. With `short` = `(column, shown)`, row `r`'s cell in that
/// column shows `shown[r]` when there is one, with the whole text in its `title`.
fn classed_table<S: AsRef<str>>(
    page: &mut String,
    header: &[&str],
    rows: &[Vec<S>],
    th: impl Fn(usize) -> Option<&'static str>,
    td: impl Fn(usize) -> Option<&'static str>,
    (column, shown): (usize, &[Option<String>]),
) {
    let class = |c: Option<&str>| c.map(|c| format!(" class=\"{c}\"")).unwrap_or_default();
    page.push_str("<table><tr>");
    for (i, h) in header.iter().enumerate() {
        let _ = write!(page, "<th{}>{}</th>", class(th(i)), encode_text(h));
    }
    page.push_str("</tr>");
    for (r, row) in rows.iter().enumerate() {
        page.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let cell = cell.as_ref();
            let _ = match shown
                .get(r)
                .and_then(Option::as_deref)
                .filter(|_| i == column)
            {
                Some(shown) => write!(
                    page,
                    "<td{} title=\"{}\">{}</td>",
                    class(td(i)),
                    encode_double_quoted_attribute(cell),
                    encode_text(shown)
                ),
                None => write!(page, "<td{}>{}</td>", class(td(i)), encode_text(cell)),
            };
        }
        page.push_str("</tr>");
    }
    page.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_named_by_its_last_column_shortens_that_column() {
        let name = format!("void k<{}>(int&)", "float, ".repeat(40));
        let mut page = String::new();
        let row = vec!["12.5", "3", name.as_str()];
        table_named_by(&mut page, &["Time (%)", "Instances", "Name"], &[row], 2);
        let title = encode_double_quoted_attribute(&name);
        assert!(
            page.contains(&format!("<td class=\"name\" title=\"{title}\">k&lt;float")),
            "{page}"
        );
        assert!(page.contains("<td class=\"num\">12.5</td>"), "{page}");
    }

    #[test]
    fn the_whole_name_is_the_cells_title() {
        let name = format!("void k<{}>(int&)", "float, ".repeat(40));
        let mut page = String::new();
        table_of_names(&mut page, &["kernel", "n"], &[vec![name.as_str(), "3"]]);
        let title = encode_double_quoted_attribute(&name);
        assert!(page.contains(&format!("title=\"{title}\"")), "{page}");
        assert!(!page.contains(&name));
    }
}
