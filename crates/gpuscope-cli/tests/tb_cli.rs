//! `gpuscope tb` as a user runs it: output on real files, exit codes and error lines on bad
//! input.

use std::path::PathBuf;

use assert_cmd::Command;
use common::stderr_of;

use crate::common;

fn shared(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

const UNET: &str = "tfevents/pytorch_unet__events.out.tfevents.1738277380.wn44.22511.0";

fn gpuscope() -> Command {
    Command::cargo_bin("gpuscope").unwrap()
}

#[test]
fn tag_table_fits_80_columns() {
    let out = gpuscope().arg("tb").arg(shared(UNET)).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Training loss"));
    assert!(text.contains("IoU (avg on test)"));
    for line in text.lines().filter(|l| !l.contains("tfevents")) {
        assert!(line.chars().count() <= 80, "too wide: {line:?}");
    }
}

#[test]
fn json_follows_the_contract() {
    let out = gpuscope()
        .args(["tb", "--format", "json"])
        .arg(shared(UNET))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "gpuscope.tb/1");
    assert_eq!(doc["files"].as_array().unwrap().len(), 1);
    let loss = &doc["tags"]["Training loss"];
    assert_eq!(loss["kind"], "scalar");
    let points = loss["points"].as_array().unwrap();
    assert_eq!(points.len(), 50);
    // First value as TensorBoard's reader reports it (reference.json), at float32 precision.
    assert_eq!(points[0]["step"], 0);
    assert_eq!(points[0]["value"].as_f64().unwrap() as f32, 0.367_077_5_f32);
    assert!(points[0]["wall_time"].as_f64().unwrap() > 1.7e9);
    let text = &doc["tags"]["Total time/text_summary"];
    assert_eq!(text["kind"], "text");
    assert!(!text["texts"][0]["text"].as_str().unwrap().is_empty());
}

#[test]
fn csv_of_one_tag() {
    let out = gpuscope()
        .args(["tb", "--format", "csv", "--tag", "Epoch time"])
        .arg(shared(UNET))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines[0], "run,tag,kind,step,wall_time,value");
    assert_eq!(lines.len(), 1 + 50);
    assert!(lines[1].starts_with(".,Epoch time,scalar,0,"));
}

#[test]
fn missing_path_is_one_error_line_and_exit_2() {
    let out = gpuscope()
        .args(["tb", "/nonexistent/run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: /nonexistent/run: "), "{err}");
    assert!(err.contains("(check the path)"), "{err}");
}

#[test]
fn wrong_kind_of_file_is_one_error_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("events.out.tfevents.0.host.1.0");
    std::fs::write(&fake, "{\"traceEvents\": []}").unwrap();
    let out = gpuscope().arg("tb").arg(&fake).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a TensorBoard event file"), "{err}");
}

#[test]
fn unknown_tag_says_how_to_list_tags() {
    let out = gpuscope()
        .args(["tb", "--tag", "nope"])
        .arg(shared(UNET))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("--tags"));
}

#[test]
fn no_subcommand_prints_the_help_as_a_usage_error() {
    let out = gpuscope().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(err.contains("Usage: gpuscope <COMMAND>"), "{err}");
    assert!(err.contains("nsys") && err.contains("monitor"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn help_and_version() {
    let out = gpuscope().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("Examples:"));
    let out = gpuscope().args(["tb", "--help"]).output().unwrap();
    assert!(String::from_utf8(out.stdout).unwrap().contains("--format"));
    let out = gpuscope().arg("--version").output().unwrap();
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with(concat!("gpuscope ", env!("CARGO_PKG_VERSION"))));
}

#[test]
fn a_top_run_tag_and_a_sub_run_tag_that_read_alike_are_both_kept() {
    use gpuscope::formats::tfevents::{EventWriter, WriterOptions};
    // `train/loss` in the top run and `loss` in run `train`: both would be `train/loss`.
    let dir = tempfile::tempdir().unwrap();
    for (sub, tag, value) in [(".", "train/loss", 1.0), ("train", "loss", 2.0)] {
        let mut w = EventWriter::create(dir.path().join(sub), WriterOptions::default()).unwrap();
        for step in 0..3 {
            w.add_scalar(tag, value, step, Some(1.7e9)).unwrap();
        }
        w.close().unwrap();
    }
    let out = gpuscope()
        .args(["tb", "--format", "json"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tags = doc["tags"].as_object().unwrap();
    let keys: Vec<&str> = tags.keys().map(String::as_str).collect();
    assert_eq!(keys, [".:train/loss", "train:loss"]);
    for (key, run, value) in [(".:train/loss", ".", 1.0), ("train:loss", "train", 2.0)] {
        assert_eq!(tags[key]["run"], run);
        let points = tags[key]["points"].as_array().unwrap();
        assert_eq!(points.len(), 3);
        assert!(points.iter().all(|p| p["value"] == value));
    }
}

const TBX: &str = "tfevents/tensorboardX2017__events.out.tfevents.1511441337.mba2012mid.lan";

#[test]
fn tags_as_csv_list_every_tag_with_its_count() {
    let out = gpuscope()
        .args(["tb", "--tags", "--format", "csv"])
        .arg(shared(TBX))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("run,tag,kind,count,first_step,last_step")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shared("tfevents/reference.json")).unwrap())
            .unwrap();
    let want = reference[TBX.trim_start_matches("tfevents/")]["tags"]
        .as_object()
        .unwrap();
    assert_eq!(rows.len(), want.len());
    for row in rows {
        assert_eq!(row[0], ".");
        assert_eq!(row[3], want[row[1]]["count"].to_string(), "{row:?}");
    }
}

#[test]
fn a_histogram_tag_says_its_values_are_not_shown() {
    let out = gpuscope()
        .args(["tb", "--tag", "conv1/bias"])
        .arg(shared(TBX))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("conv1/bias [histogram, run ., 10 values]"),
        "{text}"
    );
    assert!(text.contains("values of scalars and text only"), "{text}");
}

