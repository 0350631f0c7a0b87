/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda-abi-check — the static check of cuda-abi.h against the toolkit's cuda.h, compiled into
 * libgpuslice-cuda.so only where cuda.h is present (it emits no code). cuda.h first: cuda-abi.h then
 * skips its own types, re-declares every prototype (a prototype that differs from cuda.h's is a
 * compile error) and its layout and value assertions must hold for cuda.h's types.
 */
#define __CUDA_API_VERSION_INTERNAL 1 /* every ABI variant under its own name, as cuda-abi.h has them */
#include <cuda.h>

#include "interposer/cuda-abi.h"

_Static_assert(CUDA_VERSION >= 13000, "cuda-abi.h describes the CUDA 13.0 ABI: check it against a 13.x cuda.h");
