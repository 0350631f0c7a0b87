#!/usr/bin/env python3
"""PyTorch, JAX and CuPy under the gpuslice limiter, for the hardware kit (hwkit/kit.py, docs/hardware.md).

    client_probe.py limit           what the limit looks like to PyTorch: mem_get_info, allocating up to it,
                                    CUDA's out-of-memory error beyond it (the process lives on), then a
                                    cuBLAS matmul (code the driver loads lazily); prints "HOLD {json}" and
                                    waits for a line on stdin before it exits (the kit reads NVML meanwhile)
    client_probe.py rate SECONDS    bf16 8192³ matmuls back to back; prints {"rate": matmuls/s in the second half}
    client_probe.py graph SECONDS   one CUDA graph of 20 such matmuls (a whole "step" per replay), replayed
                                    back to back; prints {"rate": replays/s in the second half}
    client_probe.py nccl RANK WORLD PORT   torch.distributed with NCCL: init, all_reduce, check the sum
    client_probe.py jax             JAX with its default preallocation (75 % of the memory it sees): a 4096²
                                    matmul runs; prints the device's memory_stats (bytes_limit: XLA's pool)
    client_probe.py cupy            CuPy: Device().mem_info, then 256 MiB blocks until its OutOfMemoryError
    client_probe.py nvml-view IDX   NVML as pynvml reads it (pynvml when installed, else ctypes.CDLL — pynvml's own
                                    way: a private dlopen handle and symbols looked up on it) for NVML device IDX,
                                    against cuMemGetInfo, before and after a 512 MiB cuMemAlloc (no PyTorch needed)
    client_probe.py vllm-start IDX [driver]   a vLLM-style start with gpu_memory_utilization 0.9: total from
                                    torch.cuda.mem_get_info and NVML, vLLM's start check (free >= 0.9 total), the
                                    "weights" (0.3 total), then the KV cache: all of 0.9 total not yet used; prints
                                    "HOLD {json}" and waits for a line on stdin. `driver`: the same through the CUDA
                                    driver API (ctypes), where there is no PyTorch (the simulated node)
    client_probe.py graph-alloc     a CUDA graph captured with a 0.6 × total allocation inside (PyTorch's
                                    cudaMallocAsync backend: the allocation is a graph memory node), replayed twice;
                                    prints what cuMemGetInfo's free lost at each step

Every result is one JSON line on stdout; errors are a JSON line {"error": ...} and exit status 1.
"""
import json
import os
import sys
import time

MiB = 1 << 20


def out(obj, prefix=""):
    print(prefix + json.dumps(obj), flush=True)


def oom_types(torch):
    types = []
    for name in ("OutOfMemoryError",):
        for mod in (torch, torch.cuda):
            t = getattr(mod, name, None)
            if isinstance(t, type):
                types.append(t)
    return tuple(types) or (RuntimeError,)


def limit(torch):
    free0, total = torch.cuda.mem_get_info()
    chunk = 256 * MiB
    held, oom = [], None
    for _ in range(100000):
        try:
            held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
        except oom_types(torch) as e:
            oom = type(e).__module__ + "." + type(e).__name__
            break
    allocated = len(held) * chunk
    # beyond the limit again, with the caching allocator emptied first: the driver's answer, not the cache's
    torch.cuda.empty_cache()
    again = None
    try:
        torch.empty(chunk, dtype=torch.uint8, device="cuda")
    except oom_types(torch) as e:
        again = type(e).__name__
    # room for cuBLAS (its kernels and workspace arrive lazily, through no call the limiter hooks)
    for _ in range(min(4, len(held))):
        held.pop()
    torch.cuda.empty_cache()
    a = torch.randn(1024, 1024, device="cuda")
    (a @ a).sum().item()
    free1, total1 = torch.cuda.mem_get_info()
    out({"pid": os.getpid(), "total": total, "free_start": free0, "allocated": allocated, "oom": oom,
         "oom_again": again, "free_after_matmul": free1, "total_after": total1,
         "reserved": torch.cuda.memory_reserved()}, "HOLD ")
    sys.stdin.readline()
    out({"alive": True})


