//! The safe pickle reader against Python's own `pickle`: pickles written by `python3`
//! (stdlib only) for protocols 0–5, read here and rendered in a canonical text that Python
//! renders from the original object; memo sharing kept as sharing; the real allocator
//! snapshots in `shared/data/snapshots` against facts Python computes from them; pickles
//! that would run code refused before anything runs; bad and cut-short input refused
//! without a panic; and the inputs the fuzzer found.

use crate::common;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::common::one_byte::OneByte;
use common::{python, LOAD_SNAPSHOT_PY};
use gpuscope::formats::pickle::{self, Fold, Pickle, PickleError, StrId, Value};

/// One JSON object per line of `text`.
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// Python's half of the canonical form: exact for floats (their bits) and bytes (hex),
/// sets and frozensets in iteration order (which is the order pickle writes them in).
const CANON_PY: &str = r#"
import json, struct, pickle, pickletools, sys, os

def canon(o):
    if o is None: return 'None'
    if o is True: return 'True'
    if o is False: return 'False'
    if isinstance(o, int): return str(o)
    if isinstance(o, float): return 'f:%016x' % struct.unpack('>Q', struct.pack('>d', o))[0]
    if isinstance(o, str): return json.dumps(o, ensure_ascii=False)
    if isinstance(o, (bytes, bytearray)): return 'b:' + o.hex()
    if isinstance(o, tuple): return '(' + ','.join(map(canon, o)) + ')'
    if isinstance(o, (list, set, frozenset)): return '[' + ','.join(map(canon, o)) + ']'
    if isinstance(o, dict):
        return '{' + ','.join(canon(k) + ':' + canon(v) for k, v in o.items()) + '}'
    raise TypeError(type(o))

REFUSED = {'GLOBAL', 'STACK_GLOBAL', 'REDUCE', 'BUILD', 'INST', 'OBJ', 'NEWOBJ',
           'NEWOBJ_EX', 'EXT1', 'EXT2', 'EXT4', 'PERSID', 'BINPERSID', 'NEXT_BUFFER',
           'READONLY_BUFFER'}

def describe(data):
    ops, first_refused = set(), None
    for op, arg, pos in pickletools.genops(data):
        ops.add(op.name)
        if first_refused is None and op.name in REFUSED:
            first_refused = [op.name, op.code.encode('latin-1')[0], pos]
    return sorted(ops), first_refused
"#;

/// Our half of the canonical form, from the arenas.
fn canon(p: &Pickle, v: Value) -> String {
    let mut out = String::new();
    write_canon(p, v, &mut out);
    out
}

fn write_canon(p: &Pickle, v: Value, out: &mut String) {
    let items = |out: &mut String, open: char, close: char| {
        out.push(open);
        for (i, &item) in p.as_seq(v).unwrap().iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_canon(p, item, out);
        }
        out.push(close);
    };
    match v {
        Value::None => out.push_str("None"),
        Value::Bool(b) => out.push_str(if b { "True" } else { "False" }),
        Value::Int(i) => write!(out, "{i}").unwrap(),
        Value::UInt(u) => write!(out, "{u}").unwrap(),
        // Wider than 64 bits: the nearest float, as `WIDE_INTS_PY` writes it.
        Value::BigInt(f) => write!(out, "~f:{:016x}", f.to_bits()).unwrap(),
        Value::Float(f) => write!(out, "f:{:016x}", f.to_bits()).unwrap(),
        Value::Str(_) => out.push_str(&serde_json::to_string(p.as_str(v).unwrap()).unwrap()),
        Value::Bytes(_) => {
            out.push_str("b:");
            for b in p.as_bytes(v).unwrap() {
                write!(out, "{b:02x}").unwrap();
            }
        }
        Value::List(_) => items(out, '[', ']'),
        Value::Tuple(_) => items(out, '(', ')'),
        Value::Folded(token) => write!(out, "folded:{token}").unwrap(),
        Value::Dict(_) => {
            out.push('{');
            for (i, &(key, value)) in p.as_dict(v).unwrap().iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canon(p, key, out);
                out.push(':');
                write_canon(p, value, out);
            }
            out.push('}');
        }
    }
}

