/* SPDX-License-Identifier: Apache-2.0 */
/*
 * monitor-format-ref — the formatter before the scrape rewrite, frozen (see monitor-format-ref.c): what
 * monitor_format_metrics must still produce byte for byte. Tests and benchmarks only.
 */
#pragma once

#include <stddef.h>

#include "monitor/monitor.h"

int monitor_format_metrics_ref(const struct monitor_snapshot *s, unsigned compat, const char *node_name, char **ret,
                               size_t *ret_len);
