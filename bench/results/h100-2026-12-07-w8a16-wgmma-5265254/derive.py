# derive.py: per (op, shape, rows) the best w8a16.wgmma row against the best other candidate, from
# the call's in-step sweep store (call1-stores-tables.tar.xz unpacked here): median of each record's samples
import json, statistics, glob, math
from collections import defaultdict
by = defaultdict(dict)
for f in glob.glob('stores/h100/*.jsonl'):
    for line in open(f):
        r = json.loads(line)
        if r.get('kind') == 'candidate' and r['status'] == 'ok':
            by[(r['op'], r['n'], r['k'], r['rows'])][r['candidate']] = statistics.median(r['samples_us'])
ratios = defaultdict(list)
for key in sorted(by):
    d = by[key]
    new = {c: t for c, t in d.items() if 'w8a16.wgmma' in c}
    old = {c: t for c, t in d.items() if 'w8a16.wgmma' not in c}
    if not new: continue
    bo, bn = min(old, key=old.get), min(new, key=new.get)
    ratios[key[3]].append(new[bn] / old[bo])
    print(f"{key[0]:6s} {key[1]:5d}x{key[2]:<5d} rows {key[3]:3d}  best other {bo:32s} {old[bo]:7.2f} us  best w8a16.wgmma {bn:32s} {new[bn]:7.2f} us  x{new[bn]/old[bo]:.3f}")
for rows in sorted(ratios):
    v = ratios[rows]
    print(f"rows {rows:3d}: best w8a16.wgmma / best other, geomean over {len(v)} shapes: {math.exp(sum(map(math.log, v)) / len(v)):.3f}")
