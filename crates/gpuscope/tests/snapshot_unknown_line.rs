//! A real snapshot in which torch wrote a frame's line as 2^64 − 1 (`size_t(-1)`, its
//! mark for a C++ frame it could not place; pickle writes it as a 9-byte LONG1): the
//! shared `lm_fullstep_ctx128.pickle` with that line put into the frames of its largest
//! allocation by Python's own pickle. It must read, whole and with `--no-trace`, with
//! every figure of the unchanged file; the frame's line is unknown: `null` in the JSON,
//! no `:LINE` in the site.

use crate::common;

use std::path::Path;

use common::{python, LOAD_SNAPSHOT_PY};
use gpuscope::analysis::snapshot::{snapshot_report, Options};
use gpuscope::formats::snapshot::{read_snapshot, Parts};
use serde_json::Value;

/// Loads the snapshot (plain data only), sets `line` to 2**64 - 1 in the innermost frame
/// and the first frame of the user's code of the largest allocation (the first of the
/// largest, as gpuscope picks it), writes it as `torch.cuda.memory._dump_snapshot` does
/// (`pickle.dump`, default protocol), and prints that user frame and the LONG1 count.
const UNPLACE_PY: &str = r#"
allocs = [e for e in snap['device_traces'][0] if e['action'] == 'alloc']
largest = max(allocs, key=lambda e: e['size'])
frames = largest['frames']
user = next(f for f in frames if f['filename'].endswith('.py')
            and '/torch/' not in f['filename'] and 'site-packages' not in f['filename']
            and '/lib/python3' not in f['filename'])
print(json.dumps({'filename': user['filename'], 'name': user['name'], 'line': user['line']}))
frames[0]['line'] = 2**64 - 1
user['line'] = 2**64 - 1
data = pickle.dumps(snap)
wide = sum(1 for op, arg, _ in pickletools.genops(data) if op.name == 'LONG1' and arg == 2**64 - 1)
print(json.dumps({'long1_of_2_64_minus_1': wide}))
with open(sys.argv[2], 'wb') as f:
    f.write(data)
"#;

fn report(path: &Path, parts: Parts) -> Value {
    let snapshot = read_snapshot(path, parts, &mut |_, _| {}).expect("reads");
    serde_json::to_value(snapshot_report(
        &snapshot,
        path.to_owned(),
        &Options::default(),
    ))
    .unwrap()
}

fn text(path: &Path) -> String {
    let snapshot = read_snapshot(path, Parts::All, &mut |_, _| {}).expect("reads");
    let report = snapshot_report(&snapshot, path.to_owned(), &Options::default());
    let mut out = Vec::new();
    gpuscope::render::snapshot::text(&report, 200, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// `doc` as the report of the file with unknown lines would be: every string `from`
/// replaced by `to`, the innermost frame's line `null`, the path dropped.
fn unplaced(doc: &Value, from: &str, to: &str) -> Value {
    match doc {
        Value::String(s) => Value::String(s.replace(from, to)),
        Value::Array(items) => Value::Array(items.iter().map(|v| unplaced(v, from, to)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "path")
                .map(|(k, v)| match k.as_str() {
                    "top_frame" => {
                        let mut frame = v.clone();
                        frame["line"] = Value::Null;
                        (k.clone(), frame)
                    }
                    _ => (k.clone(), unplaced(v, from, to)),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The first place where `a` and `b` differ, as a JSON pointer, with both values.
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x
            .keys()
            .chain(y.keys())
            .find_map(|k| first_difference(&a[k], &b[k], &format!("{at}/{k}"))),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{at}/{i}"))),
        _ => (a != b).then(|| format!("{at}: {a} vs {b}")),
    }
}

#[test]
fn a_line_of_2_64_minus_1_is_read_and_shown_as_unknown() {
    let original = common::shared_data("snapshots/lm_fullstep_ctx128.pickle");
    let dir = tempfile::tempdir().unwrap();
    let unplaced_path = dir.path().join("unplaced.pickle");
    let stdout = python(
        &format!("{LOAD_SNAPSHOT_PY}{UNPLACE_PY}"),
        &[&original, &unplaced_path],
    );
    let mut lines = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let user = lines.next().unwrap();
    assert!(lines.next().unwrap()["long1_of_2_64_minus_1"].as_u64() >= Some(2));
    let (file, name) = (
        user["filename"].as_str().unwrap(),
        user["name"].as_str().unwrap(),
    );
    let placed = format!("{file}:{} {name}", user["line"]);
    let unknown = format!("{file} {name}");

    for parts in [Parts::All, Parts::Segments] {
        let (before, after) = (report(&original, parts), report(&unplaced_path, parts));
        // Every figure is the unchanged file's; only the lines are unknown...
        let want = unplaced(&before, &placed, &unknown);
        let got = unplaced(&after, &placed, &unknown);
        assert_eq!(first_difference(&want, &got, ""), None, "{parts:?}");
    }
    let after = report(&unplaced_path, Parts::All);
    let site = |doc: &Value| doc["devices"][0]["largest_alloc"]["site"].clone();
    assert_eq!(site(&report(&original, Parts::All)), placed.as_str());
    assert_eq!(site(&after), unknown.as_str());
    // ...and the innermost frame's line is null in the JSON.
    let top = &after["devices"][0]["largest_alloc"]["top_frame"];
    assert_eq!(top["name"], "torch::unwind::unwind()");
    assert_eq!(top["line"], Value::Null);

    let text = text(&unplaced_path);
    assert!(text.contains(&format!("at {unknown}.")), "{text}");
    assert!(!text.contains(&placed), "{text}");
}
