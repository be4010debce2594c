"""v46 call 2: how fast one GPU writes a decode-sized output (the single-launch dispatch's copy-out
writes ~10 MB at 128 tokens FP8: rows, padding, scales). Torch kernels in CUDA graphs of REPS
back-to-back ops, timed with events; per op the median of 5 replays, then the slope between sizes
(which takes the per-op gap out). zero: write-only; copy: read + write; fanout8: one read, eight
writes (a dispatch message expanded to its rows)."""
import torch

REPS = 50
MB = 1 << 20
dev = torch.device("cuda")
big = torch.empty(64 * MB, dtype=torch.uint8, device=dev)
src = torch.randint(0, 255, (64 * MB,), dtype=torch.uint8, device=dev)


def timed(op):
    op()  # warm (and L2)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(REPS):
            op()
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000 / REPS)
    return sorted(times)[2]


print(torch.cuda.get_device_name(), torch.__version__)
rows = {}
for name in ["zero", "copy", "fanout8"]:
    for size_mb in [1.25, 2.5, 5, 10, 20, 40]:
        n = int(size_mb * MB)
        if name == "zero":
            d = big[:n]
            op = lambda d=d: d.zero_()
        elif name == "copy":
            d, s = big[:n], src[:n]
            op = lambda d=d, s=s: d.copy_(s)
        else:
            m = n // 8
            d, s = big[: 8 * m].view(8, m), src[:m]
            op = lambda d=d, s=s: d.copy_(s.expand(8, m))
        us = timed(op)
        rows[(name, size_mb)] = us
        print(f"{name:8s} {size_mb:6.2f} MB written  {us:7.2f} us/op  {n / us / 1e6:6.2f} TB/s written (whole op)")
    sizes = [1.25, 2.5, 5, 10, 20, 40]
    for lo, hi in zip(sizes, sizes[1:]):
        d_us = rows[(name, hi)] - rows[(name, lo)]
        print(f"{name:8s} slope {lo:5.2f} -> {hi:5.2f} MB: {(hi - lo) * MB / d_us / 1e6:6.2f} TB/s written")
