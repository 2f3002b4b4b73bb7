//! Which never-freed call sites accumulate (README's rule), on real snapshots and on
//! snapshots written here in torch's layout by Python's own pickle: a healthy H200 run,
//! a one-step LM trace and a one-step fine-tuning trace without times have none; the same H200 trace with
//! one allocation of its forward pass never freed again has one, with times and without;
//! a training loop that keeps a block every step has one, with or without times (unless
//! a slow first step takes most of the trace's time: a known limit), while the same loop
//! keeping only the last three (a ring buffer) has none. Optimizer state made in the first step and the last step's
//! gradients never are.

use crate::common;

use std::path::{Path, PathBuf};

use common::{python, LOAD_SNAPSHOT_PY};
use gpuscope::analysis::snapshot::{snapshot_report, Options};
use gpuscope::formats::snapshot::{read_snapshot, Parts};
use gpuscope::render::snapshot::{ACCUMULATING, NONE_ACCUMULATING, NOT_ACCUMULATING};
use serde_json::Value;

/// The report of the snapshot at `path`, as the JSON document has it.
fn report(path: &Path) -> Value {
    let snapshot = read_snapshot(path, Parts::All, &mut |_, _| {}).expect("reads");
    serde_json::to_value(snapshot_report(
        &snapshot,
        path.to_owned(),
        &Options::default(),
    ))
    .unwrap()
}

/// The text and the HTML page of the report of the snapshot at `path`.
fn text_and_html(path: &Path) -> (String, String) {
    let snapshot = read_snapshot(path, Parts::All, &mut |_, _| {}).expect("reads");
    let report = snapshot_report(&snapshot, path.to_owned(), &Options::default());
    let (mut text, mut html) = (Vec::new(), Vec::new());
    gpuscope::render::snapshot::text(&report, 100, &mut text).unwrap();
    gpuscope::render::snapshot::html::html(&report, &mut html).unwrap();
    (
        String::from_utf8(text).unwrap(),
        String::from_utf8(html).unwrap(),
    )
}

/// The accumulating sites of a report.
fn accumulating(doc: &Value) -> Vec<String> {
    never_freed(doc)
        .iter()
        .filter(|r| r["accumulating"] == true)
        .map(|r| r["site"].as_str().unwrap().to_owned())
        .collect()
}

fn never_freed(doc: &Value) -> &[Value] {
    doc["never_freed"].as_array().unwrap()
}

/// The never-freed row of `site`.
fn row<'a>(doc: &'a Value, site: &str) -> &'a Value {
    never_freed(doc)
        .iter()
        .find(|r| r["site"] == site)
        .unwrap_or_else(|| panic!("{site} is not among the never-freed sites"))
}

#[test]
fn a_healthy_h200_run_has_no_accumulating_site() {
    let path = common::shared_data("gpu-h200/lm_clean/snapshots/iter30.pickle");
    let doc = report(&path);
    assert_eq!(accumulating(&doc), Vec::<String>::new());
    // AdamW's state, made in the first step (420 MiB), is never freed, and is listed.
    let adamw = row(&doc, "/home/ml/project/train_lm.py:82 <module>");
    assert_eq!(adamw["accumulating"], false);
    assert!(adamw["bytes"].as_u64() > Some(400 << 20));
    let (first, last) = (&adamw["first_alloc_time_us"], &adamw["last_alloc_time_us"]);
    assert!(first.as_i64().is_some() && first.as_i64() <= last.as_i64());
    // The ring of the last 20 losses (`check_finite`) is not accumulating either.
    assert_eq!(
        row(&doc, "/home/ml/project/train_lm.py:75 <module>")["count"],
        20
    );
}

/// One training step with times: its backward pass makes a gradient layer after layer
/// over much of the trace's entries (not of its time), and AdamW's state comes last.
#[test]
fn a_one_step_trace_has_no_accumulating_site() {
    let path = common::shared_data("snapshots/lm_fullstep_ctx128.pickle");
    let doc = report(&path);
    assert_eq!(doc["devices"][0]["has_time"], true);
    assert_eq!(accumulating(&doc), Vec::<String>::new());
    assert!(row(&doc, "(backward: BmmBackward0)")["bytes"].as_u64() > Some(12 << 30));
}

#[test]
fn a_one_step_trace_without_times_has_no_accumulating_site() {
    let path = common::shared_data("snapshots/finetune_no_timestamps.pickle");
    let doc = report(&path);
    assert_eq!(doc["devices"][0]["has_time"], false);
    assert_eq!(accumulating(&doc), Vec::<String>::new());
    assert!(!never_freed(&doc).is_empty());
    for r in never_freed(&doc) {
        assert_eq!(r["first_alloc_time_us"], Value::Null);
        assert_eq!(r["last_alloc_time_us"], Value::Null);
    }
}

