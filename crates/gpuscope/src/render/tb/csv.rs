//! `gpuscope tb --format csv`: one row per tag (`--tags`) or per point of a scalar series.

use crate::model::tensorboard::LogData;
use std::io::{self, Write};

/// CSV rows `run,tag,kind,count,first_step,last_step`, one per tag (`--tags`).
pub fn tags_csv(data: &LogData, out: &mut dyn Write) -> io::Result<()> {
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(["run", "tag", "kind", "count", "first_step", "last_step"])
        .map_err(crate::error::csv_io)?;
    for s in &data.series {
        w.write_record([
            s.run.as_str(),
            &s.tag,
            s.kind.as_str(),
            &s.count.to_string(),
            &s.first_step.to_string(),
            &s.last_step.to_string(),
        ])
        .map_err(crate::error::csv_io)?;
    }
    w.flush()
}

/// CSV rows `run,tag,kind,step,wall_time,value` for every kept scalar and text value.
pub fn csv(data: &LogData, out: &mut dyn Write) -> io::Result<()> {
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(["run", "tag", "kind", "step", "wall_time", "value"])
        .map_err(crate::error::csv_io)?;
    for s in &data.series {
        let numbers = s
            .points
            .iter()
            .map(|p| (p.step, p.wall_time, p.value.to_string()));
        let texts = s
            .texts
            .iter()
            .map(|p| (p.step, p.wall_time, p.text.clone()));
        for (step, wall_time, value) in numbers.chain(texts) {
            w.write_record([
                s.run.as_str(),
                &s.tag,
                s.kind.as_str(),
                &step.to_string(),
                &wall_time.to_string(),
                &value,
            ])
            .map_err(crate::error::csv_io)?;
        }
    }
    w.flush()
}
