"""decode_step.py: serve-bench's decode step written in PyTorch, as a user would.

Runs on the GPU machine only (PyTorch and Triton live there; nothing on the CPU
machines or in CI needs this file). The dimensions come from bench/peers/dims.ts
(lib/models.ts through serve-bench's dimsOf), one JSON line per model.

The step, bf16 weights (random, uniform, 1/sqrt(K) like kpick's), fp32 residual:
  embedding of the tokens; per layer: rmsnorm, fused qkv linear, rotate-half
  rope of q and k, k and v into the KV cache at the row's position, grouped-
  query attention over the cache (each KV head read once for its group: q as
  [rows, kv heads, group, dim] against the cache by batched matmul, fp32
  softmax with positions past the row's masked; --attention sdpa uses
  scaled_dot_product_attention with enable_gqa instead), o linear + residual, rmsnorm,
  fused gate_up linear, silu(gate) * up, down linear + residual; final rmsnorm,
  lm_head, argmax, position + 1.
The attention reads the cache's whole capacity (context + steps + 1 positions)
with a mask, so the peer reads at most steps / context more KV bytes than kpick.

Two arms, each one CUDA graph of the whole step, timed like serve-bench
(kpick_model_time): positions put back at the context, `steps` graph launches
back to back with an event between each two; tok/s = c * steps / run time,
the median over runs.
  eager     the PyTorch ops as written
  compiled  torch.compile(mode="max-autotune-no-cudagraphs") of the layer, the
            step's start and its head (the layer is compiled once per shape and
            called for every layer), captured in the same one graph

--compile-cache-out FILE keeps torch.compile's artifacts (torch.compiler.save_cache_artifacts:
the compiled kernels and the autotuner's choices) in FILE after each compiled (model, c);
--compile-cache-in FILE (repeatable: a run keeps only the artifacts it made, not those it
loaded) loads such files first, so that a later run compiles nothing the earlier ones did (a call short of time for every compile) and its compiled arm is the earlier
run's draw of max-autotune, not a new one (each compile's search can pick other kernels:
Qwen3-0.6B c=1 ran 893, 630 and 587 tok/s in three calls). A row says which cache it loaded
(compile_cache: the files' sha256s, first 16 hex digits, joined by +, where every graph of that
(model, c) came from them, by inductor's FX graph cache counters; null: compiled afresh).

Also measured once: the read ceiling (the fastest of a Triton read kernel and
torch reductions over an 8 GiB buffer, bytes read over time) and the copy rate.
Prints JSON lines on stdout: kind ceiling, then kind row per (model, c, arm).
  python3 bench/peers/decode_step.py --dims dims.jsonl --c 1,4,16,64 --context 256 --steps 32
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

DT = torch.bfloat16


def say(*a):
    print("peer:", *a, file=sys.stderr, flush=True)


def emit(obj):
    print(json.dumps(obj), flush=True)


# ---- the read ceiling -----------------------------------------------------------


def time_ms(fn, reps=10, warm=3):
    for _ in range(warm):
        fn()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    ev[0].record()
    for i in range(reps):
        fn()
        ev[i + 1].record()
    torch.cuda.synchronize()
    t = sorted(ev[i].elapsed_time(ev[i + 1]) for i in range(reps))
    return t[len(t) // 2]


def read_ceiling():
    """GB/s of the fastest whole read of an 8 GiB buffer, and of a copy (read + write)."""
    n = 1 << 31  # int32 words: 8 GiB
    x = torch.empty(n, dtype=torch.int32, device="cuda").random_()
    nbytes = n * 4
    rates = {}
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def read_kernel(x_ptr, out_ptr, per_prog, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            base = pid.to(tl.int64) * per_prog
            acc = tl.zeros([BLOCK], dtype=tl.int32)
            for off in range(0, per_prog, BLOCK):
                acc ^= tl.load(x_ptr + base + off + tl.arange(0, BLOCK))
            tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)

        progs, block = 2048, 4096
        out = torch.empty(progs * block, dtype=torch.int32, device="cuda")
        rates["triton_read"] = nbytes / (time_ms(lambda: read_kernel[(progs,)](x, out, n // progs, BLOCK=block, num_warps=8)) * 1e6)
    except Exception as e:  # noqa: BLE001 - the torch reductions below still measure
        say(f"triton read kernel failed: {e!r}")
    rates["torch_sum"] = nbytes / (time_ms(lambda: x.view(torch.float32).sum()) * 1e6)
    rates["torch_amax"] = nbytes / (time_ms(lambda: x.amax()) * 1e6)
    half = n // 2
    src, dst = x[:half], x[half:]
    copy = 2 * half * 4 / (time_ms(lambda: dst.copy_(src)) * 1e6)
    del x
    torch.cuda.empty_cache()
    best = max(rates, key=rates.get)
    return {"kind": "ceiling", "read_gb_s": rates[best], "read_method": best, "read_rates_gb_s": rates, "copy_gb_s": copy,
            "buffer_bytes": nbytes}


# ---- the model ------------------------------------------------------------------


class Model:
    def __init__(self, d, max_batch, cap, seed):
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        H, I, V, D = d["hidden"], d["intermediate"], d["vocab"], d["headDim"]
        self.d = d
        self.H, self.I, self.V, self.D = H, I, V, D
        self.heads, self.kvh = d["heads"], d["kvHeads"]
        self.qdim, self.kvdim = self.heads * D, self.kvh * D
        self.cap = cap

        def uni(shape, scale, offset=0.0):
            t = torch.empty(shape, dtype=DT, device="cuda")
            t.uniform_(-scale, scale, generator=g)
            return t + offset if offset else t

        nqkv = self.qdim + 2 * self.kvdim
        self.layers = []
        for _ in range(d["layers"]):
            self.layers.append(dict(
                g1=uni((H,), 0.25, 1.0), g2=uni((H,), 0.25, 1.0),
                wqkv=uni((nqkv, H), 2.0 / math.sqrt(H)), wo=uni((H, self.qdim), 1.0 / math.sqrt(self.qdim)),
                wgu=uni((2 * I, H), 1.0 / math.sqrt(H)), wdown=uni((H, I), 1.0 / math.sqrt(I)),
                kc=uni((max_batch, self.kvh, cap, D), 2.0), vc=uni((max_batch, self.kvh, cap, D), 2.0)))
        self.embed = uni((V, H), 1.0 / math.sqrt(H) if d["tied"] else 1.0)
        self.lm_head = self.embed if d["tied"] else uni((V, H), 1.0 / math.sqrt(H))
        self.g_final = uni((H,), 0.25, 1.0)
        self.inv_freq = torch.pow(torch.tensor(float(d["ropeTheta"]), device="cuda"),
                                  -2.0 * torch.arange(D // 2, device="cuda", dtype=torch.float32) / D)
        self.tokens0 = torch.randint(0, V, (max_batch,), device="cuda", generator=g)
        self.tokens = self.tokens0.clone()
        self.pos = torch.zeros(max_batch, dtype=torch.int64, device="cuda")

    def weight_bytes(self):
        per = sum(t.numel() * 2 for k, t in self.layers[0].items() if k not in ("kc", "vc"))
        return per * len(self.layers) + self.lm_head.numel() * 2 + self.g_final.numel() * 2


def rmsnorm(x, g, eps):
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g.float()).to(DT)


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half].float(), x[..., half:].float()
    return torch.cat((x0 * cos - x1 * sin, x1 * cos + x0 * sin), -1).to(DT)


def step_start(embed, tokens, pos, inv_freq, cap):
    """residual, rope tables and the attention mask of this step's positions"""
    x = F.embedding(tokens, embed).float()
    ang = pos.float()[:, None] * inv_freq[None, :]
    mask = torch.arange(cap, device=pos.device)[None, :] <= pos[:, None]
    return x, ang.cos()[:, None, :], ang.sin()[:, None, :], mask[:, None, None, :]