/// Writes, for protocols 0–5, the rich plain-data object (`core`), objects whose opcodes
/// only later protocols have (bytes: 3, sets: 4, bytearray: 5), and a recursive pair; one
/// JSON line per file: name, protocol, path, Python's canonical form (null when
/// recursive), opcodes used, first refused opcode.
const GENERATE_PY: &str = r#"
out = sys.argv[1]
shared_list = [1, 'shared', None]
shared_dict = {'k': shared_list, 'n': -1}
inner = ('t', shared_dict)
late = ['late', 2.5]
core = {
    'none': None, 'true': True, 'false': False,
    'ints': [0, 1, -1, 127, 128, 255, 256, 65535, 65536, -129, 2**31 - 1, -2**31, 2**31,
             -2**31 - 1, 2**32, 2**62, 2**63 - 1, -2**63, 10**18, -10**18, 2**63, 2**64 - 1],
    'floats': [0.0, -0.0, 1.5, -2.25, 1e100, 5e-324, 1.7976931348623157e308,
               float('inf'), float('-inf'), float('nan'), 0.1],
    'strs': ['', 'ascii', 'caf\u00e9', '\u20acuro', '\U0001f600 astral \U0001d11e',
             'tab\tnew\nline\rcr\\back"quote\'\x1asub', '\x00nul', '\\u0041 not an escape',
             '\u2028', 'x' * 300, 'y' * 70000],
    'empties': [[], (), {}, ''],
    'tuples': [(1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ((),)],
    'shared': [shared_list, shared_list, shared_dict, shared_dict, inner, inner],
    'nest': {'a': {'b': {'c': [shared_list, {'d': shared_dict, 'e': inner}]}}},
    'big_list': list(range(-500, 1000)) + [str(i) for i in range(200)],
    'big_dict': {('k%d' % i): i * i for i in range(1500)},
    'int_keys': {1: 'one', -5: 'minus five', 2**40: 'big'},
    'tuple_keys': {(1, 'a'): 'x', (): 'empty'},
    'mixed_keys': {None: 0, True: 1, 2.5: 2, 'True': 3},
    'late_a': late,
    'late_b': [late, late],
}
extras = {
    'bytes': ({'bytes': [b'', b'\x00\xffabc', bytes(range(256)), b'z' * 300]}, 3),
    'sets': ({'set': {1, 2, 3, 'a'}, 'frozenset': frozenset({(1, 2), 'b'}),
              'empty_set': set(), 'empty_frozenset': frozenset(),
              'big_set': set(range(1200))}, 4),
    'bytearray': ({'bytearray': bytearray(b'\x01\x02'), 'empty': bytearray()}, 5),
}
loop = []
loop.append(loop)
cycle_list = []
cycle_tuple = (cycle_list,)
cycle_list.append(cycle_tuple)
cases = [('core', core, True)] + [(n, o, True) for n, (o, _) in extras.items()]
cases += [('self_list', loop, False), ('cycle_tuple', cycle_tuple, False)]
for proto in range(6):
    for name, obj, printable in cases:
        data = pickle.dumps(obj, protocol=proto)
        if printable and name != 'sets':  # a set re-built may iterate in another order
            assert canon(pickle.loads(data)) == canon(obj)
        path = os.path.join(out, '%s.p%d.pickle' % (name, proto))
        with open(path, 'wb') as f:
            f.write(data)
        ops, refused = describe(data)
        print(json.dumps({'name': name, 'proto': proto, 'path': path,
                          'canon': canon(obj) if printable else None,
                          'ops': ops, 'refused': refused}))
"#;

struct Generated {
    name: String,
    proto: u64,
    path: PathBuf,
    canon: Option<String>,
    ops: Vec<String>,
    refused: Option<(String, u8, u64)>,
}

fn generate(dir: &Path) -> Vec<Generated> {
    json_lines(&python(&format!("{CANON_PY}{GENERATE_PY}"), &[dir]))
        .into_iter()
        .map(|j| Generated {
            name: j["name"].as_str().unwrap().to_owned(),
            proto: j["proto"].as_u64().unwrap(),
            path: PathBuf::from(j["path"].as_str().unwrap()),
            canon: j["canon"].as_str().map(str::to_owned),
            ops: j["ops"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_str().unwrap().to_owned())
                .collect(),
            refused: j["refused"].as_array().map(|r| {
                (
                    r[0].as_str().unwrap().to_owned(),
                    r[1].as_u64().unwrap() as u8,
                    r[2].as_u64().unwrap(),
                )
            }),
        })
        .collect()
}

fn read_bytes(data: &[u8]) -> Result<Pickle, PickleError> {
    pickle::read(data)
}

/// The refusal message names the opcode, its byte and its offset.
fn assert_refused(err: &PickleError, name: &str, byte: u8, offset: u64) {
    let message = err.to_string();
    let want = format!("opcode {name} (0x{byte:02x}) at byte offset {offset} ");
    assert!(
        message.starts_with(&want) && message.ends_with("; refused"),
        "{message:?} does not start with {want:?}"
    );
    assert!(matches!(err, PickleError::Refused { .. }));
    assert_eq!(err.offset(), offset);
}

#[test]
fn the_rich_object_reads_alike_in_all_six_protocols() {
    let dir = tempfile::tempdir().unwrap();
    let cases = generate(dir.path());
    let core: Vec<&Generated> = cases.iter().filter(|c| c.name == "core").collect();
    assert_eq!(core.len(), 6);
    let want = core[0].canon.clone().unwrap();
    assert!(
        want.len() > 80_000,
        "the object is rich: {} chars",
        want.len()
    );
    for case in &core {
        assert_eq!(case.canon.as_deref(), Some(want.as_str()));
        assert_eq!(case.refused, None, "protocol {}", case.proto);
        let p = pickle::read_path(&case.path).unwrap();
        let got = canon(&p, p.root());
        assert!(
            got == want,
            "protocol {}: canonical forms differ",
            case.proto
        );
        // Spot checks through the accessors, apart from the canonical form.
        let root = p.root();
        let ints = p.as_seq(p.get(root, "ints").unwrap()).unwrap();
        assert!(ints.contains(&Value::Int(i64::MAX)) && ints.contains(&Value::Int(i64::MIN)));
        assert_eq!(
            p.as_seq(p.get(root, "big_list").unwrap()).unwrap().len(),
            1700
        );
        assert_eq!(
            p.as_dict(p.get(root, "big_dict").unwrap()).unwrap().len(),
            1500
        );
        assert_eq!(
            p.get(p.get(root, "big_dict").unwrap(), "k1499"),
            Some(Value::Int(1499 * 1499))
        );
        assert_eq!(p.get(root, "none"), Some(Value::None));
        assert_eq!(p.get(root, "absent"), None);
        assert_eq!(p.get(p.get(root, "ints").unwrap(), "absent"), None);
    }
}

/// Folds nothing; stops before the outermost dict's key `.0`.
struct StopBefore<'k>(&'k str);

impl Fold for StopBefore<'_> {
    const STOPS: bool = true;

    fn fold(&mut self, _: &Pickle, _: Option<Value>, _: Value) -> Option<u32> {
        None
    }

    fn stop_before(&mut self, p: &Pickle, key: StrId) -> bool {
        p.str_by_id(key) == self.0
    }
}

