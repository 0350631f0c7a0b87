/* SPDX-License-Identifier: Apache-2.0 */
/* kube-write-probe — one write of src/kube (kube.h) against an API server, for the e2e and
 * integration tests:
 *   kube-write-probe KUBECONFIG annotate NS POD RV|- KEY=VALUE|KEY- ...
 *   kube-write-probe KUBECONFIG bind NS POD UID|- NODE [KEY=VALUE ...]   (annotations set with the Binding)
 *   kube-write-probe KUBECONFIG event NS|- KIND NAME UID|- TYPE REASON MESSAGE
 *   kube-write-probe KUBECONFIG jsonpatch PATH JSON
 * Prints "ok" or "error ERRNO-NAME http=N reason=R message=M"; exit 0 / 1. Test helper, not installed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"
#include "util/util.h"

static const char *opt(const char *s) {
        return streq(s, "-") ? NULL : s;
}

int main(int argc, char **argv) {
        if (argc < 3)
                return 2;
        struct kube_config kc;
        struct gs_error err = { 0 };
        if (kube_config_load(argv[1], NULL, &kc, &err) < 0) {
                fprintf(stderr, "%s\n", err.message);
                return 2;
        }
        struct kube_client *c;
        if (kube_client_new(&kc, &c) < 0)
                return 2;
        kube_config_done(&kc);
        struct kube_error e = { 0 };
        int r = -EINVAL;
        const char *cmd = argv[2];
        if (streq(cmd, "annotate") && argc >= 6) {
                size_t n = (size_t)(argc - 6);
                const char **k = calloc(n + 1, sizeof *k), **v = calloc(n + 1, sizeof *v);
                for (size_t i = 0; i < n; i++) {
                        char *a = strdup(argv[6 + i]), *eq = strchr(a, '=');
                        if (eq) {
                                *eq = 0;
                                v[i] = eq + 1;
                        } else if (a[0] && a[strlen(a) - 1] == '-')
                                a[strlen(a) - 1] = 0;
                        k[i] = a;
                }
                r = kube_pod_annotate(c, argv[3], argv[4], opt(argv[5]), k, v, n, &e);
        } else if (streq(cmd, "bind") && argc >= 7) {
                json_t *ann = argc > 7 ? json_object() : NULL;
                for (int i = 7; i < argc; i++) {
                        char *a = strdup(argv[i]), *eq = strchr(a, '=');
                        if (eq) {
                                *eq = 0;
                                json_object_set_new(ann, a, json_string(eq + 1));
                        }
                        free(a);
                }
                r = kube_pod_bind(c, argv[3], argv[4], opt(argv[5]), NULL, argv[6], ann, &e);
                json_decref(ann);
        } else if (streq(cmd, "event") && argc == 10)
                r = kube_event_post(c, opt(argv[3]), argv[4], argv[5], opt(argv[6]), argv[7], argv[8], argv[9],
                                    "gpuslice-test", &e);
        else if (streq(cmd, "jsonpatch") && argc == 5)
                r = kube_request(c, KUBE_PATCH_JSON, argv[3], argv[4], NULL, &e);
        kube_client_free(c);
        if (r >= 0) {
                printf("ok\n");
                return 0;
        }
        printf("error %s http=%ld reason=%s message=%s\n", strerrorname_np(-r), e.http, e.reason, e.message);
        return 1;
}
