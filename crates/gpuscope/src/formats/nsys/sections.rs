//! One reader per part of an export (kernels, memory operations, CUDA API calls, NVTX
//! ranges, memory usage events), each naming the table and columns nsys 2026.1 writes, and
//! the sentence a report prints when the part is missing: which table, and what the
//! capture must have lacked for nsys not to write it.

use std::collections::HashMap;

use rusqlite::Row;

use super::db::{opt, req, Db, Missing};
use crate::model::nsys::{
    ApiCall, ExportMeta, Kernel, MemOp, MemOps, MemoryEvent, NvtxRange, NvtxStyle, Section,
    Unavailable,
};
use crate::Result;

pub(super) const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
pub(super) const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
pub(super) const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
pub(super) const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
pub(super) const NVTX: &str = "NVTX_EVENTS";
pub(super) const MEMORY_USAGE: &str = "CUDA_GPU_MEMORY_USAGE_EVENTS";

/// NVTX_EVENTS event types (ENUM_NSYS_EVENT_TYPE): push/pop and start/end ranges, their
/// NVTXT twins, and the creation of a domain (whose text is the domain's name).
const NVTX_PUSH_POP: i64 = 59;
const NVTX_START_END: i64 = 60;
const NVTXT_PUSH_POP: i64 = 70;
const NVTXT_START_END: i64 = 71;
const NVTX_DOMAIN_CREATE: i64 = 75;

/// A part of an export, for the sentence that says it is missing.
struct Part<'a> {
    /// What a report lists: `CUDA kernels`.
    what: &'a str,
    /// The table(s) it comes from.
    table: &'a str,
    /// Why nsys would not have created the table.
    absent_because: String,
}

impl Part<'_> {
    fn unavailable(&self, missing: Missing, meta: &ExportMeta) -> Unavailable {
        let why = match missing {
            Missing::Table => format!(
                "no {} in this capture (table {} absent: {})",
                self.what, self.table, self.absent_because
            ),
            Missing::Empty => format!(
                "no {} in this capture (table {} is empty)",
                self.what, self.table
            ),
            Missing::Column(column) => format!(
                "{} unreadable: table {} has no column {column} ({})",
                self.what,
                self.table,
                version_note(meta)
            ),
        };
        Unavailable { why }
    }
}

/// Which nsys wrote the export, against which gpuscope was checked, and what to do.
fn version_note(meta: &ExportMeta) -> String {
    let wrote = match (&meta.product_version, &meta.schema_version) {
        (Some(p), Some(s)) => format!("written by Nsight Systems {p}, export schema {s}"),
        (Some(p), None) => format!("written by Nsight Systems {p}"),
        _ => "written by an Nsight Systems that does not name itself".to_owned(),
    };
    format!(
        "{wrote}; gpuscope reads the columns of Nsight Systems 2026.1 exports: export the \
         .nsys-rep again with a current nsys, or report the version to gpuscope"
    )
}

/// Why a table nsys writes when `traced` was captured is absent.
fn not_traced(meta: &ExportMeta, traced: &str, flag: &str, none_happened: &str) -> String {
    match &meta.traced {
        Some(kinds) if kinds.iter().any(|k| k == traced) => {
            format!("{flag} was traced, but {none_happened}")
        }
        _ => format!("the capture did not trace {flag}"),
    }
}

fn span(r: &Row, start: usize) -> rusqlite::Result<Option<(i64, i64)>> {
    let s: Option<i64> = r.get(start)?;
    let e: Option<i64> = r.get(start + 1)?;
    Ok(s.zip(e))
}

fn dims(r: &Row, first: usize) -> rusqlite::Result<Option<[i64; 3]>> {
    let x: Option<i64> = r.get(first)?;
    let y: Option<i64> = r.get(first + 1)?;
    let z: Option<i64> = r.get(first + 2)?;
    Ok(match (x, y, z) {
        (Some(x), Some(y), Some(z)) => Some([x, y, z]),
        _ => None,
    })
}

