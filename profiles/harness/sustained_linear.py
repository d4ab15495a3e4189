# Isolated vs sustained linear layers of Llama-3.1-70B (TP 1) on one GPU, bf16 and FP8 with
# per-tensor and per-row scales (torch._scaled_mm): each GEMM timed alone, then whole 80-layer
# passes of the four linear layers back to back for 6 s at the board's power limit, with the SM
# clock and power sampled by nvidia-smi. Needs PyTorch with CUDA; run: python3 sustained_linear.py
import statistics
import subprocess
import time

import torch
dev = 'cuda'
torch.manual_seed(0)
SHAPES = [(10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)]  # (n, k): qkv, o, gate_up, down
COPIES = 6      # distinct layer weight sets, cycled (together far above L2)
LAYERS = 80
FLOP_PER_TOKEN = 2 * LAYERS * sum(n * k for n, k in SHAPES)
f8 = torch.float8_e4m3fn

def weights(recipe):
    out = []
    for c in range(COPIES):
        layer = []
        for n, k in SHAPES:
            w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
            if recipe == 'bf16':
                layer.append((w, None))
            else:
                wq = w.to(f8)
                s = torch.ones(1, n, device=dev, dtype=torch.float32) if recipe == 'rowwise' else torch.ones((), device=dev, dtype=torch.float32)
                layer.append((wq, s))
            del w
        out.append(layer)
    return out

def make_x(recipe, m):
    xs = {}
    for k in sorted({k for _, k in SHAPES}):
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        if recipe == 'bf16':
            xs[k] = (x, None)
        else:
            s = torch.ones(m, 1, device=dev, dtype=torch.float32) if recipe == 'rowwise' else torch.ones((), device=dev, dtype=torch.float32)
            xs[k] = (x.to(f8), s)
    return xs

def gemm(recipe, x, w):
    if recipe == 'bf16':
        return x[0] @ w[0].t()
    return torch._scaled_mm(x[0], w[0].t(), scale_a=x[1], scale_b=w[1], out_dtype=torch.bfloat16, use_fast_accum=True)

def one_pass(recipe, ws, xs):
    for l in range(LAYERS):
        layer = ws[l % COPIES]
        for (n, k), w in zip(SHAPES, layer):
            gemm(recipe, xs[k], w)

def run(recipe, m, sustain_s):
    ws = weights(recipe); xs = make_x(recipe, m)
    # isolated: each GEMM alone, cold weights (another copy between), median of 10
    iso = 0.0
    for j, (n, k) in enumerate(SHAPES):
        ts = []
        for r in range(10):
            torch.cuda.synchronize()
            a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
            w = ws[r % COPIES][j]
            a.record(); gemm(recipe, xs[k], w); b.record(); b.synchronize()
            ts.append(a.elapsed_time(b))
            time.sleep(0.02)
        iso += statistics.median(ts)
    iso_pass = iso * LAYERS
    # sustained: back-to-back passes for sustain_s seconds
    smi = subprocess.Popen(['nvidia-smi', '--query-gpu=clocks.sm,power.draw', '--format=csv,noheader,nounits', '-lms', '250'], stdout=subprocess.PIPE, text=True)
    passes = []; t0 = time.time()
    while time.time() - t0 < sustain_s:
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); one_pass(recipe, ws, xs); b.record(); b.synchronize()
        passes.append(a.elapsed_time(b))
    smi.terminate(); lines = smi.communicate()[0].strip().splitlines()
    clocks = [float(l.split(',')[0]) for l in lines[2:] if l.strip()]; power = [float(l.split(',')[1]) for l in lines[2:] if l.strip()]
    first, last = passes[0], statistics.median(passes[len(passes)//2:])
    tf = lambda ms: FLOP_PER_TOKEN * m / (ms * 1e-3) / 1e12
    print(f"{recipe:8s} m={m:5d} isolated-sum {iso_pass:8.1f} ms ({tf(iso_pass):6.0f} TFLOP/s) | sustained first {first:8.1f} ms, steady {last:8.1f} ms ({tf(last):6.0f} TFLOP/s) over {len(passes)} passes | SM clock median {statistics.median(clocks) if clocks else 0:.0f} MHz min {min(clocks) if clocks else 0:.0f}, power median {statistics.median(power) if power else 0:.0f} W", flush=True)
    del ws, xs; torch.cuda.empty_cache()

print(torch.__version__, torch.cuda.get_device_name(), flush=True)
for m in (1700, 8192):
    for recipe in ('bf16', 'tensor', 'rowwise'):
        try:
            run(recipe, m, 6.0)
        except Exception as e:
            print(recipe, m, 'FAILED', repr(e)[:300], flush=True)