/// The keys of the root dict, each with its value's canonical form.
fn root_pairs(p: &Pickle) -> Vec<(String, String)> {
    p.as_dict(p.root())
        .unwrap()
        .iter()
        .map(|&(k, v)| (p.as_str(k).unwrap().to_owned(), canon(p, v)))
        .collect()
}

#[test]
fn a_fold_stops_before_any_key_of_the_outermost_dict_with_what_came_before() {
    let dir = tempfile::tempdir().unwrap();
    for case in generate(dir.path()).iter().filter(|c| c.name == "core") {
        let data = std::fs::read(&case.path).unwrap();
        let whole = root_pairs(&pickle::read(&data[..]).unwrap());
        assert!(whole.len() > 10);
        for (k, (key, _)) in whole.iter().enumerate() {
            let stopped = pickle::read_folding(&data[..], &mut StopBefore(key)).unwrap();
            // Protocol 0 sets each pair as it comes (SETITEM, no MARK): no place to stop.
            let want = if case.proto == 0 {
                &whole[..]
            } else {
                &whole[..k]
            };
            assert_eq!(root_pairs(&stopped), want, "protocol {}: {key}", case.proto);
            let one_byte = pickle::read_folding(OneByte(&data), &mut StopBefore(key)).unwrap();
            assert_eq!(
                root_pairs(&one_byte),
                want,
                "protocol {}: {key}",
                case.proto
            );
            // Checked on a second thread: the same, and a cut at the end is still seen.
            let checked = pickle::read_folding_checked(&data[..], &data[..], &mut StopBefore(key));
            assert_eq!(root_pairs(&checked.unwrap()), want);
            let cut = &data[..data.len() - 1];
            let err = pickle::read_folding_checked(cut, cut, &mut StopBefore(key)).unwrap_err();
            assert!(matches!(err, PickleError::MissingStop { .. }), "{err}");
        }
    }
}

#[test]
fn bytes_sets_and_bytearray_read_in_the_protocols_that_have_opcodes_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let cases = generate(dir.path());
    let mut compared = 0;
    for case in cases.iter().filter(|c| c.canon.is_some()) {
        let first_protocol = match case.name.as_str() {
            "core" => 0,
            "bytes" => 3,
            "sets" => 4,
            "bytearray" => 5,
            other => panic!("unexpected case {other}"),
        };
        let result = pickle::read_path(&case.path);
        if case.proto >= first_protocol {
            assert_eq!(case.refused, None);
            let p = result.unwrap();
            assert_eq!(
                Some(canon(&p, p.root())),
                case.canon,
                "{} p{}",
                case.name,
                case.proto
            );
            compared += 1;
        } else {
            // Before these protocols, Python pickles bytes, sets and bytearrays by calling
            // a constructor (`_codecs.encode`, `builtins.set`, …): refused, as any call is.
            let (name, byte, offset) = case.refused.clone().expect("a refused opcode");
            assert!(name == "GLOBAL" || name == "STACK_GLOBAL", "{name}");
            let err = read_bytes(&std::fs::read(&case.path).unwrap()).unwrap_err();
            assert_refused(&err, &name, byte, offset);
            assert!(result
                .unwrap_err()
                .to_string()
                .contains(&format!("at byte offset {offset}")));
        }
    }
    assert_eq!(compared, 6 + 3 + 2 + 1);
}

#[test]
fn memo_sharing_and_cycles_stay_identities() {
    let dir = tempfile::tempdir().unwrap();
    for case in generate(dir.path()) {
        let p = match case.name.as_str() {
            "core" | "self_list" | "cycle_tuple" => pickle::read_path(&case.path).unwrap(),
            _ => continue,
        };
        let root = p.root();
        let seq = |v: Value| p.as_seq(v).unwrap();
        match case.name.as_str() {
            "core" => {
                let shared = seq(p.get(root, "shared").unwrap());
                assert!(matches!(shared[0], Value::List(_)));
                assert_eq!(shared[0], shared[1], "p{}", case.proto);
                assert!(matches!(shared[2], Value::Dict(_)));
                assert_eq!(shared[2], shared[3]);
                assert_eq!(shared[4], shared[5]);
                assert_eq!(p.get(shared[2], "k"), Some(shared[0]));
                assert_eq!(seq(shared[4])[1], shared[2]);
                let late_b = seq(p.get(root, "late_b").unwrap());
                assert_eq!(late_b[0], late_b[1]);
                assert_eq!(late_b[0], p.get(root, "late_a").unwrap());
            }
            "self_list" => assert_eq!(seq(root), &[root], "p{}", case.proto),
            _ => {
                // t = (l,); l.append(t)
                let list = seq(root)[0];
                assert!(matches!(list, Value::List(_)) && matches!(root, Value::Tuple(_)));
                assert_eq!(seq(list), &[root], "p{}", case.proto);
            }
        }
    }
}

