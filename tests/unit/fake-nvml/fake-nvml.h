/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake-nvml — control knobs of the fake NVML libraries that tests/unit/test-nvml.c loads to
 * reach error paths and old-driver fallbacks the simulator cannot produce. The test reaches
 * them with dlsym on the same library the binding loaded. Test-only: never shipped.
 */
#pragma once

/* fake-nvml-node: back to the built-in node (faults, events, init references). */
void fake_nvml_reset(void);
/* Outstanding nvmlInit references (init minus shutdown). */
int fake_nvml_init_count(void);
/* What GPU `gpu` answers: handle_code for nvmlDeviceGetHandleByIndex*, query_code for every
 * other device query (NVML_SUCCESS = normal). */
void fake_nvml_set_fault(unsigned gpu, int handle_code, int query_code);
/* Queue an event for GPU `gpu`; delivered only if that GPU registered the type. */
void fake_nvml_push_event(unsigned gpu, unsigned long long type, unsigned long long data);
