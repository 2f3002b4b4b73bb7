//! The SQLite side of reading an export: open the file read-only after checking it is an
//! SQLite database at all, learn which tables and columns this version of nsys wrote, and
//! read a table's rows by column name. nsys creates tables lazily (only for what was
//! captured) and its schema changes between versions, so nothing here assumes a table or a
//! column exists; what is missing is reported to the caller, which knows what it means.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, Row};

use crate::{Error, Result};

/// The first 16 bytes of every SQLite 3 database.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// A column to read: required ones make the table unusable when absent, optional ones are
/// read as NULL.
#[derive(Debug, Clone, Copy)]
pub(super) struct Col {
    pub name: &'static str,
    pub required: bool,
}

/// A required column.
pub(super) const fn req(name: &'static str) -> Col {
    Col {
        name,
        required: true,
    }
}

/// An optional column.
pub(super) const fn opt(name: &'static str) -> Col {
    Col {
        name,
        required: false,
    }
}

/// Why a table gave no rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Missing {
    /// nsys did not create the table.
    Table,
    /// The table has no column of this name.
    Column(&'static str),
    /// The table is there, without rows.
    Empty,
}

/// An open export and its schema.
pub(super) struct Db {
    conn: Connection,
    path: PathBuf,
    /// Table name → its column names.
    tables: HashMap<String, Vec<String>>,
}

impl Db {
    /// Opens `path` read-only; a file that is not SQLite, or that SQLite cannot read, is
    /// [`Error::BadInput`].
    pub fn open(path: &Path) -> Result<Db> {
        check_header(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| damaged(path, &e))?;
        let mut db = Db {
            conn,
            path: path.to_owned(),
            tables: HashMap::new(),
        };
        db.tables = db.schema()?;
        Ok(db)
    }

    fn schema(&self) -> Result<HashMap<String, Vec<String>>> {
        let names: Vec<String> =
            self.query_strings("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")?;
        let mut tables = HashMap::new();
        for name in names {
            let sql = format!(
                "SELECT name FROM pragma_table_info({})",
                quote_literal(&name)
            );
            let columns = self.query_strings(&sql)?;
            tables.insert(name, columns);
        }
        Ok(tables)
    }

    fn query_strings(&self, sql: &str) -> Result<Vec<String>> {
        let fail = |e: rusqlite::Error| damaged(&self.path, &e);
        let mut stmt = self.conn.prepare(sql).map_err(fail)?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(fail)?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
            .map_err(fail)
    }

    /// Whether the export has `table`.
    pub fn has_table(&self, table: &str) -> bool {
        self.tables.contains_key(table)
    }

    /// Whether `table` has `column`.
    pub fn has_column(&self, table: &str, column: &str) -> bool {
        self.tables
            .get(table)
            .is_some_and(|cols| cols.iter().any(|c| c == column))
    }

    /// Every row of `table` with `columns` in that order (an absent optional column reads
    /// as NULL), mapped by `f`; rows `f` maps to `None` are left out. `Ok(Err(..))` says
    /// why the table gave nothing; `Err` is a database SQLite could not read.
    pub fn rows<T>(
        &self,
        table: &str,
        columns: &[Col],
        mut f: impl FnMut(&Row) -> rusqlite::Result<Option<T>>,
    ) -> Result<Result<Vec<T>, Missing>> {
        if !self.has_table(table) {
            return Ok(Err(Missing::Table));
        }
        let mut select = Vec::with_capacity(columns.len());
        for c in columns {
            if self.has_column(table, c.name) {
                select.push(quote_identifier(c.name));
            } else if c.required {
                return Ok(Err(Missing::Column(c.name)));
            } else {
                select.push("NULL".to_owned());
            }
        }
        let sql = format!(
            "SELECT {} FROM {}",
            select.join(", "),
            quote_identifier(table)
        );
        let fail = |e: rusqlite::Error| damaged(&self.path, &e);
        let mut stmt = self.conn.prepare(&sql).map_err(fail)?;
        let mut rows = stmt.query([]).map_err(fail)?;
        let mut out = Vec::new();
        let mut seen = false;
        while let Some(row) = rows.next().map_err(fail)? {
            seen = true;
            if let Some(item) = f(row).map_err(fail)? {
                out.push(item);
            }
        }
        Ok(if seen { Ok(out) } else { Err(Missing::Empty) })
    }

    /// `name → value` of a two-column metadata table (`META_DATA_EXPORT`); empty when the
    /// table is absent. Names that repeat (`CAPTURE_EVENT_TYPE`) keep every value.
    pub fn key_values(&self, table: &str) -> Result<Vec<(String, String)>> {
        let rows = self.rows(table, &[req("name"), opt("value")], |r| {
            Ok(Some((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            )))
        })?;
        Ok(rows.unwrap_or_default())
    }
}

/// Refuses files that are not SQLite databases, or shorter than their header says, before
/// SQLite sees them: SQLite reads a cut last page as zeros without complaint, and the
/// message can say what is wrong with the file.
fn check_header(path: &Path) -> Result<()> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut head = [0u8; 100];
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    if got == 0 {
        return Err(Error::bad_input(
            path,
            "an empty file, not an SQLite database (export the report again: nsys export \
             --type sqlite REPORT.nsys-rep)",
        ));
    }
    if got < head.len() || head[..16] != SQLITE_MAGIC[..] {
        return Err(Error::bad_input(
            path,
            "not an SQLite database (give the .sqlite that `nsys export --type sqlite` \
             writes, or the .nsys-rep report)",
        ));
    }
    // Header fields (sqlite.org/fileformat.html): page size at 16 (1 means 65536), page
    // count at 28, valid when the change counter at 24 equals the one at 92.
    let page_size = match u16::from_be_bytes([head[16], head[17]]) {
        1 => 65_536u64,
        n => u64::from(n),
    };
    let pages = u64::from(u32::from_be_bytes([head[28], head[29], head[30], head[31]]));
    let expected = page_size * pages;
    let actual = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if head[24..28] == head[92..96] && actual < expected {
        return Err(Error::bad_input(
            path,
            format!(
                "truncated: the SQLite header promises {expected} bytes, the file has \
                 {actual} (copy or export it again with nsys export --type sqlite)"
            ),
        ));
    }
    Ok(())
}

fn damaged(path: &Path, e: &rusqlite::Error) -> Error {
    Error::bad_input(
        path,
        format!(
            "SQLite cannot read this database: {e} (the file may be truncated or damaged: \
             export it again with nsys export --type sqlite)"
        ),
    )
}

fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
