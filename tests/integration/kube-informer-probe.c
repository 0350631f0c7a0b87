/* SPDX-License-Identifier: Apache-2.0 */
/* kube-informer-probe — runs one kube_informer (src/kube) against an API server and prints what it
 * sees, one line per change, for tests/integration/test_kube.py and tests/e2e to check recovery
 * from cut streams, 410, 429/500 bursts and hung responses:
 *   SYNC                      a (re)list was applied
 *   ADD|MOD|DEL KEY RV        a change of the cache
 *   STATS lists=… watches=… events=… relists410=… errors=… objects=…   every second
 * Runs until stdin is closed. Test helper, not installed. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube/kube.h"
#include "util/util.h"

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *rv_of(const json_t *o) {
        const char *rv = json_string_value(json_object_get(json_object_get(o, "metadata"), "resourceVersion"));
        return rv ? rv : "-";
}

static void key_of(const json_t *o, char *buf, size_t len) {
        json_t *m = json_object_get(o, "metadata");
        const char *ns = json_string_value(json_object_get(m, "namespace"));
        const char *n = json_string_value(json_object_get(m, "name"));
        snprintf(buf, len, "%s%s%s", ns ? ns : "", ns ? "/" : "", n ? n : "?");
}

static void changed(const json_t *old_obj, const json_t *new_obj, void *u) {
        (void)u;
        char key[600];
        key_of(new_obj ? new_obj : old_obj, key, sizeof key);
        pthread_mutex_lock(&out_lock);
        printf("%s %s %s\n", !old_obj ? "ADD" : !new_obj ? "DEL" : "MOD", key, rv_of(new_obj ? new_obj : old_obj));
        fflush(stdout);
        pthread_mutex_unlock(&out_lock);
}

static void synced(void *u) {
        (void)u;
        pthread_mutex_lock(&out_lock);
        printf("SYNC\n");
        fflush(stdout);
        pthread_mutex_unlock(&out_lock);
}

int main(int argc, char **argv) {
        const char *kubeconfig = NULL, *path = "/api/v1/pods", *fs = NULL, *slim = "none";
        unsigned watch_timeout = 300, idle = 0, request_ms = 30000, first = 100, cap = 1000;
        static const struct option o[] = {
                { "kubeconfig", required_argument, NULL, 'k' },
                { "path", required_argument, NULL, 'p' },
                { "field-selector", required_argument, NULL, 'f' },
                { "watch-timeout", required_argument, NULL, 'w' },
                { "idle", required_argument, NULL, 'i' },
                { "request-timeout-ms", required_argument, NULL, 'r' },
                { "backoff-ms", required_argument, NULL, 'b' },
                { "slim", required_argument, NULL, 's' },
                {},
        };
        int c;
        while ((c = getopt_long(argc, argv, "", o, NULL)) != -1) {
                switch (c) {
                        case 'k': kubeconfig = optarg; break;
                        case 'p': path = optarg; break;
                        case 'f': fs = optarg; break;
                        case 'w': watch_timeout = (unsigned)strtoul(optarg, NULL, 10); break;
                        case 'i': idle = (unsigned)strtoul(optarg, NULL, 10); break;
                        case 'r': request_ms = (unsigned)strtoul(optarg, NULL, 10); break;
                        case 'b':
                                first = (unsigned)strtoul(optarg, NULL, 10);
                                cap = first * 10;
                                break;
                        case 's': slim = optarg; break;
                        default: return 2;
                }
        }
        struct kube_config kc;
        struct gs_error err = { 0 };
        int r = kube_config_load(kubeconfig, NULL, &kc, &err);
        if (r < 0) {
                fprintf(stderr, "probe: %s\n", err.message);
                return 1;
        }
        struct kube_client *cl;
        if (kube_client_new(&kc, &cl) < 0)
                return 1;
        kube_config_done(&kc);
        kube_client_set_timeout(cl, request_ms);
        struct kube_informer_handlers h = { .changed = changed, .synced = synced };
        struct kube_informer *inf;
        kube_slim_fn fn = streq(slim, "pod") ? kube_slim_pod : streq(slim, "node") ? kube_slim_node : NULL;
        if (kube_informer_new(cl, path, NULL, fs, fn, &h, &inf) < 0)
                return 1;
        kube_informer_set_backoff(inf, first, cap);
        kube_informer_set_watch_timeout(inf, watch_timeout, idle);
        if (kube_informer_start(inf) < 0)
                return 1;
        for (;;) {
                struct pollfd p = { .fd = 0, .events = POLLIN };
                int n = poll(&p, 1, 1000);
                if (n > 0) {
                        char b[64];
                        if (read(0, b, sizeof b) <= 0)
                                break;
                }
                struct kube_informer_stats st;
                kube_informer_stats(inf, &st);
                char e[1024];
                kube_informer_last_error(inf, e, sizeof e);
                pthread_mutex_lock(&out_lock);
                printf("STATS lists=%llu watches=%llu events=%llu relists410=%llu errors=%llu objects=%zu "
                       "last_error=%s\n",
                       (unsigned long long)st.lists, (unsigned long long)st.watches, (unsigned long long)st.events,
                       (unsigned long long)st.relists_410, (unsigned long long)st.errors, st.objects, e);
                fflush(stdout);
                pthread_mutex_unlock(&out_lock);
        }
        kube_informer_free(inf);
        kube_client_free(cl);
        return 0;
}
