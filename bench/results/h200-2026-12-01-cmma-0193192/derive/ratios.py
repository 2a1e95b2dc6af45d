# ratios.py STORE [FAMILY]: per rows bucket and shape, from the sweep records of
# STORE (dirs of *.jsonl; several separated by ','), bf16: the best FAMILY row
# (default cmma) against the class default (blaslt / gated.blaslt) and the read
# floor (the faster of its plain and PDL launches), the best of every family,
# and each FAMILY row's worst distance to the best candidate (for pruning:
# kept rows come within 2 % somewhere).
import glob, json, math, statistics, sys
def gm(v): return math.exp(sum(map(math.log, v)) / len(v)) if v else float('nan')
recs, floor = {}, {}
for d in sys.argv[1].split(','):
  for f in glob.glob(d + '/*.jsonl'):
    for l in open(f):
      r = json.loads(l)
      if r.get('dtype') != 'bf16': continue
      key = (r['op'], r['n'], r['k'], r['rows'])
      if r.get('kind') == 'floor':
        med = statistics.median(r['samples_us'])
        floor[key] = min(floor.get(key, 9e9), med); continue
      if r.get('kind') != 'candidate' or r.get('status') != 'ok': continue
      recs.setdefault(key, {})[r['candidate']] = statistics.median(r['samples_us'])
fam = sys.argv[2] if len(sys.argv) > 2 else 'cmma'
mine = lambda n: n.split('.')[0] == fam or n.startswith('gated.' + fam + '.')
print('%-28s %5s %8s %8s %8s %-24s %8s %-24s %7s %7s' % ('shape', 'rows', 'floor', 'default', 'best', 'best of all', fam, 'best ' + fam, 'x dflt', '/floor'))
buckets = {}
closest = {}
for key in sorted(recs):
  c = recs[key]; d = c.get('blaslt') or c.get('gated.blaslt'); fl = floor.get(key)
  if d is None or fl is None: continue
  ball = min(c.items(), key=lambda x: x[1])
  ms = [x for x in c.items() if mine(x[0])]
  for n, v in ms:
    if n not in closest or v / ball[1] < closest[n][0]: closest[n] = (v / ball[1], key)
  if not ms: continue
  bm = min(ms, key=lambda x: x[1])
  print('%-28s %5d %8.2f %8.2f %8.2f %-24s %8.2f %-24s %7.3f %7.3f' % ('%s %dx%d' % key[:3], key[3], fl, d, ball[1], ball[0], bm[1], bm[0], d / bm[1], bm[1] / fl))
  bo = min(v for n, v in c.items() if not mine(n))
  b = buckets.setdefault(key[3], {'fam_x': [], 'fam_f': [], 'all_x': [], 'all_f': [], 'oth_x': [], 'oth_f': []})
  b['fam_x'].append(d / bm[1]); b['fam_f'].append(bm[1] / fl); b['all_x'].append(d / ball[1]); b['all_f'].append(ball[1] / fl)
  b['oth_x'].append(d / bo); b['oth_f'].append(bo / fl)
print('\nper rows bucket, geomean over the shapes: default / best, best / floor')
for rows in sorted(buckets):
  b = buckets[rows]
  print('rows %4d  best %s: x%.3f %.3f   best of all: x%.3f %.3f   best of all but %s: x%.3f %.3f   (%d shapes)' % (rows, fam, gm(b['fam_x']), gm(b['fam_f']), gm(b['all_x']), gm(b['all_f']), fam, gm(b['oth_x']), gm(b['oth_f']), len(b['fam_x'])))
print('\nclosest each %s row came to the best candidate (time / best time)' % fam)
for n, (r, k) in sorted(closest.items(), key=lambda x: x[1][0]): print('  %-26s %.3f at %s' % (n, r, k))
