/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mps-client — what a container gets to be a client of an MPS control daemon, made in one place for both who hand
 * it out (the device plugin's Allocate answer for an MPS replica, src/agent/timeslice.c; the DRA driver's CDI spec
 * of an MPS claim, src/dra/prepare.c), as NVIDIA's device plugin (internal/plugin/mps.go) and DRA driver do:
 *
 *     CUDA_MPS_PIPE_DIRECTORY=<pipe>  the pipe dir in the container (the plugin: /mps/<resource>/pipe; DRA:
 *                                     /tmp/nvidia-mps, NVIDIA's DRA driver's)
 *     <pipe>     the daemon's pipe dir, bind-mounted read-write
 *     /dev/shm   the daemon's shm dir, bind-mounted read-write: the tmpfs that is /dev/shm in the daemon's mount
 *                namespace (src/agent/mps.c), so daemon and clients share memory
 *
 * A control daemon's dirs, under one base dir (the device plugin's <state-dir>/mps, a DRA claim's
 * <state-dir>/dra-mps/<uid>): pipe/ (CUDA_MPS_PIPE_DIRECTORY), log/ (CUDA_MPS_LOG_DIRECTORY), shm/ (its /dev/shm).
 *
 * Pure: no I/O, no allocation, no logging. Must never: hand out one part without the other.
 */
#pragma once

#include <limits.h>

#define MPS_DIR_PIPE "pipe"
#define MPS_DIR_LOG "log"
#define MPS_DIR_SHM "shm"

#define MPS_CLIENT_PIPE_ENV "CUDA_MPS_PIPE_DIRECTORY"
#define MPS_CLIENT_SHM "/dev/shm" /* where a client gets the daemon's shm dir */
#define MPS_CLIENT_MOUNTS 2

/* An MPS client's edits. mount[i].host and pipe borrow the caller's strings; env is "CUDA_MPS_PIPE_DIRECTORY=<pipe>"
 * (for the CDI spec), pipe its value (for the device plugin's envs map). */
struct mps_client {
        struct {
                const char *host, *container;
        } mount[MPS_CLIENT_MOUNTS];
        unsigned n_mounts;
        const char *pipe;
        char env[sizeof MPS_CLIENT_PIPE_ENV + PATH_MAX];
};

/* The one place the edits are made. HOST_PIPE, HOST_SHM: the daemon's pipe and shm dirs on the host; CTR_PIPE: the
 * pipe dir in the container. 0, or -ENAMETOOLONG (CTR_PIPE longer than PATH_MAX). Pure. */
int mps_client_edits(const char *host_pipe, const char *host_shm, const char *ctr_pipe, struct mps_client *ret);