pub(super) fn kernels(db: &Db, meta: &ExportMeta) -> Result<Section<Vec<Kernel>>> {
    let part = Part {
        what: "CUDA kernels",
        table: KERNEL,
        absent_because: not_traced(meta, "Cuda", "cuda", "no kernel ran during the capture"),
    };
    let columns = [
        req("start"),
        req("end"),
        req("demangledName"),
        opt("shortName"),
        opt("gridX"),
        opt("gridY"),
        opt("gridZ"),
        opt("blockX"),
        opt("blockY"),
        opt("blockZ"),
    ];
    let rows = db.rows(KERNEL, &columns, |r| {
        let Some((start, end)) = span(r, 0)? else {
            return Ok(None);
        };
        let name: i64 = r.get(2)?;
        Ok(Some(Kernel {
            start,
            end,
            name,
            short_name: r.get::<_, Option<i64>>(3)?.unwrap_or(name),
            grid: dims(r, 4)?,
            block: dims(r, 7)?,
        }))
    })?;
    Ok(rows.map_err(|m| part.unavailable(m, meta)))
}

pub(super) fn memops(db: &Db, meta: &ExportMeta) -> Result<Section<MemOps>> {
    let copy_columns = [req("start"), req("end"), req("bytes"), req("copyKind")];
    let copies = db.rows(MEMCPY, &copy_columns, |r| mem_op(r, r.get(3)?))?;
    let set_columns = [req("start"), req("end"), req("bytes")];
    let sets = db.rows(MEMSET, &set_columns, |r| mem_op(r, None))?;
    let part = |table| Part {
        what: "GPU memory operations",
        table,
        absent_because: not_traced(meta, "Cuda", "cuda", "no memory was copied or set"),
    };
    let (copies, sets) = match (copies, sets) {
        (Err(Missing::Column(c)), _) => {
            return Ok(Err(part(MEMCPY).unavailable(Missing::Column(c), meta)))
        }
        (_, Err(Missing::Column(c))) => {
            return Ok(Err(part(MEMSET).unavailable(Missing::Column(c), meta)))
        }
        (Err(a), Err(b)) => {
            let p = part(MEMCPY);
            let why = if a == Missing::Table && b == Missing::Table {
                format!("absent: {}", p.absent_because)
            } else {
                "absent or empty".to_owned()
            };
            return Ok(Err(Unavailable {
                why: format!(
                    "no {} in this capture (tables {MEMCPY} and {MEMSET} {why})",
                    p.what
                ),
            }));
        }
        (copies, sets) => (copies.unwrap_or_default(), sets.unwrap_or_default()),
    };
    let copy_kind_labels = enum_labels(db, "ENUM_CUDA_MEMCPY_OPER")?;
    Ok(Ok(MemOps {
        copies,
        sets,
        copy_kind_labels,
    }))
}

fn mem_op(r: &Row, kind: Option<i64>) -> rusqlite::Result<Option<MemOp>> {
    let Some((start, end)) = span(r, 0)? else {
        return Ok(None);
    };
    Ok(Some(MemOp {
        start,
        end,
        bytes: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
        kind,
    }))
}

/// `id → label` of one of the export's ENUM_* tables; empty when absent.
fn enum_labels(db: &Db, table: &str) -> Result<HashMap<i64, String>> {
    let rows = db.rows(table, &[req("id"), opt("label"), opt("name")], |r| {
        let id: Option<i64> = r.get(0)?;
        let label: Option<String> = r.get(1)?;
        let name: Option<String> = r.get(2)?;
        Ok(id.zip(label.or(name)))
    })?;
    Ok(rows.unwrap_or_default().into_iter().collect())
}

pub(super) fn api_calls(db: &Db, meta: &ExportMeta) -> Result<Section<Vec<ApiCall>>> {
    let part = Part {
        what: "CUDA API calls",
        table: RUNTIME,
        absent_because: not_traced(meta, "Cuda", "cuda", "the program made no CUDA call"),
    };
    let rows = db.rows(RUNTIME, &[req("start"), req("end"), req("nameId")], |r| {
        let name: Option<i64> = r.get(2)?;
        Ok(span(r, 0)?
            .zip(name)
            .map(|((start, end), name)| ApiCall { start, end, name }))
    })?;
    Ok(rows.map_err(|m| part.unavailable(m, meta)))
}

