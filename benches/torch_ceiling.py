#!/usr/bin/env python3
# Run on a machine with an NVIDIA GPU and PyTorch: python3 benches/torch_ceiling.py
# (docs/cuda.md quotes its figures next to the cuda rows of examples/bench.rs).
# The machine's own limits for the figures computeq's bench prints:
# host<->device copies (pageable and pinned) and the same work in PyTorch.
import time, torch
def t(f, r=15):
    f(); torch.cuda.synchronize()
    ts = []
    for _ in range(r):
        s = time.perf_counter(); f(); torch.cuda.synchronize(); ts.append(time.perf_counter() - s)
    return sorted(ts)[r // 2]
def fmt(s): return f"{s*1e6:.1f} us" if s < 1e-3 else f"{s*1e3:.3f} ms"
print("device:", torch.cuda.get_device_name(0))
for n in (10**3, 10**5, 10**7, 10**8):
    x = torch.rand(n, dtype=torch.float32)
    xp = x.pin_memory()
    y = torch.empty_like(x)
    d = x.cuda()
    print(f"n={n:>9}  H2D pageable {fmt(t(lambda: d.copy_(x)))}  H2D pinned {fmt(t(lambda: d.copy_(xp, non_blocking=True)))}"
          f"  D2H pageable {fmt(t(lambda: y.copy_(d)))}  D2H pinned {fmt(t(lambda: xp.copy_(d, non_blocking=True)))}"
          f"  host copy {fmt(t(lambda: y.copy_(x)))}")
    print(f"             torch on device: sum(x*2+1) {fmt(t(lambda: (d*2+1).sum()))}  sqrt(x)*3-x {fmt(t(lambda: d.sqrt()*3-d))}"
          f"   whole P1 from host (pageable) {fmt(t(lambda: (x.cuda()*2+1).sum().item()))}"
          f"   whole P4 host->host {fmt(t(lambda: (lambda g: (g.sqrt()*3-g).cpu())(x.cuda())))}")