def layer(x, pos, cos, sin, mask, g1, wqkv, wo, g2, wgu, wdown, kc, vc, heads: int, kvh: int, eps: float, sdpa: bool):
    B, D = x.shape[0], kc.shape[-1]
    h = rmsnorm(x, g1, eps)
    qkv = h @ wqkv.t()
    q = rope(qkv[:, : heads * D].view(B, heads, D), cos, sin)
    k = rope(qkv[:, heads * D: (heads + kvh) * D].view(B, kvh, D), cos, sin)
    v = qkv[:, (heads + kvh) * D:].view(B, kvh, D)
    rows = torch.arange(B, device=x.device)
    kc[rows, :, pos] = k
    vc[rows, :, pos] = v
    if sdpa:  # the library's kernel, grouped-query through enable_gqa
        attn = F.scaled_dot_product_attention(q.view(B, heads, 1, D), kc, vc, attn_mask=mask, enable_gqa=True).reshape(B, heads * D)
    else:
        qg = q.view(B, kvh, heads // kvh, D)
        s = torch.matmul(qg, kc.transpose(-1, -2)).float() * (1.0 / math.sqrt(D))
        p = torch.softmax(s.masked_fill(~mask, float("-inf")), -1).to(DT)
        attn = torch.matmul(p, vc).reshape(B, heads * D)
    x = x + (attn @ wo.t()).float()
    h = rmsnorm(x, g2, eps)
    gu = h @ wgu.t()
    half = gu.shape[-1] // 2
    act = (F.silu(gu[:, :half].float()) * gu[:, half:].float()).to(DT)
    return x + (act @ wdown.t()).float()


def step_head(x, g, lm_head, eps: float):
    return (rmsnorm(x, g, eps) @ lm_head.t()).argmax(-1)


class Step:
    """One decode step at c rows, through the given (maybe compiled) functions."""

    def __init__(self, m, c, fns, sdpa):
        self.m, self.c, self.sdpa = m, c, sdpa
        self.start, self.layer, self.head = fns
        self.eps = float(m.d["rmsEps"])

    def __call__(self):
        m, c = self.m, self.c
        tokens, pos = m.tokens[:c], m.pos[:c]
        x, cos, sin, mask = self.start(m.embed, tokens, pos, m.inv_freq, m.cap)
        for L in m.layers:
            x = self.layer(x, pos, cos, sin, mask, L["g1"], L["wqkv"], L["wo"], L["g2"], L["wgu"], L["wdown"],
                           L["kc"][:c], L["vc"][:c], m.heads, m.kvh, self.eps, self.sdpa)
        tok = self.head(x, m.g_final, m.lm_head, self.eps)
        tokens.copy_(tok)
        pos.add_(1)


def reset(m, c, context):
    m.tokens[:c].copy_(m.tokens0[:c])
    m.pos[:c].fill_(context)


def capture(m, c, step, context):
    """warm-up steps on a side stream (compiles and autotunes), then one graph of the step"""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            reset(m, c, context)
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    reset(m, c, context)
    with torch.cuda.graph(graph):
        step()
    return graph


def time_graph(m, c, graph, context, steps, runs):
    """per run: steps launches, an event between each two; tok/s per run and every step's µs"""
    tok_s, all_us = [], []
    reset(m, c, context)
    graph.replay()  # one untimed launch: the graph's upload, clocks
    for _ in range(runs):
        reset(m, c, context)
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        ev[0].record()
        for i in range(steps):
            graph.replay()
            ev[i + 1].record()
        torch.cuda.synchronize()
        us = [ev[i].elapsed_time(ev[i + 1]) * 1000.0 for i in range(steps)]
        all_us += us
        tok_s.append(c * steps / (sum(us) / 1e6))
    return tok_s, all_us


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def quantile(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def configure_compile(autotune_backends):
    import torch._dynamo
    import torch._inductor.config as ic

    # one code object per function, one compile per (model shape, c): more than the default 8
    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 256)
    ic.max_autotune_gemm_backends = autotune_backends
    ic.compile_threads = max(1, min(16, os.cpu_count() or 1))


def load_compile_cache(path):
    """torch.compile's artifacts of an earlier run, loaded: the file's sha256 (16 hex
    digits), or None when it is missing or does not load (then every shape compiles afresh)."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        say(f"compile cache {path}: {e}; compiling afresh")
        return None
    digest = hashlib.sha256(blob).hexdigest()[:16]
    try:
        info = torch.compiler.load_cache_artifacts(blob)
    except Exception as e:  # noqa: BLE001 - another torch, Triton or GPU: compile afresh
        say(f"compile cache {path} did not load ({e!r}); compiling afresh")
        return None
    if info is None:  # it logs why (an unpickling failure) and returns nothing
        say(f"compile cache {path} did not load; compiling afresh")
        return None
    say(f"compile cache {path}: {len(blob)} bytes loaded, sha256 {digest}")
    return digest


def save_compile_cache(path):
    """Every compile artifact of this process so far into path (written whole, then renamed)."""
    try:
        art = torch.compiler.save_cache_artifacts()
    except Exception as e:  # noqa: BLE001 - the measurement goes on without it
        say(f"compile cache not saved: {e!r}")
        return
    if art is None:
        say("compile cache not saved: no artifacts")
        return
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(art[0])
    os.replace(tmp, path)


def fx_cache_counts():
    """(hits, misses) of inductor's FX graph cache so far in this process, or None"""
    try:
        from torch._dynamo.utils import counters

        return counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]
    except Exception:  # noqa: BLE001 - a torch without these counters: the rows say null
        return None


