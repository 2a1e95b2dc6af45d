# bandwidth-hog.py: keeps the GPU's memory busy with large device-to-device
# copies, so that a fleet check run beside it sees a node slowed on purpose
# (bench/gpu/pipeline.sh, step shard). GPU machine only (PyTorch).
#   python3 bench/gpu/bandwidth-hog.py READY_FILE SECONDS
# Touches READY_FILE once the first copies ran, then copies until SECONDS
# have passed (or it is killed).
import sys
import time

import torch

ready, seconds = sys.argv[1], float(sys.argv[2])
# 2 x 2 GiB: far past the 50 MB L2, so every copy streams from HBM
src = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(src)
dst.copy_(src)
torch.cuda.synchronize()
open(ready, "w").close()
end = time.time() + seconds
copies = 0
while time.time() < end:
    for _ in range(20):
        dst.copy_(src)
    torch.cuda.synchronize()
    copies += 20
print(f"bandwidth-hog: {copies} copies of 2 GiB", file=sys.stderr)
