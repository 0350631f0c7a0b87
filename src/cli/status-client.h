/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status-client — the CLI's client of a running node agent's status socket (`gpuslice status`; the
 * server is the agent's, src/agent/status.c, agent.h's AGENT_STATUS_*). Must never hang on a stuck
 * agent.
 */
#pragma once

/* GET AGENT_STATUS_URL_PATH from the agent listening on socket_path, with a 5 s limit in all: the
 * JSON text in *ret (malloc'ed, NUL-terminated). 0, -ENAMETOOLONG, -ENOENT (no socket), -EACCES,
 * -ECONNREFUSED (no agent behind it), -ETIMEDOUT, -EFBIG (over AGENT_STATUS_MAX), -EPROTO (not a 200
 * answer), -EIO, -ENOMEM. */
int status_fetch(const char *socket_path, char **ret);
