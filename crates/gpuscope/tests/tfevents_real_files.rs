//! The reader against real event files written by torch.utils.tensorboard (2025) and
//! tensorboardX (2017), checked against what TensorBoard's own reader found in them
//! (`shared/data/tfevents/reference.json`).

use crate::common;

use std::fs;

use gpuscope::formats::tfevents::record::masked_crc32c;
use gpuscope::formats::tfevents::{load_log_dir, LoadOptions};
use gpuscope::model::tensorboard::{DataKind, EventKind};
use serde_json::Value;

const FILES: [&str; 3] = [
    "pytorch_deeplab__events.out.tfevents.1738263821.wn45.24385.0",
    "pytorch_unet__events.out.tfevents.1738277380.wn44.22511.0",
    "tensorboardX2017__events.out.tfevents.1511441337.mba2012mid.lan",
];

fn reference() -> Value {
    let text = fs::read_to_string(common::shared_data("tfevents/reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// TensorBoard's names for a value's kind, in gpuscope's words.
fn gpuscope_kind(reference_kind: &str) -> DataKind {
    match reference_kind {
        "simple_value" => DataKind::Scalar,
        "histo" => DataKind::Histogram,
        "tensor" => DataKind::Text, // every tensor tag in these files is a text summary
        other => panic!("reference kind {other} not expected"),
    }
}

#[test]
fn header_checksums_of_real_files_match_our_masking() {
    for name in FILES {
        let bytes = fs::read(common::shared_data(&format!("tfevents/{name}"))).unwrap();
        let stored = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        assert_eq!(masked_crc32c(&bytes[..8]), stored, "{name}");
    }
}

#[test]
fn real_files_match_tensorboards_reading() {
    let reference = reference();
    for name in FILES {
        let expected = &reference[name];
        let path = common::shared_data(&format!("tfevents/{name}"));
        let data = load_log_dir(&path, &LoadOptions::default(), &mut |_, _| {}).unwrap();
        assert_eq!(data.files.len(), 1);
        let file = &data.files[0];
        assert_eq!(
            file.records,
            expected["records"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(file.truncated_at, None);
        for (kind, count) in expected["event_kinds"].as_object().unwrap() {
            // TensorBoard calls an event with no payload "null"; gpuscope "empty".
            let ours = if kind == "null" {
                EventKind::Empty.as_str()
            } else {
                kind.as_str()
            };
            assert_eq!(
                file.event_kinds.get(ours).copied(),
                count.as_u64(),
                "{name} {kind}"
            );
        }
        let tags = expected["tags"].as_object().unwrap();
        assert_eq!(data.series.len(), tags.len(), "{name}");
        for (tag, want) in tags {
            let s = data.series.iter().find(|s| &s.tag == tag).expect(tag);
            assert_eq!(
                s.kind,
                gpuscope_kind(want["kind"].as_str().unwrap()),
                "{tag}"
            );
            assert_eq!(s.count, want["count"].as_u64().unwrap(), "{tag}");
            assert_eq!(s.first_step, want["first_step"].as_i64().unwrap(), "{tag}");
            assert_eq!(s.last_step, want["last_step"].as_i64().unwrap(), "{tag}");
            // Scalars are stored as float32; the reference printed them widened to double,
            // rounded to 16 digits, so compare at the precision the file holds.
            if let Some(first) = want.get("first_value").and_then(Value::as_f64) {
                assert_eq!(
                    s.points.first().unwrap().value as f32,
                    first as f32,
                    "{tag}"
                );
                let last = want["last_value"].as_f64().unwrap();
                assert_eq!(s.points.last().unwrap().value as f32, last as f32, "{tag}");
            }
        }
    }
}

#[test]
fn a_directory_of_files_is_one_run_read_in_name_order() {
    let data = load_log_dir(
        &common::shared_data("tfevents"),
        &LoadOptions {
            keep_points: Some(vec![]),
            keep_going: false,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let names: Vec<_> = data
        .files
        .iter()
        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, FILES);
    assert!(data
        .series
        .iter()
        .all(|s| s.run == "." && s.points.is_empty()));
    // "Training loss" appears in two of the files: one series, counts added.
    let training = data
        .series
        .iter()
        .find(|s| s.tag == "Training loss")
        .unwrap();
    assert_eq!(training.count, 25 + 50);
}
