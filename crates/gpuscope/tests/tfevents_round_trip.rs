//! Writing with the engine's writer and reading back with its reader, including damaged
//! files: a truncated tail is reported and survived, a flipped byte is an error naming
//! its offset.

use std::fs;
use std::time::Duration;

use gpuscope::formats::tfevents::{load_log_dir, EventWriter, LoadOptions, WriterOptions};
use gpuscope::model::tensorboard::{Chart, ChartContent, ChartGroup, Histogram};

fn load(
    path: &std::path::Path,
    keep_going: bool,
) -> gpuscope::Result<gpuscope::model::tensorboard::LogData> {
    let options = LoadOptions {
        keep_points: None,
        keep_going,
    };
    load_log_dir(path, &options, &mut |_, _| {})
}

fn write_run(dir: &std::path::Path, steps: i64) -> std::path::PathBuf {
    let mut w = EventWriter::create(dir, WriterOptions::default()).unwrap();
    for step in 0..steps {
        w.add_scalar(
            "Loss/total",
            step as f64 * 0.5,
            step,
            Some(1000.0 + step as f64),
        )
        .unwrap();
        w.add_scalar(
            "Loss/component_rendering",
            1.0 / (step + 1) as f64,
            step,
            None,
        )
        .unwrap();
    }
    w.add_text("run", "lr=0.1 batch=4", 0, None).unwrap();
    w.add_histogram(
        "weights",
        &Histogram::from_values(&[1.0, 2.0, 2.0], 3),
        3,
        None,
    )
    .unwrap();
    w.add_custom_scalars_layout(&[ChartGroup {
        title: "Loss".into(),
        charts: vec![Chart {
            title: "components".into(),
            content: ChartContent::Multiline(vec!["Loss/component_.*".into()]),
        }],
    }])
    .unwrap();
    w.add_scalars("lr", &[("enc".into(), 0.1), ("dec".into(), 0.2)], 5, None)
        .unwrap();
    let path = w.path().to_path_buf();
    w.close().unwrap();
    path
}

#[test]
fn everything_written_is_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_run(dir.path(), 100);
    assert!(file
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("events.out.tfevents."));
    let data = load(dir.path(), false).unwrap();
    assert_eq!(
        data.files.len(),
        3,
        "main file and two add_scalars sub-runs"
    );
    let main = &data.files[0];
    assert_eq!(main.records, 1 + 200 + 3);
    assert_eq!(main.event_kinds["file_version"], 1);

    let total = data.series.iter().find(|s| s.tag == "Loss/total").unwrap();
    assert_eq!(total.points.len(), 100);
    assert_eq!(total.points[7].step, 7);
    assert_eq!(total.points[7].value, 3.5);
    assert_eq!(total.points[7].wall_time, 1007.0);
    let text = data
        .series
        .iter()
        .find(|s| s.tag == "run/text_summary")
        .unwrap();
    assert_eq!(text.texts[0].text, "lr=0.1 batch=4");
    let kinds: Vec<_> = data
        .series
        .iter()
        .map(|s| (s.run.as_str(), s.kind.as_str()))
        .collect();
    assert!(kinds.contains(&(".", "histogram")));
    assert!(kinds.contains(&(".", "custom_scalars")));
    let enc = data.series.iter().find(|s| s.run == "lr_enc").unwrap();
    assert_eq!(
        (enc.tag.as_str(), enc.points[0].value as f32),
        ("lr", 0.1f32)
    );
}

#[test]
fn truncated_tail_is_reported_and_the_rest_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_run(dir.path(), 10);
    let bytes = fs::read(&file).unwrap();
    fs::write(&file, &bytes[..bytes.len() - 5]).unwrap();
    let data = load(&file, false).unwrap();
    let f = &data.files[0];
    assert!(f.truncated_at.is_some());
    assert_eq!(f.records, 1 + 20 + 2, "all but the last record");
}

#[test]
fn flipped_byte_fails_with_its_offset_unless_keep_going() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_run(dir.path(), 10);
    let mut bytes = fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    fs::write(&file, &bytes).unwrap();
    let err = load(&file, false).unwrap_err().to_string();
    assert!(err.contains("corrupt record at byte offset"), "{err}");
    let offset: usize = err
        .split("byte offset ")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        offset <= middle && middle - offset < 200,
        "{offset} vs {middle}"
    );

    let data = load(&file, true).unwrap();
    let f = &data.files[0];
    assert!(f.damaged.as_deref().unwrap().contains("byte offset"));
    assert!(f.records > 1 && f.records < 24);
}

#[test]
fn a_non_event_file_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.out.tfevents.fake");
    fs::write(&path, b"{\"traceEvents\": []}\n").unwrap();
    let err = load(&path, false).unwrap_err().to_string();
    assert!(err.contains("not a TensorBoard event file"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let err = load(empty.path(), false).unwrap_err().to_string();
    assert!(err.contains("no TensorBoard event files"), "{err}");
}

#[test]
fn periodic_flush_reaches_the_file_without_close() {
    let dir = tempfile::tempdir().unwrap();
    let options = WriterOptions {
        flush_interval: Duration::from_millis(50),
        ..WriterOptions::default()
    };
    let w = EventWriter::create(dir.path(), options).unwrap();
    w.add_scalar("x", 1.0, 1, None).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let data = load(dir.path(), false).unwrap();
        if data.files[0].records == 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never flushed");
        std::thread::sleep(Duration::from_millis(20));
    }
    w.flush().unwrap();
    drop(w);
}

#[test]
fn writing_after_close_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = EventWriter::create(dir.path(), WriterOptions::default()).unwrap();
    w.close().unwrap();
    w.close().unwrap();
    let err = w.add_scalar("x", 1.0, 1, None).unwrap_err().to_string();
    assert!(err.contains("closed"), "{err}");
}

#[test]
fn a_full_queue_makes_writers_wait_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = WriterOptions {
        queue_bytes: 1,
        flush_interval: Duration::from_secs(60),
        ..WriterOptions::default()
    };
    let mut w = EventWriter::create(dir.path(), options).unwrap();
    let n = 50_000;
    for step in 0..n {
        w.add_scalar("x", step as f64, step, None).unwrap();
    }
    w.close().unwrap();
    let data = load(dir.path(), false).unwrap();
    assert_eq!(data.series[0].points.len(), n as usize);
    assert!(data.series[0]
        .points
        .iter()
        .enumerate()
        .all(|(i, p)| p.step == i as i64));
}
