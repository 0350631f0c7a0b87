/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mps — the simulated MPS control daemon's state, the one codec the daemon (mps-control.c, the stand-in for
 * nvidia-cuda-mps-control) writes and the simulated libcuda.so.1 reads: <pipe dir>/gpuslice-sim-mps, text,
 * written atomically on every change:
 *
 *   pid 1234
 *   seq 3
 *   thread-percentage 50
 *   pinned 0 2147483648
 *
 * A client (CUDA_MPS_PIPE_DIRECTORY set) of a live daemon sees min(device memory, pinned limit) as its device's
 * memory and gets CUDA_ERROR_OUT_OF_MEMORY past it, as NVIDIA documents for set_default_device_pinned_mem_limit,
 * and its kernels run on at most its active thread percentage of the device's SMs (cuda-launch.c).
 * Pure parsing; never logs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_MPS_STATE "gpuslice-sim-mps"
#define SIM_MPS_CONTROL "control"                     /* the daemon's command FIFO in the pipe dir */
#define SIM_MPS_LOCK "gpuslice-sim-mps.lock"          /* the daemon holds flock(LOCK_EX) on it while it lives */
#define SIM_MPS_PIDFILE "nvidia-cuda-mps-control.pid" /* NVIDIA's: the daemon's PID in the pipe dir */
/* A test hook (a real daemon can hang, this one hangs on demand): while this file is in the pipe dir, empty or
 * naming the daemon's PID, the daemon handles no command (they wait in its FIFO) — SIGTERM still ends it. */
#define SIM_MPS_HANG "gpuslice-sim-mps.hang"
#define SIM_MPS_GPUS 64

struct sim_mps {
        int pid;                       /* the daemon */
        uint64_t seq;                  /* commands it has handled: a client waits for its own */
        unsigned thread_percentage;    /* 100 = no limit */
        uint64_t pinned[SIM_MPS_GPUS]; /* bytes per device index, 0 = no limit */
};

/* Parse state text (len bytes). 0 or -EINVAL. */
int sim_mps_parse(const char *text, size_t len, struct sim_mps *ret);
/* Format into buf; the length, or -ENOSPC. */
int sim_mps_format(const struct sim_mps *m, char *buf, size_t len);
/* The state of the daemon serving pipe dir `dir`, when one is alive (it holds the lock file: seen also from another
 * PID namespace, a container's, as a real client sees the daemon through the pipe dir): 1 (and *ret), 0 none,
 * -errno. */
int sim_mps_load(const char *dir, struct sim_mps *ret);
/* A daemon holds the lock of pipe dir `dir`. */
bool sim_mps_alive(const char *dir);
/* The pinned limit of a client of GPU `index` (its own CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "0=2G,1=1G" first, then
 * the daemon's default); 0: no limit (not an MPS client, no daemon, none set). */
uint64_t sim_mps_client_limit(unsigned index);
/* This process is an MPS client: its CUDA_MPS_PIPE_DIRECTORY names the pipe dir of a live daemon (sim_mps_alive). */
bool sim_mps_client(void);
/* The active thread percentage of this process (1..100): its own CUDA_MPS_ACTIVE_THREAD_PERCENTAGE when it is an
 * MPS client of a live daemon and sets one (1..100, a fraction such as "50.5" rounds down), else the daemon's
 * default; 100 when it is no client. */
unsigned sim_mps_client_threads(void);