/// Hand-made pickles for the opcodes Python 3 never writes (Python 2 strings, 8-byte
/// lengths, LONG4, DUP) and for corner cases; Python loads each and prints its canonical
/// form.
const HANDMADE_PY: &str = r#"
cases = [
    b"S'py2 \\x41\\n\\'q\\''\n.",
    b'S"dq"\n.',
    b"T\x03\x00\x00\x00abc.",
    b"U\x02hi.",
    b"\x80\x04\x8d\x03\x00\x00\x00\x00\x00\x00\x00\xe2\x82\xac.",
    b"\x80\x04\x8e\x02\x00\x00\x00\x00\x00\x00\x00ab.",
    b"\x80\x02\x8b\x02\x00\x00\x00\xff\x7f.",
    b"\x80\x02\x8b\x0a\x00\x00\x00" + (-5).to_bytes(10, 'little', signed=True) + b".",
    b"\x80\x02\x8a\x09" + (2**62).to_bytes(9, 'little', signed=True) + b".",
    b"\x80\x02\x8a\x00.",
    b"\x80\x02\x8a\x08" + (-2**63).to_bytes(8, 'little', signed=True) + b".",
    b"K\x052\x86.",
    b"(K\x01K\x02l.",
    b"(K\x01K\x02t.",
    b"(U\x01aK\x01U\x01b\x88d.",
    b"N(0.",
    b"K\x01(0\x85.",
    b"((lp0\nI1\nag0\nt.",
    b"K\x01K\x020.",
    b"K\x01(K\x02K\x031.",
    b"I01\n.", b"I00\n.", b"I-7\n.", b"L-5L\n.", b"L12\n.",
    b"F-0.0\n.", b"Finf\n.", b"F1e+100\n.",
    b"}(U\x01aK\x01U\x01aK\x02U\x01bK\x03u.",
    b"\x80\x04}\x94U\x01aK\x01sh\x00U\x01bK\x02s\x86.",
    b"V\\u20ac caf\xe9 \\U0001f600\n.",
    b"\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x07.",
    b"J\xff\xff\xff\xff.",
    b"M\xff\xff.",
    b"\x80\x04\x8f(K\x01K\x02\x90.",
    b"\x80\x05\x96\x01\x00\x00\x00\x00\x00\x00\x00z.",
    b"(Np7\n\x94g7\nh\x01t.",
    b"}r\x00\x01\x00\x00j\x00\x01\x00\x00\x86.",
    b"N\x80\x02.",
    # Runs of memo references filling new lists (read at once, see runs.rs): the same run
    # after its key was given a new value; a list of a run extended later; a run into a
    # list that is not empty.
    b"\x80\x04\x8c\x01a\x940](](h\x00e\x8c\x01bq\x000](h\x00e](h\x00ee.",
    b"\x80\x04\x8c\x01a\x940](]\x94(h\x00e](h\x00eh\x01\x8c\x01cae.",
    b"\x80\x04\x8c\x01a\x940](K\x01e(h\x00e.",
]
for data in cases:
    ops, refused = describe(data)
    print(json.dumps({'hex': data.hex(), 'canon': canon(pickle.loads(data)), 'ops': ops}))
"#;

#[test]
fn hand_made_pickles_read_as_python_reads_them() {
    for case in json_lines(&python(&format!("{CANON_PY}{HANDMADE_PY}"), &[])) {
        let data = hex(case["hex"].as_str().unwrap());
        let p = read_bytes(&data).unwrap_or_else(|e| panic!("{data:?}: {e}"));
        assert_eq!(
            canon(&p, p.root()),
            case["canon"].as_str().unwrap(),
            "{data:?}"
        );
    }
}

#[test]
fn the_fast_paths_read_the_real_snapshots_as_reading_opcode_by_opcode_does() {
    for name in ["lm_fullstep_ctx128.pickle", "finetune_no_timestamps.pickle"] {
        let data = std::fs::read(snapshot(name)).unwrap();
        let fast = pickle::read(&data[..]).unwrap();
        let slow = pickle::read(OneByte(&data)).unwrap();
        // The whole arenas, ids and spans included.
        assert!(format!("{fast:?}") == format!("{slow:?}"), "{name}");
    }
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn every_data_opcode_is_exercised_by_the_pickles_above() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen: BTreeSet<String> = generate(dir.path())
        .into_iter()
        .filter(|c| c.refused.is_none())
        .flat_map(|c| c.ops)
        .collect();
    for case in json_lines(&python(&format!("{CANON_PY}{HANDMADE_PY}"), &[])) {
        seen.extend(
            case["ops"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_str().unwrap().to_owned()),
        );
    }
    let all = python(
        "import pickletools; print(' '.join(o.name for o in pickletools.opcodes))",
        &[],
    );
    let refused = [
        "GLOBAL",
        "STACK_GLOBAL",
        "REDUCE",
        "BUILD",
        "INST",
        "OBJ",
        "NEWOBJ",
        "NEWOBJ_EX",
        "EXT1",
        "EXT2",
        "EXT4",
        "PERSID",
        "BINPERSID",
        "NEXT_BUFFER",
        "READONLY_BUFFER",
    ];
    let data_opcodes: BTreeSet<String> = all
        .split_whitespace()
        .filter(|name| !refused.contains(name))
        .map(str::to_owned)
        .collect();
    assert_eq!(data_opcodes.len(), 68 - 15);
    let missing: Vec<&String> = data_opcodes.difference(&seen).collect();
    assert!(
        missing.is_empty(),
        "data opcodes no test pickle uses: {missing:?}"
    );
}

#[test]
fn equal_strings_share_one_id_even_when_not_memoized() {
    // Two SHORT_BINUNICODE "x" (no MEMOIZE) and one "y" in a tuple.
    let p = read_bytes(b"\x80\x04\x8c\x01x\x8c\x01x\x8c\x01y\x87.").unwrap();
    let items = p.as_seq(p.root()).unwrap();
    assert_eq!(items[0], items[1]);
    assert_ne!(items[0], items[2]);
    let id = p.str_id(items[0]).unwrap();
    assert_eq!(p.str_by_id(id), "x");
    assert_eq!(p.find_str("x"), Some(id));
    assert_eq!(p.find_str("z"), None);
    assert_eq!(p.str_count(), 2);
}

// ---- the real allocator snapshots

fn snapshot(name: &str) -> PathBuf {
    common::shared_data(&format!("snapshots/{name}"))
}

/// Facts about a snapshot as Python computes them, loading it with an unpickler that
/// refuses every global (so the snapshot is plain data).
const SNAPSHOT_FACTS_PY: &str = r#"
import collections
obj = snap
traces = obj['device_traces']
entries = [e for d in traces for e in d]
frame_dicts = {}
for s in obj['segments']:
    for b in s['blocks']:
        for fr in b['frames']:
            frame_dicts[id(fr)] = fr
