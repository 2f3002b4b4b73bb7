//! Reads Nsight Systems exports (`nsys export --type sqlite`) into [`NsysExport`]: the
//! format layer of `gpuscope nsys stats`. It opens the file read-only, checks that it is an
//! nsys export (a `StringIds` table), and reads each part it finds; a part nsys did not
//! write, or wrote with columns this reader does not know, becomes a sentence saying so
//! and the other parts are still read. It computes no statistic.
//!
//! rusqlite (bundled SQLite) does the reading. [`capture`] builds the nsys command lines
//! the CLI runs; nothing here starts a process.

pub mod capture;
mod db;
mod sections;

use std::collections::HashMap;
use std::path::Path;

use db::{opt, req, Db};

use crate::model::nsys::{ExportMeta, Gpu, NsysExport};
use crate::{Error, Result};

/// Reads the export at `path`.
///
/// Errors ([`Error::BadInput`]) for a file that is not SQLite, a database SQLite cannot
/// read (truncated, damaged), and an SQLite database that is not an nsys export. Missing
/// tables and columns are not errors: the parts they feed say why they are empty.
pub fn read_export(path: &Path) -> Result<NsysExport> {
    let db = Db::open(path)?;
    if !db.has_table("StringIds") {
        return Err(Error::bad_input(
            path,
            "an SQLite database, but not an Nsight Systems export: it has no StringIds table \
             (give the file `nsys export --type sqlite REPORT.nsys-rep` writes)",
        ));
    }
    let strings = strings(&db)?;
    let meta = meta(&db)?;
    Ok(NsysExport {
        path: path.to_owned(),
        gpus: gpus(&db)?,
        kernels: sections::kernels(&db, &meta)?,
        memops: sections::memops(&db, &meta)?,
        api_calls: sections::api_calls(&db, &meta)?,
        nvtx: sections::nvtx(&db, &meta, &strings)?,
        memory_events: sections::memory_events(&db, &meta)?,
        strings,
        meta,
    })
}

fn strings(db: &Db) -> Result<HashMap<i64, String>> {
    let rows = db.rows("StringIds", &[req("id"), req("value")], |r| {
        let id: Option<i64> = r.get(0)?;
        let value: Option<String> = r.get(1)?;
        Ok(id.zip(value))
    })?;
    Ok(rows.unwrap_or_default().into_iter().collect())
}

fn meta(db: &Db) -> Result<ExportMeta> {
    let export = db.key_values("META_DATA_EXPORT")?;
    let capture = db.key_values("META_DATA_CAPTURE")?;
    let find = |kv: &[(String, String)], key: &str| {
        kv.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let traced: Vec<String> = capture
        .iter()
        .filter(|(k, _)| k == "CAPTURE_EVENT_TYPE")
        .map(|(_, v)| v.clone())
        .collect();
    let session = db.rows(
        "TARGET_INFO_SESSION_START_TIME",
        &[req("utcEpochNs")],
        |r| r.get::<_, Option<i64>>(0),
    )?;
    Ok(ExportMeta {
        product_version: find(&export, "EXPORT_PRODUCT_VERSION"),
        schema_version: find(&export, "EXPORT_SCHEMA_VERSION"),
        session_start_unix_ns: session.ok().and_then(|s| s.first().copied()),
        traced: (!capture.is_empty()).then_some(traced),
        memory_usage_collected: find(&capture, "COLLECT_GPU_MEMORY_USAGE").map(|v| v == "true"),
    })
}

fn gpus(db: &Db) -> Result<Vec<Gpu>> {
    let columns = [req("id"), opt("name"), opt("totalMemory")];
    let rows = db.rows("TARGET_INFO_GPU", &columns, |r| {
        let id: Option<i64> = r.get(0)?;
        Ok(id.map(|id| Gpu {
            id,
            name: r.get(1).ok().flatten(),
            total_memory_bytes: r.get(2).ok().flatten(),
        }))
    })?;
    let mut gpus = rows.unwrap_or_default();
    gpus.sort_by_key(|g| g.id);
    gpus.dedup_by_key(|g| g.id);
    Ok(gpus)
}
