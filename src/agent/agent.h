/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent — what the node agent shares with its command-line client: the status socket and its
 * one-line protocol. The daemon itself is cmd_node (node.c), the client cmd_status (status.c);
 * both are declared in cli/commands.h.
 *
 * Protocol: connect to <state-dir>/gpuslice.sock, send "status\n", read one line of JSON
 * ({"resource", "registered", "devices": [{"id", "index", "health", "holder": {...}|null}], ...})
 * until the agent closes the connection.
 */
#pragma once

#define AGENT_STATUS_SOCKET "gpuslice.sock"
#define AGENT_STATUS_MAX (4u << 20)