for e in entries:
    for fr in e['frames']:
        frame_dicts[id(fr)] = fr
print(json.dumps({
    'top_keys': list(obj),
    'segments': len(obj['segments']),
    'total_size': sum(s['total_size'] for s in obj['segments']),
    'allocated_size': sum(s['allocated_size'] for s in obj['segments']),
    'blocks': sum(len(s['blocks']) for s in obj['segments']),
    'active_blocks': sum(b['state'] == 'active_allocated' for s in obj['segments'] for b in s['blocks']),
    'traces_per_device': [len(d) for d in traces],
    'with_time_us': sum('time_us' in e for e in entries),
    'time_us_sum': str(sum(e.get('time_us', 0) for e in entries)),
    'trace_frames': sum(len(e['frames']) for e in entries),
    'distinct_frame_dicts': len(frame_dicts),
    'actions': collections.Counter(e['action'] for e in entries),
    'canon_first_segment': canon({k: v for k, v in obj['segments'][0].items() if k != 'frames'}),
}))
"#;

#[test]
fn the_real_snapshots_match_python_and_the_reference_figures() {
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(snapshot("reference.json")).unwrap()).unwrap();
    for name in ["lm_fullstep_ctx128.pickle", "finetune_no_timestamps.pickle"] {
        let path = snapshot(name);
        let facts: serde_json::Value = serde_json::from_str(&python(
            &format!("{CANON_PY}{LOAD_SNAPSHOT_PY}{SNAPSHOT_FACTS_PY}"),
            &[&path],
        ))
        .unwrap();
        let p = pickle::read_path(&path).unwrap();
        let root = p.root();
        let keys: Vec<&str> = p
            .as_dict(root)
            .unwrap()
            .iter()
            .map(|&(k, _)| p.as_str(k).unwrap())
            .collect();
        assert_eq!(serde_json::json!(keys), facts["top_keys"], "{name}");

        let segments = p.as_seq(p.get(root, "segments").unwrap()).unwrap();
        let sum = |key: &str| -> i64 {
            segments
                .iter()
                .map(|&s| p.as_int(p.get(s, key).unwrap()).unwrap())
                .sum()
        };
        assert_eq!(segments.len() as u64, facts["segments"].as_u64().unwrap());
        assert_eq!(
            segments.len() as u64,
            reference[name]["segments"].as_u64().unwrap()
        );
        assert_eq!(sum("total_size"), facts["total_size"].as_i64().unwrap());
        assert_eq!(
            sum("total_size"),
            reference[name]["reserved_bytes"].as_i64().unwrap()
        );
        assert_eq!(
            sum("allocated_size"),
            reference[name]["allocated_bytes"].as_i64().unwrap()
        );
        assert_eq!(
            canon_without(&p, segments[0], "frames"),
            facts["canon_first_segment"].as_str().unwrap()
        );

        let blocks: Vec<Value> = segments
            .iter()
            .flat_map(|&s| {
                p.as_seq(p.get(s, "blocks").unwrap())
                    .unwrap()
                    .iter()
                    .copied()
            })
            .collect();
        assert_eq!(blocks.len() as u64, facts["blocks"].as_u64().unwrap());
        let active = p.find_str("active_allocated").unwrap();
        let active_blocks = blocks
            .iter()
            .filter(|&&b| p.str_id(p.get(b, "state").unwrap()) == Some(active))
            .count();
        assert_eq!(
            active_blocks as u64,
            facts["active_blocks"].as_u64().unwrap()
        );

        let traces = p.as_seq(p.get(root, "device_traces").unwrap()).unwrap();
        let per_device: Vec<usize> = traces.iter().map(|&d| p.as_seq(d).unwrap().len()).collect();
        assert_eq!(serde_json::json!(per_device), facts["traces_per_device"]);
        let entries: Vec<Value> = traces
            .iter()
            .flat_map(|&d| p.as_seq(d).unwrap().iter().copied())
            .collect();
        let times: Vec<i128> = entries
            .iter()
            .filter_map(|&e| p.get(e, "time_us").map(|t| p.as_int(t).unwrap().into()))
            .collect();
        assert_eq!(times.len() as u64, facts["with_time_us"].as_u64().unwrap());
        assert_eq!(
            times.iter().sum::<i128>().to_string(),
            facts["time_us_sum"].as_str().unwrap()
        );
        let mut actions = std::collections::BTreeMap::<&str, u64>::new();
        for &e in &entries {
            *actions
                .entry(p.as_str(p.get(e, "action").unwrap()).unwrap())
                .or_default() += 1;
        }
        assert_eq!(serde_json::json!(actions), facts["actions"]);
        for (action, count) in reference[name]["trace_actions"].as_object().unwrap() {
            assert_eq!(
                actions.get(action.as_str()).copied(),
                count.as_u64(),
                "{name} {action}"
            );
        }

        // The frames: as many entries as Python sees, and exactly as many distinct dicts
        // (Python's object identities), because memo sharing stays sharing.
        let mut frame_dicts = BTreeSet::new();
        let mut trace_frames = 0;
        for &e in &entries {
            let frames = p.as_seq(p.get(e, "frames").unwrap()).unwrap();
            trace_frames += frames.len();
            frame_dicts.extend(frames.iter().copied().map(dict_id));
        }
        for &b in &blocks {
            let frames = p.as_seq(p.get(b, "frames").unwrap()).unwrap();
            frame_dicts.extend(frames.iter().copied().map(dict_id));
        }
        assert_eq!(trace_frames as u64, facts["trace_frames"].as_u64().unwrap());
        assert_eq!(
            frame_dicts.len() as u64,
            facts["distinct_frame_dicts"].as_u64().unwrap()
        );
    }
}

