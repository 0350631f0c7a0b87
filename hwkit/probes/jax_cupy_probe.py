#!/usr/bin/env python3
"""JAX and CuPy under the gpuslice limiter, for the hardware kit (hwkit/kit.py, docs/hardware.md).

    jax_cupy_probe.py jax    JAX with its default preallocation (75 % of the memory it sees): a 4096² matmul
                             runs; prints the device's memory_stats (bytes_limit: what XLA took as its pool)
    jax_cupy_probe.py cupy   CuPy: Device().mem_info, then 256 MiB blocks until cupy's OutOfMemoryError; prints
                             what it got

One JSON line on stdout; {"error": ...} and exit status 1 on failure.
"""
import json
import os
import sys

MiB = 1 << 20


def out(obj):
    print(json.dumps(obj), flush=True)


def jax_probe():
    import jax
    import jax.numpy as jnp
    dev = jax.devices()[0]
    x = jnp.ones((4096, 4096), dtype=jnp.float32)
    y = (x @ x).block_until_ready()
    stats = dev.memory_stats() or {}
    out({"platform": dev.platform, "ok": float(y[0, 0]) == 4096.0, "bytes_limit": stats.get("bytes_limit"),
         "bytes_in_use": stats.get("bytes_in_use"), "pid": os.getpid()})


def cupy_probe():
    import cupy
    free0, total = cupy.cuda.Device(0).mem_info
    pool = cupy.get_default_memory_pool()
    held, oom = [], None
    for _ in range(100000):
        try:
            held.append(cupy.empty(256 * MiB, dtype=cupy.uint8))
        except cupy.cuda.memory.OutOfMemoryError as e:
            oom = type(e).__name__
            break
    allocated = len(held) * 256 * MiB
    out({"total": total, "free_start": free0, "allocated": allocated, "oom": oom,
         "pool_total": pool.total_bytes(), "pid": os.getpid()})


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        if what == "jax":
            jax_probe()
        elif what == "cupy":
            cupy_probe()
        else:
            out({"error": "usage: jax_cupy_probe.py jax|cupy"})
            return 2
        return 0
    except Exception as e:
        out({"error": "%s: %s" % (type(e).__name__, e)})
        return 1


if __name__ == "__main__":
    sys.exit(main())
