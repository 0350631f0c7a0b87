/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd-status — `gpuslice status`: ask a running node agent (status_fetch: HTTP over its
 * status socket, <state-dir>/gpuslice.sock) and print its devices, their health and who holds
 * them, or its JSON answer. Must never: hang on a stuck agent (the client gives up after 5 s).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent/agent.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "cli/status-client.h"
#include "util/util.h"

static const char *jstr(json_t *o, const char *key) {
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : "";
}

/* A time-sliced / MPS GPU's held replicas as "replicas: N held (ns/pod/ctr, ...)" into buf (none: buf kept). */
static void replica_holders(json_t *reps, char *buf, size_t len) {
        size_t n = json_array_size(reps), at, i;
        json_t *r;
        if (!n)
                return;
        at = (size_t)snprintf(buf, len, "replicas: %zu held (", n);
        json_array_foreach(reps, i, r) {
                json_t *h = json_object_get(r, "holder");
                const char *pod = jstr(h, "pod");
                if (at < len)
                        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "",
                                               pod[0] ? "" : "pod not reported yet");
                if (pod[0] && at < len)
                        at += (size_t)snprintf(buf + at, len - at, "%s/%s/%s", jstr(h, "namespace"), pod,
                                               jstr(h, "container"));
        }
        if (at < len)
                snprintf(buf + at, len - at, ")");
}

static void print_table(json_t *j) {
        printf("resource %s  registered %s  endpoint %s\n", jstr(j, "resource"),
               json_is_true(json_object_get(j, "registered")) ? "yes" : "no", jstr(j, "endpoint"));
        json_t *res = json_object_get(j, "resources");
        size_t k;
        json_t *r;
        json_array_foreach(res, k, r) {
                if (k > 0) /* the first is the whole-GPU resource printed above */
                        printf("resource %s  registered %s  endpoint %s\n", jstr(r, "resource"),
                               json_is_true(json_object_get(r, "registered")) ? "yes" : "no", jstr(r, "endpoint"));
        }
        printf("%-5s %-44s %-5s %-24s %s\n", "GPU", "DEVICE ID", "NUMA", "HEALTH", "HELD BY");
        json_t *devs = json_object_get(j, "devices");
        size_t i;
        json_t *d;
        json_array_foreach(devs, i, d) {
                char holder[512] = "-";
                json_t *h = json_object_get(d, "holder");
                if (json_is_object(h)) {
                        const char *pod = jstr(h, "pod");
                        if (pod[0])
                                snprintf(holder, sizeof holder, "%s/%s/%s", jstr(h, "namespace"), pod,
                                         jstr(h, "container"));
                        else
                                snprintf(holder, sizeof holder, "(allocated, pod not reported yet)");
                }
                long long core = json_integer_value(json_object_get(d, "core_used"));
                long long mem = json_integer_value(json_object_get(d, "memory_used_bytes"));
                if (core > 0 || mem > 0)
                        snprintf(holder, sizeof holder, "shared: core %lld %%, memory %lld MiB", core, mem >> 20);
                replica_holders(json_object_get(d, "replicas"), holder, sizeof holder);
                char health[128];
                if (json_object_get(d, "reason"))
                        snprintf(health, sizeof health, "%s (%s)", jstr(d, "health"), jstr(d, "reason"));
                else
                        snprintf(health, sizeof health, "%s", jstr(d, "health"));
                printf("%-5lld %-44s %-5lld %-24s %s\n", (long long)json_integer_value(json_object_get(d, "index")),
                       jstr(d, "id"), (long long)json_integer_value(json_object_get(d, "numa")), health, holder);
        }
        printf("calls: allocate %lld, preferred %lld, rejected %lld\n",
               (long long)json_integer_value(json_object_get(j, "allocate_calls")),
               (long long)json_integer_value(json_object_get(j, "preferred_calls")),
               (long long)json_integer_value(json_object_get(j, "rejected_calls")));
}

int cmd_status(int argc, char **argv) {
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, 'd' },
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *state_dir = "/var/lib/gpuslice";
        const char *socket_path = NULL;
        bool json = false;
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, "d:s:jh", opts, NULL)) >= 0) {
                switch (c) {
                        case 'd': state_dir = optarg; break;
                        case 's': socket_path = optarg; break;
                        case 'j': json = true; break;
                        case 'h':
                                printf("Usage: gpuslice status [--state-dir DIR | --socket PATH] [--json]\n\n"
                                       "Show a running node agent's devices, their health and which pod holds each.\n"
                                       "  -d, --state-dir DIR  the agent's state dir (default /var/lib/gpuslice)\n"
                                       "  -s, --socket PATH    the status socket (default DIR/" AGENT_STATUS_SOCKET
                                       ")\n"
                                       "  -j, --json           print the agent's JSON answer\n");
                                return EXIT_OK;
                        default: return EXIT_USAGE;
                }
        }
        if (cli_no_more_args("status", argc, argv) != EXIT_OK)
                return EXIT_USAGE;
        char path[PATH_MAX];
        if (socket_path)
                strscpy(path, socket_path, sizeof path);
        else
                snprintf(path, sizeof path, "%s/%s", state_dir, AGENT_STATUS_SOCKET);

        _cleanup_(freep) char *text = NULL;
        int r = status_fetch(path, &text);
        if (r < 0) {
                fprintf(stderr, "gpuslice status: cannot reach the node agent at %s: %s\n", path, strerror(-r));
                return EXIT_RUNTIME;
        }
        json_error_t jerr;
        json_t *j = json_loads(text, 0, &jerr);
        if (!j || !json_is_object(j)) {
                fprintf(stderr, "gpuslice status: the agent's answer is not JSON: %s\n", jerr.text);
                json_decref(j);
                return EXIT_RUNTIME;
        }
        if (json)
                fputs(text, stdout);
        else
                print_table(j);
        json_decref(j);
        return EXIT_OK;
}