fn dict_id(v: Value) -> usize {
    match v {
        Value::Dict(id) => id.index(),
        other => panic!("a frame is a dict, not {}", other.type_name()),
    }
}

/// The canonical form of a dict without one of its keys.
fn canon_without(p: &Pickle, dict: Value, skip: &str) -> String {
    let mut out = String::from("{");
    for &(key, value) in p.as_dict(dict).unwrap() {
        if p.as_str(key) == Some(skip) {
            continue;
        }
        if out.len() > 1 {
            out.push(',');
        }
        write_canon(p, key, &mut out);
        out.push(':');
        write_canon(p, value, &mut out);
    }
    out.push('}');
    out
}

// ---- pickles that would run code

/// Pickles of an object whose `__reduce__` is `os.system("touch <marker>")`, protocols
/// 0–5, and one more for a control marker.
const MALICIOUS_PY: &str = r#"
out, marker, control = sys.argv[1], sys.argv[2], sys.argv[3]
class Evil:
    def __init__(self, path):
        self.path = path
    def __reduce__(self):
        return (os.system, ('touch ' + self.path,))
for proto in range(6):
    data = pickle.dumps({'payload': [Evil(marker)]}, protocol=proto)
    path = os.path.join(out, 'evil.p%d.pickle' % proto)
    with open(path, 'wb') as f:
        f.write(data)
    ops, refused = describe(data)
    print(json.dumps({'path': path, 'refused': refused}))
with open(os.path.join(out, 'control.pickle'), 'wb') as f:
    f.write(pickle.dumps(Evil(control), protocol=4))
"#;

#[test]
fn pickles_that_would_run_code_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("MARKER");
    let control = dir.path().join("CONTROL");
    let cases = json_lines(&python(
        &format!("{CANON_PY}{MALICIOUS_PY}"),
        &[dir.path(), &marker, &control],
    ));
    assert_eq!(cases.len(), 6);
    let mut names = BTreeSet::new();
    for case in cases {
        let path = Path::new(case["path"].as_str().unwrap());
        let refused = case["refused"].as_array().unwrap();
        let name = refused[0].as_str().unwrap();
        names.insert(name.to_owned());
        let (byte, offset) = (
            refused[1].as_u64().unwrap() as u8,
            refused[2].as_u64().unwrap(),
        );
        let err = read_bytes(&std::fs::read(path).unwrap()).unwrap_err();
        assert_refused(&err, name, byte, offset);
        assert!(
            err.to_string().contains("would import or call code"),
            "{err}"
        );
        let err = pickle::read_path(path).unwrap_err();
        assert!(matches!(err, gpuscope::Error::BadInput { .. }), "{err}");
        assert!(err
            .to_string()
            .contains(&format!("{name} (0x{byte:02x}) at byte offset {offset}")));
    }
    assert_eq!(
        names,
        BTreeSet::from(["GLOBAL".to_owned(), "STACK_GLOBAL".to_owned()])
    );
    assert!(!marker.exists(), "reading a pickle ran its code");
    // Control: Python's own pickle.load does run these pickles.
    python(
        "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'))",
        &[&dir.path().join("control.pickle")],
    );
    assert!(
        control.exists(),
        "the control pickle did not run under Python"
    );
    assert!(!marker.exists());
}

#[test]
fn every_refused_opcode_is_named_with_its_offset() {
    for (byte, name) in [
        (b'c', "GLOBAL"),
        (0x93, "STACK_GLOBAL"),
        (b'R', "REDUCE"),
        (b'b', "BUILD"),
        (b'i', "INST"),
        (b'o', "OBJ"),
        (0x81, "NEWOBJ"),
        (0x92, "NEWOBJ_EX"),
        (0x82, "EXT1"),
        (0x83, "EXT2"),
        (0x84, "EXT4"),
        (b'P', "PERSID"),
        (b'Q', "BINPERSID"),
        (0x97, "NEXT_BUFFER"),
        (0x98, "READONLY_BUFFER"),
    ] {
        let data = [0x80, 0x05, b'N', byte, b'.'];
        let err = read_bytes(&data).unwrap_err();
        assert_refused(&err, name, byte, 3);
    }
    let err = read_bytes(b"\x80\x05\x97.").unwrap_err();
    assert!(err.to_string().contains("out-of-band buffer"), "{err}");
}

// ---- bad input

