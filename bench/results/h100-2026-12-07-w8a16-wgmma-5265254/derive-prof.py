# derive-prof.py: call2-kernels.txt from the profile's raw csv (call2-prof.tar.xz unpacked here): per
# kernel launch its time, DRAM bytes and % of peak, L2 bytes, warps active, grid, registers, dynamic
# shared memory, and the five largest stall reasons per issued instruction
import csv
rows = list(csv.reader(open('prof/fp8o.raw.csv')))
hdr, units, data = rows[0], rows[1], rows[2:]
idx = {h: i for i, h in enumerate(hdr)}
want = ['Kernel Name', 'gpu__time_duration.sum', 'dram__bytes_read.sum', 'dram__throughput.avg.pct_of_peak_sustained_elapsed',
        'lts__t_bytes.sum', 'sm__warps_active.avg.pct_of_peak_sustained_active', 'launch__grid_size',
        'launch__registers_per_thread', 'launch__shared_mem_per_block_dynamic']
stalls = [h for h in hdr if h.startswith('smsp__average_warps_issue_stalled_') and h.endswith('_per_issue_active.ratio')]
print([(w, units[idx[w]]) for w in want if w in idx])
for r in data:
    vals = [r[idx[w]][:28] if w in idx else '-' for w in want]
    st = sorted(((float(r[idx[s]] or 0), s.replace('smsp__average_warps_issue_stalled_', '').replace('_per_issue_active.ratio', ''))
                 for s in stalls), reverse=True)[:5]
    print(' | '.join(vals), ' | stalls:', ', '.join(f"{n} {v:.1f}" for v, n in st))
