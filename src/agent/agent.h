/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent — the node agent's public API, for the command line (src/cli/cmd-node.c, cmd-status.c):
 * run the kubelet device plugin daemon until SIGTERM, and ask a running one for its status.
 *
 * Status protocol: HTTP over the unix socket <state-dir>/gpuslice.sock (owner only), served by
 * src/http: `GET /v1/status` answers one line of JSON ({"resource", "registered", "resources":
 * [...], "devices": [{"id", "index", "health", "reason"?, "holder": {...}|null}], ...}).
 */
#pragma once

#include "config/config.h"

#define AGENT_STATUS_SOCKET "gpuslice.sock"
#define AGENT_STATUS_URL_PATH "/v1/status"
#define AGENT_STATUS_MAX (4u << 20)

struct agent_options {
        struct config_args args; /* command-line flags over the config file (config_args_parse) */
};

/* Run the agent on the calling thread until SIGTERM/SIGINT (SIGHUP reloads the config). Blocks
 * those signals in the calling process first: call it before any thread exists. Returns 0 after
 * a clean stop, -EINVAL for a bad configuration, another -errno when it could not start.
 * Logs (it is the daemon). */
/* Thread: the CLI's main thread (it becomes the loop thread); lock: none. */
int agent_run(const struct agent_options *o);