/// A log directory with one event file holding these scalar tags (three steps each).
fn log_dir_with_tags(tags: &[&str]) -> tempfile::TempDir {
    use gpuscope::formats::tfevents::{EventWriter, WriterOptions};
    let dir = tempfile::tempdir().unwrap();
    let mut w = EventWriter::create(dir.path(), WriterOptions::default()).unwrap();
    for step in 0..3 {
        for tag in tags {
            w.add_scalar(tag, 0.5, step, Some(1.7e9)).unwrap();
        }
    }
    w.close().unwrap();
    dir
}

#[test]
fn long_tag_names_are_printed_whole_so_they_can_be_copied() {
    let long = "TensorProfiling/Tensor_Category/activations_of_the_very_long_module_name_MB";
    let longer = format!("Grad/{}", "encoder.layers.11.self_attention.".repeat(3));
    let dir = log_dir_with_tags(&[long, "loss", &longer]);
    for args in [&["tb", "--tags"][..], &["tb"][..]] {
        let out = gpuscope().args(args).arg(dir.path()).output().unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for tag in [long, longer.as_str(), "loss"] {
            assert!(
                lines.iter().any(|l| l.split_whitespace().any(|w| w == tag)),
                "{tag:?} is not on one line:\n{text}"
            );
        }
        // Only the file line and the names too long for any 80-column table are wider.
        for line in &lines {
            let wide = line.chars().count() > 80;
            assert!(
                !wide || line.contains("tfevents") || line.trim() == longer,
                "too wide: {line:?}"
            );
        }
        // The row of a name on its own line still follows it, under the table's columns.
        let at = lines.iter().position(|l| l.trim() == long).unwrap();
        assert!(lines[at + 1].trim_start().starts_with("scalar"), "{text}");
    }
    // What is printed can be given back to --tag.
    let out = gpuscope()
        .args(["tb", "--tag", long])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
}

#[test]
fn an_empty_event_file_beside_others_is_one_warning() {
    let dir = log_dir_with_tags(&["loss"]);
    let empty = dir.path().join("events.out.tfevents.1800000000.host.1.0");
    std::fs::write(&empty, b"").unwrap();
    // A file cut inside its first record: the first 10 bytes of a real one.
    let real = std::fs::read(shared(UNET)).unwrap();
    let cut = dir.path().join("events.out.tfevents.1800000001.host.2.0");
    std::fs::write(&cut, &real[..10]).unwrap();
    let out = gpuscope().arg("tb").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("warning:")).collect();
    let empty_line = format!(
        "warning: {} is empty (0 bytes): no records were read from it",
        empty.display()
    );
    let cut_line = format!(
        "warning: {} ends inside its first record (writer killed or still writing): no \
         records were read from it",
        cut.display()
    );
    assert_eq!(warnings, [empty_line.as_str(), cut_line.as_str()], "{text}");
    assert!(!text.contains("note:"), "one line per file: {text}");
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("loss ")),
        "{text}"
    );
    // JSON and CSV keep stdout for data and say it on stderr.
    for format in ["json", "csv"] {
        let out = gpuscope()
            .args(["tb", "--format", format])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        let err = stderr_of(&out);
        assert_eq!(
            err.lines().collect::<Vec<_>>(),
            [empty_line.as_str(), cut_line.as_str()]
        );
        let data = String::from_utf8(out.stdout).unwrap();
        assert!(!data.contains("warning"), "{data}");
    }
}

#[test]
fn event_files_that_are_all_empty_are_one_error_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("events.out.tfevents.1800000000.host.1.0");
    std::fs::write(&first, b"").unwrap();
    let cases = [
        (first.clone(), "the event file holds no records".to_owned()),
        (
            dir.path().to_path_buf(),
            format!("its one event file, {}, holds no records", first.display()),
        ),
    ];
    for (path, what) in cases {
        let out = gpuscope().arg("tb").arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("error: {}: {what} (", path.display())),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("events.out.tfevents.1800000002.host.3.0"), b"").unwrap();
    for args in [
        &["tb"][..],
        &["tb", "--format", "json"],
        &["tb", "--tag", "x"],
    ] {
        let out = gpuscope().args(args).arg(dir.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("none of its 2 event files holds a record"),
            "{err}"
        );
    }
}

#[test]
fn event_files_without_any_value_say_so() {
    use gpuscope::formats::tfevents::{EventWriter, WriterOptions};
    let dir = tempfile::tempdir().unwrap();
    let w = EventWriter::create(dir.path(), WriterOptions::default()).unwrap();
    drop(w);
    let out = gpuscope().arg("tb").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("no tags: the event files hold no summary values (records: 1 file_version)"),
        "{text}"
    );
    assert!(!text.contains("kind"), "no empty table: {text}");
}