def compiled_fns():
    opts = dict(mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=False)
    return torch.compile(step_start, **opts), torch.compile(layer, **opts), torch.compile(step_head, **opts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", required=True, help="JSON lines of bench/peers/dims.ts")
    ap.add_argument("--c", default="1,4,16,64", help="concurrencies, comma separated, run in this order")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--arms", default="eager,compiled")
    ap.add_argument("--compiled-c", default="", help="concurrencies of the compiled arm (default: --c); compiling is the slow part")
    ap.add_argument("--autotune-backends", default="ATEN,TRITON", help="inductor's max_autotune_gemm_backends")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the read-ceiling measurement")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compile-cache-in", action="append", default=[],
                    help="torch.compile artifacts of an earlier run to load first (repeat: each run keeps only what it compiled)")
    ap.add_argument("--compile-cache-out", default="", help="where to keep this run's torch.compile artifacts (after each compile)")
    ap.add_argument("--attention", choices=("bmm", "sdpa"), default="bmm",
                    help="bmm: q grouped per KV head against the cache by batched matmul (measured); sdpa: scaled_dot_product_attention with enable_gqa")
    a = ap.parse_args()
    cs = list(dict.fromkeys(int(x) for x in a.c.split(",")))  # in the order given: a run cut short has the first
    arms = [x for x in a.arms.split(",") if x]
    compiled_cs = [int(x) for x in a.compiled_c.split(",") if x] or cs
    if not torch.cuda.is_available():
        print("peer: no CUDA device", file=sys.stderr)
        return 2
    dims = [json.loads(line) for line in open(a.dims) if line.strip()]
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    device = torch.cuda.get_device_name()
    if not a.no_ceiling:
        ceil = read_ceiling()
        ceil["device"] = device
        emit(ceil)
        say(f"read ceiling {ceil['read_gb_s']:.0f} GB/s ({ceil['read_method']}), copy {ceil['copy_gb_s']:.0f} GB/s")
    cache = None
    if "compiled" in arms:
        configure_compile(a.autotune_backends)
        loaded = []
        for path in a.compile_cache_in:
            digest = load_compile_cache(path)
            emit({"kind": "compile_cache", "path": path, "sha256": digest})
            if digest is not None:
                loaded.append(digest)
        cache = "+".join(loaded) if loaded else None
        fns_compiled = compiled_fns()
    fns_eager = (step_start, layer, step_head)
    cap = a.context + a.steps + 1
    first = {}  # (model, c, arm): the tokens of the first step from the prompt state
    # every model's eager arm before any compile, so a run cut short still has them
    for arm in arms:
        fns = fns_compiled if arm == "compiled" else fns_eager
        for d in dims:
            with torch.no_grad():
                m = Model(d, max(cs + compiled_cs), cap, a.seed)
                say(f"{d['model']} {arm}: {m.weight_bytes() / 1e9:.2f} GB of weights, cache {cap} positions")
                for c in compiled_cs if arm == "compiled" else cs:
                    fx0 = fx_cache_counts()
                    t0 = time.time()
                    graph = capture(m, c, Step(m, c, fns, a.attention == "sdpa"), a.context)
                    build_s = time.time() - t0
                    tok_s, us = time_graph(m, c, graph, a.context, a.steps, a.runs)
                    reset(m, c, a.context)
                    graph.replay()
                    torch.cuda.synchronize()
                    first[(d["model"], c, arm)] = m.tokens[:c].clone()
                    del graph
                    row = {"kind": "row", "model": d["model"], "c": c, "arm": arm, "context": a.context, "steps": a.steps,
                           "runs": a.runs, "tok_s": median(tok_s), "step_p50_us": quantile(us, 0.5),
                           "step_p90_us": quantile(us, 0.9), "build_s": build_s, "device": device,
                           "torch": torch.__version__, "attention": a.attention}
                    if arm == "compiled":
                        row["mode"] = "max-autotune-no-cudagraphs"
                        row["autotune_backends"] = a.autotune_backends
                        # the loaded cache's draw only where every graph of this (model, c) came from it
                        fx1 = fx_cache_counts()
                        hits, misses = (fx1[0] - fx0[0], fx1[1] - fx0[1]) if fx0 and fx1 else (None, None)
                        row["fxgraph_cache_hits"], row["fxgraph_cache_misses"] = hits, misses
                        row["compile_cache"] = cache if cache is not None and misses == 0 else None
                        if a.compile_cache_out:
                            save_compile_cache(a.compile_cache_out)
                    emit(row)
                    say(f"{d['model']} c={c} {arm}: {row['tok_s']:.1f} tok/s, p50 {row['step_p50_us']:.0f} us, built in {build_s:.1f} s")
                    other = first.get((d["model"], c, "eager"))
                    if arm == "compiled" and other is not None:
                        same = (other == first[(d["model"], c, arm)]).float().mean().item()
                        emit({"kind": "agree", "model": d["model"], "c": c, "first_step_tokens_equal": same})
                del m
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