def matmuls(torch, seconds, graph):
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    step = lambda: [torch.matmul(a, b, out=c) for _ in range(20 if graph else 1)]  # noqa: E731
    step()
    torch.cuda.synchronize()
    run = step
    if graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        run = g.replay
    begin = time.monotonic()
    half, end = begin + seconds / 2, begin + seconds
    late = 0
    while True:
        t = time.monotonic()
        if t >= end:
            break
        run()
        torch.cuda.synchronize()  # one step at a time: the rate is what the share lets through
        late += t >= half
    out({"rate": late / (seconds / 2), "seconds": seconds})


def nccl(torch, rank, world, port):
    import torch.distributed as dist
    torch.cuda.set_device(0)
    t0 = time.monotonic()
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    x = torch.full((1 << 20,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    want = world * (world + 1) / 2
    ok = abs(x[0].item() - want) < 1e-3
    dist.destroy_process_group()
    out({"rank": rank, "ok": ok, "sum": x[0].item(), "want": want, "seconds": time.monotonic() - t0})
    return ok


def jax_probe():
    import jax
    import jax.numpy as jnp
    dev = jax.devices()[0]
    x = jnp.ones((4096, 4096), dtype=jnp.float32)
    y = (x @ x).block_until_ready()
    stats = dev.memory_stats() or {}
    out({"platform": dev.platform, "ok": float(y[0, 0]) == 4096.0, "bytes_limit": stats.get("bytes_limit"),
         "bytes_in_use": stats.get("bytes_in_use")})


def cupy_probe():
    import cupy
    free0, total = cupy.cuda.Device(0).mem_info
    held, oom = [], None
    for _ in range(100000):
        try:
            held.append(cupy.empty(256 * MiB, dtype=cupy.uint8))
        except cupy.cuda.memory.OutOfMemoryError as e:
            oom = type(e).__name__
            break
    out({"total": total, "free_start": free0, "allocated": len(held) * 256 * MiB, "oom": oom,
         "pool_total": cupy.get_default_memory_pool().total_bytes()})


class Driver:
    """The CUDA driver API through ctypes (libcuda.so.1: under the limiter, the interposer), device 0's primary
    context current."""

    def __init__(self):
        import ctypes
        self.c = ctypes
        self.cu = ctypes.CDLL("libcuda.so.1")
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        for name, rc in (("cuInit", self.cu.cuInit(0)), ("cuDeviceGet", self.cu.cuDeviceGet(ctypes.byref(dev), 0)),
                         ("cuDevicePrimaryCtxRetain", self.cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)),
                         ("cuCtxSetCurrent", self.cu.cuCtxSetCurrent(ctx))):
            if rc != 0:
                raise RuntimeError("%s: CUDA error %d" % (name, rc))

    def mem_get_info(self):
        free, total = self.c.c_size_t(), self.c.c_size_t()
        rc = self.cu.cuMemGetInfo_v2(self.c.byref(free), self.c.byref(total))
        if rc != 0:
            raise RuntimeError("cuMemGetInfo: CUDA error %d" % rc)
        return free.value, total.value

    def alloc(self, size):
        """A device pointer, or None when the driver answered CUDA_ERROR_OUT_OF_MEMORY (2)."""
        p = self.c.c_uint64()
        rc = self.cu.cuMemAlloc_v2(self.c.byref(p), self.c.c_size_t(size))
        if rc == 2:
            return None
        if rc != 0:
            raise RuntimeError("cuMemAlloc %d: CUDA error %d" % (size, rc))
        return p


def nvml_reader(index):
    """(how, read) — read() gives NVML's (total, free, used) of device index, as pynvml reads it."""
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)

        def read():
            m = pynvml.nvmlDeviceGetMemoryInfo(h)
            return m.total, m.free, m.used
        return "pynvml %s" % getattr(pynvml, "__version__", "?"), read
    except ImportError:
        pass
    import ctypes

    class Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
    nv = ctypes.CDLL("libnvidia-ml.so.1")  # pynvml's loading: a private handle, every symbol looked up on it
    h = ctypes.c_void_p()
    if nv.nvmlInit_v2() != 0 or nv.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(h)) != 0:
        raise RuntimeError("NVML: no device %d" % index)

    def read():
        m = Memory()
        rc = nv.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m))
        if rc != 0:
            raise RuntimeError("nvmlDeviceGetMemoryInfo: NVML error %d" % rc)
        return m.total, m.free, m.used
    return "ctypes.CDLL (pynvml's loading; pynvml is not installed)", read


