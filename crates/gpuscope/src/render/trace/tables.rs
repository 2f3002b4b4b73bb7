//! The kernel and operator tables of traces as flat files, one row per event, for the
//! engines people already query thousands of rank files with (DuckDB, Spark, pandas):
//! `kernels` (GPU work) and `operators` (CPU operators), as CSV or Parquet. Times are
//! whole nanoseconds on the trace's clock, so nothing is rounded. Written to any
//! `io::Write`; the CLI (`gpuscope trace --export`) makes the files.

use std::io::{self, Write};
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use crate::analysis::trace::classify::KernelType;
use crate::model::trace::TraceFile;
use crate::model::trace::{Kind, NONE, NO_SHAPES};

/// The file formats the tables are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// Comma-separated values with a header row.
    Csv,
    /// Apache Parquet, a row group per trace, Snappy-compressed.
    Parquet,
}

/// How a table is made from one trace.
pub type TableOf = fn(&TraceFile) -> Table;

/// The tables, by the name of their file (`kernels.<ext>`, `operators.<ext>`).
pub const TABLES: [(&str, TableOf); 2] = [("kernels", kernels), ("operators", operators)];

impl TableFormat {
    /// The extension of a file in this format.
    pub fn extension(self) -> &'static str {
        match self {
            TableFormat::Csv => "csv",
            TableFormat::Parquet => "parquet",
        }
    }
}

/// Writes the table `of` of every trace (one after the other, same columns) in `format`.
pub fn write_tables(
    traces: &[TraceFile],
    of: TableOf,
    format: TableFormat,
    out: &mut (dyn Write + Send),
) -> io::Result<()> {
    let rows: Vec<Table> = traces.iter().map(of).collect();
    match format {
        TableFormat::Csv => write_csv(&rows, out),
        TableFormat::Parquet => write_parquet(&rows, out).map_err(io::Error::other),
    }
}

/// One column of a table.
pub enum Values {
    /// Whole numbers; `None` where the event has none.
    Int(Vec<Option<i64>>),
    /// Text.
    Text(Vec<String>),
}

/// A table: named columns of equal length.
pub struct Table {
    /// The columns, in order.
    pub columns: Vec<(&'static str, Values)>,
}

impl Table {
    fn rows(&self) -> usize {
        match self.columns.first() {
            Some((_, Values::Int(v))) => v.len(),
            Some((_, Values::Text(v))) => v.len(),
            None => 0,
        }
    }
}

fn int(v: i64) -> Option<i64> {
    (v != NONE).then_some(v)
}

/// The events a table has a row for, and how its columns are filled from them.
struct Rows(Vec<usize>);

impl Rows {
    fn ints(&self, f: impl Fn(usize) -> Option<i64>) -> Values {
        Values::Int(self.0.iter().map(|&i| f(i)).collect())
    }

    fn texts(&self, f: impl Fn(usize) -> String) -> Values {
        Values::Text(self.0.iter().map(|&i| f(i)).collect())
    }
}

/// The GPU work of one trace.
pub fn kernels(t: &TraceFile) -> Table {
    let (tr, e) = (&t.trace, &t.trace.events);
    let rows = Rows((0..e.len()).filter(|&i| e.kind[i].is_gpu()).collect());
    Table {
        columns: vec![
            ("rank", rows.ints(|_| Some(tr.rank.into()))),
            ("name", rows.texts(|i| tr.names.get(e.name[i]).to_owned())),
            ("kind", rows.texts(|i| e.kind[i].as_str().to_owned())),
            (
                "kernel_type",
                rows.texts(|i| KernelType::of(tr.names.get(e.name[i])).as_str().to_owned()),
            ),
            ("ts_ns", rows.ints(|i| Some(e.ts[i]))),
            ("dur_ns", rows.ints(|i| Some(e.dur[i]))),
            ("stream", rows.ints(|i| int(e.stream[i]))),
            ("device", rows.ints(|i| int(e.device[i]))),
            ("correlation", rows.ints(|i| int(e.correlation[i]))),
            ("external_id", rows.ints(|i| int(e.external_id[i]))),
            ("bytes", rows.ints(|i| int(e.bytes[i]))),
        ],
    }
}

/// The CPU operators of one trace.
pub fn operators(t: &TraceFile) -> Table {
    let (tr, e) = (&t.trace, &t.trace.events);
    let rows = Rows((0..e.len()).filter(|&i| e.kind[i] == Kind::CpuOp).collect());
    Table {
        columns: vec![
            ("rank", rows.ints(|_| Some(tr.rank.into()))),
            ("name", rows.texts(|i| tr.names.get(e.name[i]).to_owned())),
            ("ts_ns", rows.ints(|i| Some(e.ts[i]))),
            ("dur_ns", rows.ints(|i| Some(e.dur[i]))),
            ("pid", rows.ints(|i| int(e.pid[i]))),
            ("tid", rows.ints(|i| int(e.tid[i]))),
            ("external_id", rows.ints(|i| int(e.external_id[i]))),
            (
                "input_shapes",
                rows.texts(|i| match e.shapes[i] {
                    NO_SHAPES => String::new(),
                    s => tr.names.get(s).to_owned(),
                }),
            ),
        ],
    }
}

/// Writes the tables (one per trace, same columns) as one CSV with a header row.
pub fn write_csv(tables: &[Table], out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    let Some(first) = tables.first() else {
        return w.flush();
    };
    w.write_record(first.columns.iter().map(|(name, _)| *name))
        .map_err(crate::error::csv_io)?;
    for table in tables {
        for row in 0..table.rows() {
            w.write_record(table.columns.iter().map(|(_, values)| match values {
                Values::Int(v) => v[row].map(|x| x.to_string()).unwrap_or_default(),
                Values::Text(v) => v[row].clone(),
            }))
            .map_err(crate::error::csv_io)?;
        }
    }
    w.flush()
}

/// Writes the tables (one per trace, same columns) as one Parquet file, a row group each,
/// Snappy-compressed.
pub fn write_parquet(
    tables: &[Table],
    out: impl Write + Send,
) -> Result<(), parquet::errors::ParquetError> {
    let Some(first) = tables.first() else {
        return Ok(());
    };
    let fields: Vec<String> = first
        .columns
        .iter()
        .map(|(name, values)| match values {
            Values::Int(_) => format!("OPTIONAL INT64 {name};"),
            Values::Text(_) => format!("REQUIRED BYTE_ARRAY {name} (UTF8);"),
        })
        .collect();
    let schema = Arc::new(parse_message_type(&format!(
        "message events {{ {} }}",
        fields.join(" ")
    ))?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build(),
    );
    let mut writer = SerializedFileWriter::new(out, schema, props)?;
    for table in tables {
        let mut group = writer.next_row_group()?;
        for (_, values) in &table.columns {
            let Some(mut column) = group.next_column()? else {
                break;
            };
            match values {
                Values::Int(v) => {
                    let present: Vec<i64> = v.iter().flatten().copied().collect();
                    let levels: Vec<i16> = v.iter().map(|x| i16::from(x.is_some())).collect();
                    column
                        .typed::<Int64Type>()
                        .write_batch(&present, Some(&levels), None)?;
                }
                Values::Text(v) => {
                    let bytes: Vec<ByteArray> = v.iter().map(|s| s.as_str().into()).collect();
                    column
                        .typed::<ByteArrayType>()
                        .write_batch(&bytes, None, None)?;
                }
            }
            column.close()?;
        }
        group.close()?;
    }
    writer.close()?;
    Ok(())
}