/// Reads the H200 snapshot and, for every allocation with the stack and size of the
/// forward pass's 32 MiB `train_lm.py:49` one made last, drops the entries that free it
/// and moves it to an address of its own (the allocator hands a freed block out again; a
/// kept one it cannot): a leak of that tensor, every step. Writes it with times (argv[2])
/// and without (argv[3]), and its last 40 000 entries (argv[4]) and the unchanged
/// snapshot's (argv[5]), as torch keeps a trace recorded with `max_entries` (gpuscope's
/// `snapshot_at` keeps 100 000): a window that starts inside a step. Prints how many
/// allocations were kept.
const INJECT_LEAK_PY: &str = r#"
trace = snap['device_traces'][0]
key = lambda e: (e['size'], tuple((f['name'], f['filename'], f['line']) for f in e['frames']))
target = next(key(e) for e in reversed(trace) if e['action'] == 'alloc'
              and e['size'] == 32 << 20
              and any(f['filename'].endswith('train_lm.py') and f['line'] == 49 for f in e['frames']))
leaked, kept, out = set(), 0, []
for e in trace:
    if e['action'] == 'alloc':
        leaked.discard(e['addr'])
        if key(e) == target:
            leaked.add(e['addr'])
            kept += 1
            out.append(dict(e, addr=(1 << 56) + kept))
            continue
    elif e['action'] in ('free_requested', 'free_completed') and e['addr'] in leaked:
        continue
    out.append(e)
original = trace
snap['device_traces'][0] = out
with open(sys.argv[2], 'wb') as f:
    pickle.dump(snap, f)
for trace, path in ((out, sys.argv[4]), (original, sys.argv[5])):
    with open(path, 'wb') as f:
        pickle.dump(dict(snap, device_traces=[trace[-40000:]]), f)
for e in out:
    e.pop('time_us', None)
with open(sys.argv[3], 'wb') as f:
    pickle.dump(snap, f)
print(kept)
"#;

#[test]
fn the_h200_trace_with_a_leak_put_in_has_one_accumulating_site() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let (timed, untimed) = (path("timed.pickle"), path("untimed.pickle"));
    let (tail, healthy_tail) = (path("tail.pickle"), path("healthy_tail.pickle"));
    let original = common::shared_data("gpu-h200/lm_clean/snapshots/iter30.pickle");
    let kept: u64 = python(
        &format!("{LOAD_SNAPSHOT_PY}{INJECT_LEAK_PY}"),
        &[&original, &timed, &untimed, &tail, &healthy_tail],
    )
    .trim()
    .parse()
    .unwrap();
    assert!(kept >= 30, "{kept}");
    assert_eq!(accumulating(&report(&healthy_tail)), Vec::<String>::new());
    for path in [&timed, &untimed, &tail] {
        let doc = report(path);
        let site = "/home/ml/project/train_lm.py:49 forward";
        assert_eq!(accumulating(&doc), [site], "{}", path.display());
        // Listed first, with every allocation kept (in the window, those it holds).
        assert_eq!(never_freed(&doc)[0]["site"], site);
        if path != &tail {
            assert!(row(&doc, site)["count"].as_u64() >= Some(kept));
        }
        let has_time = path != &untimed;
        assert_eq!(row(&doc, site)["first_alloc_time_us"].is_i64(), has_time);
    }
}

/// Writes training loops in torch's snapshot layout, one file per case (argv[1] is the
/// folder), and prints per case the count and the times of the first and last of the
/// kept site's allocations never freed. Each step allocates six activations
/// (model.py:30), frees the last step's gradients (zero_grad), then makes four gradients
/// (backward); the first step also makes AdamW's state (optim.py:82). train.py:20
/// allocates 8 MiB in the steps a case names and keeps it; `ring` frees the one of three
/// steps before, `long_ring` of 13 steps before (it fills in the last quarter of 16
/// steps, three before the end). Only `leak` accumulates: `bookends` keeps in the first
/// two steps and the last only, `stopped` stops after 8 of 12 steps, `late` starts in the
/// middle, `small` keeps 512 bytes a step; each is ruled out by one rule alone.
const LOOPS_PY: &str = r#"
import json, os, pickle, sys
MiB = 1 << 20
UNPLACED = 2**64 - 1
def frame(name, filename, line): return {'name': name, 'filename': filename, 'line': line}
unwind = frame('torch::unwind::unwind()', '??', UNPLACED)
def py(*frames): return [unwind] + [frame(n, f, l) for f, l, n in frames]
STEP = ('/home/u/train.py', 12, 'step')
FORWARD = py(('/home/u/model.py', 30, 'forward'), STEP)
KEPT = py(('/home/u/train.py', 20, 'step'), STEP)
ADAMW = py(('/home/u/optim.py', 82, 'step'), STEP)
GRAD = [unwind, frame('torch::autograd::generated::MmBackward0::apply(x)', '??', UNPLACED)]