/// NVTX ranges, named as nsys's nvtx_sum names them: the registered string or the inline
/// text, prefixed with `domain:` when the range belongs to a named domain. Ranges that
/// never ended (no `end`) are left out.
pub(super) fn nvtx(
    db: &Db,
    meta: &ExportMeta,
    strings: &HashMap<i64, String>,
) -> Result<Section<Vec<NvtxRange>>> {
    let part = Part {
        what: "NVTX ranges",
        table: NVTX,
        absent_because: not_traced(
            meta,
            "NvtxEvents",
            "nvtx",
            "the program opened no NVTX range",
        ),
    };
    struct Raw {
        start: i64,
        end: Option<i64>,
        kind: i64,
        text: Option<String>,
        process: i64,
        domain: Option<i64>,
    }
    let columns = [
        req("start"),
        opt("end"),
        req("eventType"),
        opt("text"),
        opt("textId"),
        opt("globalTid"),
        opt("domainId"),
    ];
    let raw = db.rows(NVTX, &columns, |r| {
        let (Some(start), Some(kind)) = (r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(2)?)
        else {
            return Ok(None);
        };
        let text_id: Option<i64> = r.get(4)?;
        let text = text_id
            .and_then(|id| strings.get(&id).cloned())
            .or(r.get::<_, Option<String>>(3)?);
        let tid: Option<i64> = r.get(5)?;
        Ok(Some(Raw {
            start,
            end: r.get(1)?,
            kind,
            text,
            // The process part of a serialized GlobalId, as nvtx_sum joins domains.
            process: (tid.unwrap_or(0) >> 24) & 0xFF_FFFF,
            domain: r.get(6)?,
        }))
    })?;
    let raw = match raw {
        Ok(raw) => raw,
        Err(m) => return Ok(Err(part.unavailable(m, meta))),
    };
    let domains: HashMap<(i64, i64), &str> = raw
        .iter()
        .filter(|e| e.kind == NVTX_DOMAIN_CREATE)
        .filter_map(|e| Some(((e.process, e.domain?), e.text.as_deref()?)))
        .collect();
    let ranges: Vec<NvtxRange> = raw
        .iter()
        .filter_map(|e| {
            let style = match e.kind {
                NVTX_PUSH_POP | NVTXT_PUSH_POP => NvtxStyle::PushPop,
                NVTX_START_END | NVTXT_START_END => NvtxStyle::StartEnd,
                _ => return None,
            };
            let text = e.text.as_deref().unwrap_or("[unnamed]");
            let name = match e.domain.and_then(|d| domains.get(&(e.process, d))) {
                Some(domain) => format!("{domain}:{text}"),
                None => text.to_owned(),
            };
            Some(NvtxRange {
                start: e.start,
                end: e.end?,
                name,
                style,
            })
        })
        .collect();
    if ranges.is_empty() {
        return Ok(Err(part.unavailable(Missing::Empty, meta)));
    }
    Ok(Ok(ranges))
}

pub(super) fn memory_events(db: &Db, meta: &ExportMeta) -> Result<Section<Vec<MemoryEvent>>> {
    let absent_because = match meta.memory_usage_collected {
        Some(true) => "memory usage was collected, but nothing was allocated".to_owned(),
        Some(false) => "the capture ran without --cuda-memory-usage true".to_owned(),
        None => "the capture did not use --cuda-memory-usage true".to_owned(),
    };
    let part = Part {
        what: "GPU memory usage events",
        table: MEMORY_USAGE,
        absent_because,
    };
    let columns = [
        req("start"),
        req("bytes"),
        req("memoryOperationType"),
        opt("deviceId"),
        opt("memKind"),
    ];
    let rows = db.rows(MEMORY_USAGE, &columns, |r| {
        let (Some(at), Some(bytes), Some(op)) = (
            r.get::<_, Option<i64>>(0)?,
            r.get::<_, Option<i64>>(1)?,
            r.get::<_, Option<i64>>(2)?,
        ) else {
            return Ok(None);
        };
        // ENUM_CUDA_DEV_MEM_EVENT_OPER: 0 allocation, 1 deallocation.
        let allocation = match op {
            0 => true,
            1 => false,
            _ => return Ok(None),
        };
        Ok(Some(MemoryEvent {
            at,
            bytes,
            allocation,
            device: r.get(3)?,
            mem_kind: r.get(4)?,
        }))
    })?;
    Ok(rows.map_err(|m| part.unavailable(m, meta)))
}
