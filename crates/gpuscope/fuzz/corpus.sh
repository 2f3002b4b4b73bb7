#!/usr/bin/env bash
# Fills corpus/pickle_read, the inputs cargo fuzz starts from and mutates: the first 64 KB
# of each real allocator snapshot and small pickles of plain data that python3 (stdlib
# only) writes for protocols 0-5.
set -euo pipefail
cd "$(dirname "$0")"
corpus=corpus/pickle_read
mkdir -p "$corpus"
for f in ../../../../shared/data/snapshots/*.pickle; do
    head -c 65536 "$f" > "$corpus/snapshot_head_$(basename "$f")"
done
python3 - "$corpus" <<'PY'
import os, pickle, sys
out = sys.argv[1]
shared = [1, 'shared']
objects = {
    'scalars': [None, True, False, 0, -1, 255, 65536, -2**31, 2**63 - 1, -2**63, 1.5,
                float('inf'), float('nan'), -0.0, '', 'caf\u00e9 \U0001f600', 'x' * 300],
    'nested': {'a': {'b': [shared, shared, (shared,)]}, (1, 'k'): (), 'e': {}},
    'frames': [{'filename': 'f.py', 'line': i, 'name': 'fn'} for i in range(5)],
    # torch's line of a C++ frame it could not place: size_t(-1), a 9-byte LONG1
    'unplaced': [{'filename': '??', 'line': 2**64 - 1, 'name': 'c10::fn'}] * 2,
    'wide': [2**63, 2**64 - 1, -2**63 - 1, 2**64, -2**100, 3**200],
    'bytes': [b'', b'\x00\xff', bytearray(b'ab')],
    'sets': [{1, 2}, frozenset({'a'}), set()],
    'big': list(range(1100)),
    # the stopping fold's key "b", with keys before and after it
    'stop': {'a': [1, 'b'], 'b': {'x': ('b', 2)}, 'c': 'b' * 300},
}
loop = []
loop.append(loop)
objects['loop'] = loop
for name, obj in objects.items():
    for proto in range(6):
        try:
            data = pickle.dumps(obj, protocol=proto)
        except Exception:
            continue
        with open(os.path.join(out, '%s_p%d.pickle' % (name, proto)), 'wb') as f:
            f.write(data)
PY
ls "$corpus" | wc -l