def loop(steps, keeps, size, ring, timed, slow_first):
    trace, live, now, addr = [], {}, [1_700_000_000_000_000], [1 << 32]
    def tick(us=10):
        now[0] += us
    def alloc(size, frames):
        addr[0] += size
        e = {'action': 'alloc', 'addr': addr[0], 'size': size, 'stream': 0, 'frames': frames}
        if timed: e['time_us'] = now[0]
        trace.append(e); live[addr[0]] = e; tick()
        return addr[0]
    def free(a):
        e = live.pop(a)
        for action in ('free_requested', 'free_completed'):
            f = dict(e, action=action)
            if timed: f['time_us'] = now[0]
            trace.append(f); tick()
    grads, kept, kept_times = [], [], []
    for step in range(steps):
        acts = [alloc(4 * MiB, FORWARD) for _ in range(6)]
        if keeps(step):
            kept.append(alloc(size, KEPT))
            kept_times.append(now[0] - 10)
        if ring and len(kept) > ring:
            free(kept.pop(0))
            kept_times.pop(0)
        for g in grads: free(g)
        if step == 0 and slow_first: tick(5_000_000)
        grads = [alloc(2 * MiB, GRAD) for _ in range(4)]
        for a in acts: free(a)
        if step == 0:
            for _ in range(16): alloc(2 * MiB, ADAMW)
        tick(1000)
    blocks = [{'address': a, 'size': e['size'], 'requested_size': e['size'],
               'state': 'active_allocated', 'frames': e['frames']} for a, e in live.items()]
    used = sum(b['size'] for b in blocks)
    blocks.append({'address': addr[0] + MiB, 'size': 64 * MiB, 'requested_size': 0,
                   'state': 'inactive', 'frames': []})
    segment = {'device': 0, 'address': 1 << 32, 'total_size': used + 64 * MiB,
               'allocated_size': used, 'active_size': used, 'requested_size': used,
               'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0),
               'is_expandable': False, 'frames': [], 'blocks': blocks}
    snap = {'segments': [segment], 'device_traces': [trace],
            'allocator_settings': {}, 'external_annotations': []}
    times = (kept_times[0], kept_times[-1]) if timed else (None, None)
    return snap, len(kept), times

every = lambda step: True
cases = [('leak', 12, every, 8 * MiB, None), ('ring', 12, every, 8 * MiB, 3),
         ('long_ring', 16, every, 8 * MiB, 13),
         ('bookends', 12, lambda s: s in (0, 1, 11), 8 * MiB, None),
         ('stopped', 12, lambda s: s < 8, 8 * MiB, None),
         ('late', 12, lambda s: s >= 6, 8 * MiB, None),
         ('small', 12, every, 512, None)]
for kind, steps, keeps, size, ring in cases:
    clocks = [(True, False), (True, True), (False, False)] if kind in ('leak', 'ring') else [(True, False)]
    for timed, slow_first in clocks:
        name = '%s_%s%s' % (kind, 'timed' if timed else 'untimed', '_slow' if slow_first else '')
        snap, count, times = loop(steps, keeps, size, ring, timed, slow_first)
        with open(os.path.join(sys.argv[1], name + '.pickle'), 'wb') as f:
            pickle.dump(snap, f)
        print(json.dumps({'name': name, 'count': count, 'first': times[0], 'last': times[1]}))
"#;

#[test]
fn a_loop_that_keeps_a_block_every_step_accumulates_and_a_ring_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<Value> = python(LOOPS_PY, &[dir.path()])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(cases.len(), 11);
    let kept = "/home/u/train.py:20 step";
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let path: PathBuf = dir.path().join(format!("{name}.pickle"));
        let doc = report(&path);
        // A first step that takes most of the trace's time (compiling, autotuning) puts a
        // leak of the later steps past the first third of the time: not counted (README).
        let want: &[&str] = if name.starts_with("leak") && !name.ends_with("_slow") {
            &[kept]
        } else {
            &[]
        };
        assert_eq!(accumulating(&doc), want, "{name}");
        let site = row(&doc, kept);
        assert_eq!(site["first_alloc_time_us"], case["first"], "{name}");
        assert_eq!(site["last_alloc_time_us"], case["last"], "{name}");
        assert_eq!(site["count"], case["count"], "{name}");
        if !want.is_empty() {
            assert_eq!(never_freed(&doc)[0]["site"], kept, "{name}: listed first");
        }
        // The text and the page lead with the accumulating sites, or say there are none.
        let (text, html) = text_and_html(&path);
        for page in [&text, &html] {
            let growing = page.find(ACCUMULATING);
            let others = page
                .find(NOT_ACCUMULATING)
                .expect("the other never-freed sites");
            if !want.is_empty() {
                assert!(growing < Some(others), "{name}");
                assert!(!page.contains(NONE_ACCUMULATING), "{name}");
            } else {
                assert_eq!(growing, None, "{name}");
            }
        }
        let none = text.replace("\n    ", " ");
        assert_eq!(none.contains(NONE_ACCUMULATING), want.is_empty());
        // Made once (AdamW's state) or only in the last step (gradients): not accumulating.
        assert_eq!(row(&doc, "/home/u/optim.py:82 step")["accumulating"], false);
        assert_eq!(row(&doc, "(backward: MmBackward0)")["count"], 4);
        assert_eq!(row(&doc, "(backward: MmBackward0)")["accumulating"], false);
    }
}