fn error_of(data: &[u8]) -> String {
    match read_bytes(data) {
        Ok(p) => panic!("{data:?} read as {}", canon(&p, p.root())),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_input_gives_errors_that_say_what_and_where() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "not a pickle: the input is empty at byte offset 0"),
        (
            b"{\"json\": 1}",
            "not a pickle: byte 0x7b is no pickle opcode at byte offset 0",
        ),
        (b"\x80\x04\xff", "unknown opcode byte 0xff at byte offset 2"),
        (
            b"\x80\x06N.",
            "bad argument to PROTO at byte offset 0: unsupported pickle protocol 6",
        ),
        (
            b"\x80\x02h\x11.",
            "memo key 17 not defined at byte offset 2",
        ),
        (
            b"\x80\x02j\x00\x00\x00\x01.",
            "memo key 16777216 not defined at byte offset 2",
        ),
        (b"g3\n.", "memo key 3 not defined at byte offset 0"),
        (
            b"N\x94g-1\n.",
            "bad argument to GET at byte offset 2: negative memo key",
        ),
        (
            b"a.",
            "stack underflow: APPEND at byte offset 0 needs more values than the stack holds",
        ),
        (b"]N(a.", "stack underflow: APPEND at byte offset 3"),
        (b"]0.", "stack underflow: STOP at byte offset 2"),
        (
            b"(.",
            "STOP at byte offset 1 with the MARK at byte offset 0 never closed",
        ),
        (b"0.", "stack underflow: POP at byte offset 0"),
        (
            b"N(N.",
            "STOP at byte offset 3 with the MARK at byte offset 1 never closed",
        ),
        (
            b"NN.",
            "STOP at byte offset 2 leaves 1 values on the stack besides the result",
        ),
        (
            b"(",
            "truncated pickle: ended without STOP at byte offset 1",
        ),
        (
            b"N",
            "truncated pickle: ended without STOP at byte offset 1",
        ),
        (
            b"\x80\x04\x8c\x05abc",
            "truncated pickle: ended inside SHORT_BINUNICODE at byte offset 2",
        ),
        (
            b"\x80",
            "truncated pickle: ended inside PROTO at byte offset 0",
        ),
        (
            b"I12",
            "truncated pickle: ended inside INT at byte offset 0",
        ),
        (
            b"\x8d\xff\xff\xff\xff\xff\xff\xff\x7fab",
            "truncated pickle: ended inside BINUNICODE8",
        ),
        (
            b"\x8e\xff\xff\xff\xff\xff\xff\xff\xff",
            "truncated pickle: ended inside BINBYTES8",
        ),
        (
            b"\x96\x00\x00\x00\x00\x00\x00\x00\x80",
            "truncated pickle: ended inside BYTEARRAY8",
        ),
        (
            b"X\xff\xff\xff\xffabc",
            "truncated pickle: ended inside BINUNICODE at byte offset 0",
        ),
        (
            b"\x8b\xff\xff\xff\x7f\x00",
            "truncated pickle: ended inside LONG4",
        ),
        (
            b"\x8b\xff\xff\xff\xff.",
            "bad argument to LONG4 at byte offset 0: negative length -1",
        ),
        (
            b"T\xfe\xff\xff\xff.",
            "bad argument to BINSTRING at byte offset 0: negative length -2",
        ),
        (
            b"L12x3L\n.",
            "bad argument to LONG at byte offset 0: not a decimal integer",
        ),
        (
            b"I1x\n.",
            "bad argument to INT at byte offset 0: not a decimal integer",
        ),
        (
            b"Fx\n.",
            "bad argument to FLOAT at byte offset 0: not a float",
        ),
        (
            b"Sabc\n.",
            "bad argument to STRING at byte offset 0: the STRING argument must be quoted",
        ),
        (b"V\\ud800\n.", "bad argument to UNICODE at byte offset 0"),
        (
            b"\x8c\x02\xc3\x28.",
            "invalid UTF-8 in string at byte offset 0 (SHORT_BINUNICODE)",
        ),
        (
            b"X\x02\x00\x00\x00\xed\xa0.",
            "invalid UTF-8 in string at byte offset 0 (BINUNICODE)",
        ),
        (
            b"}K\x01a.",
            "APPEND at byte offset 3 expects a list or set, found dict",
        ),
        (
            b")(K\x01e.",
            "APPENDS at byte offset 4 expects a list or set, found tuple",
        ),
        (
            b"]K\x01K\x02s.",
            "SETITEM at byte offset 5 expects a dict, found list",
        ),
        (
            b"}(K\x01u.",
            "bad argument to SETITEMS at byte offset 4: an odd number of values",
        ),
        (
            b"(K\x01d.",
            "bad argument to DICT at byte offset 3: an odd number of values",
        ),
        (b"(u.", "stack underflow: SETITEMS at byte offset 1"),
        (b"}(K\x01(K\x02u.", "bad argument to SETITEMS"),
        (
            b"e.",
            "APPENDS at byte offset 0 needs a MARK and there is none",
        ),
        (
            b"K\x01K\x02\x87.",
            "stack underflow: TUPLE3 at byte offset 4",
        ),
        (
            b"K\x01(K\x02\x86.",
            "stack underflow: TUPLE2 at byte offset 5",
        ),
        (b"]K\x01(s.", "stack underflow: SETITEM at byte offset 4"),
        (b"(2.", "stack underflow: DUP at byte offset 1"),
        (
            b"1.",
            "POP_MARK at byte offset 0 needs a MARK and there is none",
        ),
        (b"N(q\x00.", "stack underflow: BINPUT at byte offset 2"),
    ];
    for (data, want) in cases {
        let got = error_of(data);
        assert!(
            got.starts_with(want),
            "{data:?}: {got:?} does not start with {want:?}"
        );
    }
}