def nvml_view(index):
    how, read = nvml_reader(index)
    d = Driver()
    before = {"cuda": d.mem_get_info(), "nvml": read()}
    p = d.alloc(512 * MiB)
    after = {"cuda": d.mem_get_info(), "nvml": read()}
    out({"via": how, "before": before, "after": after, "allocated": p is not None})


def vllm_start(index, driver):
    """vLLM's memory start-up (gpu_memory_utilization): requested = 0.9 total must be free at start; the KV cache
    gets what of it the weights and activations left."""
    how, read = nvml_reader(index)
    if driver:
        d = Driver()
        mem_get_info, take = d.mem_get_info, d.alloc
    else:
        import torch

        def take(n):
            try:
                return torch.empty(n, dtype=torch.uint8, device="cuda")
            except oom_types(torch):
                return None
        mem_get_info = torch.cuda.mem_get_info
    free0, total = mem_get_info()
    nvml_total = read()[0]
    requested = int(total * 0.9)
    o = {"via": how, "pid": os.getpid(), "total": total, "nvml_total": nvml_total, "free_start": free0,
         "requested": requested, "start_check": free0 >= requested}
    held = []
    if o["start_check"]:
        weights = take(int(total * 0.3))
        o["weights"] = weights is not None
        held.append(weights)
        used = total - mem_get_info()[0]
        kv = max(0, requested - used)
        cache = take(kv) if weights is not None else None
        held.append(cache)
        o.update(kv_cache=kv, kv_allocated=cache is not None, free_end=mem_get_info()[0],
                 nvml_end=list(read()))
    out(o, "HOLD ")
    sys.stdin.readline()
    out({"alive": True})


def graph_alloc(torch):
    """A captured allocation (a graph memory node with the cudaMallocAsync backend) is the graph's, taken once."""
    free0, total = torch.cuda.mem_get_info()
    size = int(total * 0.6) // MiB * MiB
    o = {"backend": torch.cuda.get_allocator_backend() if hasattr(torch.cuda, "get_allocator_backend") else None,
         "total": total, "free_start": free0, "captured": size}
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # capture on PyTorch's side stream; instantiated at the end of the block
        y = torch.empty(size, dtype=torch.uint8, device="cuda")
        y.fill_(1)
    torch.cuda.synchronize()
    o["free_after_capture"] = torch.cuda.mem_get_info()[0]
    g.replay()
    torch.cuda.synchronize()
    o["free_after_replay"] = torch.cuda.mem_get_info()[0]
    g.replay()
    torch.cuda.synchronize()
    o["free_after_second_replay"] = torch.cuda.mem_get_info()[0]
    o["ok"] = True
    out(o)


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        if what in ("jax", "cupy"):
            (jax_probe if what == "jax" else cupy_probe)()
            return 0
        if what == "nvml-view":
            nvml_view(int(sys.argv[2]))
            return 0
        if what == "vllm-start" and sys.argv[3:4] == ["driver"]:
            vllm_start(int(sys.argv[2]), True)
            return 0
        import torch  # a missing client is the kit's skip, decided before it runs this
        if not torch.cuda.is_available():
            out({"error": "torch.cuda.is_available() is False"})
            return 1
        if what == "limit":
            limit(torch)
        elif what in ("rate", "graph"):
            matmuls(torch, float(sys.argv[2]), what == "graph")
        elif what == "vllm-start":
            vllm_start(int(sys.argv[2]), False)
        elif what == "graph-alloc":
            graph_alloc(torch)
        elif what == "nccl":
            return 0 if nccl(torch, int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])) else 1
        else:
            out({"error": "unknown mode %r" % what})
            return 2
        return 0
    except Exception as e:
        out({"error": "%s: %s" % (type(e).__name__, e)})
        return 1


if __name__ == "__main__":
    sys.exit(main())
