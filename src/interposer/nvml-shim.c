/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-shim — libgpuslice-nvml.so, installed in a limited container as the libnvidia-ml.so.1 the loader
 * finds (SONAME libnvidia-ml.so.1, preloaded beside libgpuslice-cuda.so). It defines nothing: it is a
 * dependency list, in this order —
 *
 *   1. libcuda.so.1: libgpuslice-cuda.so (preloaded, so the SONAME matches it), which exports NVML's memory
 *      queries and process lists with the container's view (nvml-hook.c);
 *   2. $ORIGIN/../driver/libnvidia-ml.so.1: the real NVML, where the agent mounts it
 *      (/run/gpuslice/lib → /run/gpuslice/driver).
 *
 * A symbol looked up on this library's handle — dlopen("libnvidia-ml.so.1") + dlsym, what pynvml does — is
 * searched in the handle's dependency list breadth first: the hooked queries resolve to the interposer, every
 * other NVML function to the real library. Programs linked with -lnvidia-ml get this library for their
 * DT_NEEDED and bind through the global scope, where the preloaded interposer comes first as well. Nothing
 * here runs: no constructor, no state (docs/interposer.md, "NVML").
 */
typedef int gs_nvml_shim_is_a_dependency_list; /* ISO C wants a declaration in every translation unit */