/// Integers past `i64`, each in every protocol (0 writes them as decimal text, 2 and up
/// as LONG1 or LONG4 bytes): Python's canonical form, except that an int wider than 64
/// bits is its nearest float (`~f:` and its bits, `float(i)` rounding half to even).
const WIDE_INTS_PY: &str = r#"
wide = [2**63, 2**64 - 1, 2**64 - 2, -2**63 - 1, 2**64, -2**64, 2**100 + 1, -2**100,
        2**80 + 2**27 + 1, 2**80 + 2**27, 10**30, 2**1000 * 3 // 7, 2**63 - 1, -2**63]
def wide_canon(i):
    if -2**63 <= i < 2**64: return str(i)
    return '~f:%016x' % struct.unpack('>Q', struct.pack('>d', float(i)))[0]
for proto in range(6):
    data = pickle.dumps(wide, protocol=proto)
    print(json.dumps({'hex': data.hex(), 'canon': '[' + ','.join(map(wide_canon, wide)) + ']'}))
"#;

#[test]
fn integers_wider_than_i64_are_read_as_numbers() {
    for case in json_lines(&python(&format!("{CANON_PY}{WIDE_INTS_PY}"), &[])) {
        let data = hex(case["hex"].as_str().unwrap());
        let p = read_bytes(&data).unwrap_or_else(|e| panic!("{data:?}: {e}"));
        assert_eq!(canon(&p, p.root()), case["canon"].as_str().unwrap());
        let items = p.as_seq(p.root()).unwrap();
        assert_eq!(p.as_u64(items[1]), Some(u64::MAX));
        assert_eq!(p.as_int(items[1]), None);
        assert_eq!(p.as_f64(items[6]), Some(2f64.powi(100)));
        assert_eq!(items[6].type_name(), "int");
    }
}

#[test]
fn read_path_maps_errors_to_the_engine_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pickle");
    assert!(matches!(
        pickle::read_path(&missing),
        Err(gpuscope::Error::Io { .. })
    ));
    let empty = dir.path().join("empty.pickle");
    std::fs::write(&empty, b"").unwrap();
    let err = pickle::read_path(&empty).unwrap_err();
    assert!(matches!(err, gpuscope::Error::BadInput { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: not a pickle: the input is empty at byte offset 0",
            empty.display()
        )
    );
    assert!(matches!(
        pickle::read_path(dir.path()),
        Err(gpuscope::Error::Io { .. })
    ));
}

#[test]
fn every_truncation_of_a_pickle_is_an_error() {
    // Bytes, bytearray and sets only in protocol 5, where they need no constructor call.
    let script = format!(
        "{CANON_PY}\nplain = {{'a': [1, -2**40, 2.5, None, True], 'b': ('x' * 300, 'caf\\u00e9'), 'c': {{'d': {{}}}}, 'e': [(), [], ([1],)]}}\n\
         for proto in range(6):\n    print(pickle.dumps(plain, protocol=proto).hex())\n\
         print(pickle.dumps(dict(plain, f=b'\\x00\\x01', g=bytearray(b'z'), h={{1, 2}}, i=frozenset()), protocol=5).hex())\n"
    );
    for line in python(&script, &[]).lines() {
        let data = hex(line);
        let whole = read_bytes(&data).unwrap();
        assert!(whole.as_dict(whole.root()).is_some());
        for len in 0..data.len() {
            match read_bytes(&data[..len]) {
                Ok(_) => panic!("a {len}-byte prefix of {line} read"),
                Err(PickleError::NotAPickle { .. }) => assert_eq!(len, 0),
                Err(
                    PickleError::Truncated { offset, .. } | PickleError::MissingStop { offset },
                ) => {
                    assert!(offset <= len as u64)
                }
                Err(other) => panic!("a {len}-byte prefix: unexpected {other}"),
            }
        }
    }
}

#[test]
fn random_bytes_never_panic() {
    // A fixed xorshift sequence: reproducible, no dependency.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut errors = 0;
    for round in 0..20_000 {
        let len = (next() % 64) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 0 {
            // Mostly opcode bytes, so that the reader gets past the first one.
            let opcodes =
                b"()0123NIJKLMXV]ae}suhjgpqt.\x80\x85\x86\x87\x88\x89\x8a\x8c\x8f\x90\x91\x94\x95";
            for b in &mut data {
                if *b < 200 {
                    *b = opcodes[usize::from(*b) % opcodes.len()];
                }
            }
        }
        if let Ok(p) = read_bytes(&data) {
            walk(&p);
        } else {
            errors += 1;
        }
    }
    assert!(errors > 15_000, "{errors}");
    assert!(error_of(&[0x12, 0x9a, 0x44, 0xe0]).starts_with("not a pickle"));
}

/// Visits every value reachable from the root once (containers may be cyclic).
fn walk(p: &Pickle) {
    let mut seen = BTreeSet::new();
    let mut todo = vec![p.root()];
    while let Some(v) = todo.pop() {
        match v {
            Value::List(id) | Value::Tuple(id) if seen.insert((0, id.index())) => {
                todo.extend_from_slice(p.as_seq(v).unwrap());
            }
            Value::Dict(id) if seen.insert((1, id.index())) => {
                for &(k, x) in p.as_dict(v).unwrap() {
                    todo.push(k);
                    todo.push(x);
                }
            }
            Value::Str(id) => assert_eq!(p.as_str(v), Some(p.str_by_id(id))),
            Value::Bytes(_) => assert!(p.as_bytes(v).is_some()),
            _ => {}
        }
    }
}

/// Inputs the fuzz target `pickle_read` once crashed on, each with what it showed.
#[test]
fn fuzz_regressions() {
    // The target's own check was wrong: a NaN value is not `==` to itself, so
    // `get(dict, "G") == Some(value)` failed. `get` returns the same NaN, bit for bit.
    let nan_value: &[u8] =
        b"\x80\x03}q\x00(X\x01\x00\x00\x00GG\xff\xff\xdf\x1bGGG\xaeGGGGGGG\x93\x86q\x09)qqq\x0bu.";
    let p = read_bytes(nan_value).unwrap();
    walk(&p);
    let Some(Value::Float(f)) = p.get(p.root(), "G") else {
        panic!("no float under G")
    };
    assert_eq!(f.to_bits(), 0xffff_df1b_4747_47ae);
    assert_eq!(p.as_dict(p.root()).unwrap().len(), 2);
}

/// Reading time of the largest real snapshot (3.2 MB). Not a test of correctness: run it
/// with `cargo test --release -p gpuscope --test engine pickle_read -- --ignored --nocapture`,
/// under `/usr/bin/time -v` for the peak memory.
#[test]
#[ignore]
fn reading_time_of_the_largest_snapshot() {
    let path = snapshot("lm_fullstep_ctx128.pickle");
    let mut times = Vec::new();
    for _ in 0..10 {
        let start = std::time::Instant::now();
        let p = pickle::read_path(&path).unwrap();
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(p.as_dict(p.root()).is_some());
    }
    times.sort_by(f64::total_cmp);
    println!(
        "read {}: best {:.1} ms, median {:.1} ms",
        path.display(),
        times[0],
        times[times.len() / 2]
    );
}
