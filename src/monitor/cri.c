/* SPDX-License-Identifier: Apache-2.0 */
/* cri — ListContainers over the CRI socket (see cri.h). Must never log. */
#include "monitor/cri.h"

#include <ctype.h>

#include "cri-subset.pb-c.h"
#include "rpc/rpc.h"
#include "util/util.h"

static const char *label(const Runtime__V1__Container *c, const char *key) {
        for (size_t i = 0; i < c->n_labels; i++)
                if (c->labels[i]->key && streq(c->labels[i]->key, key))
                        return c->labels[i]->value ? c->labels[i]->value : "";
        return "";
}

int cri_parse_list(const uint8_t *msg, size_t len, struct engine_container **ret, size_t *ret_n) {
        static const uint8_t empty[1];
        Runtime__V1__ListContainersResponse *r =
                runtime__v1__list_containers_response__unpack(NULL, len, msg ? msg : empty);
        if (!r)
                return -EBADMSG;
        size_t k = 0;
        struct engine_container *v = r->n_containers ? calloc(r->n_containers, sizeof *v) : NULL;
        if (r->n_containers && !v) {
                runtime__v1__list_containers_response__free_unpacked(r, NULL);
                return -ENOMEM;
        }
        for (size_t i = 0; i < r->n_containers; i++) {
                const Runtime__V1__Container *c = r->containers[i];
                if (!c->id || strlen(c->id) != 64 || c->state != RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING)
                        continue;
                struct engine_container *e = &v[k];
                bool hex = true;
                for (size_t j = 0; j < 64; j++) {
                        hex &= isxdigit((unsigned char)c->id[j]) != 0;
                        e->id[j] = (char)tolower((unsigned char)c->id[j]);
                }
                if (!hex) {
                        memset(e, 0, sizeof *e);
                        continue;
                }
                e->running = true;
                strscpy(e->pod_name, label(c, "io.kubernetes.pod.name"), sizeof e->pod_name);
                strscpy(e->pod_namespace, label(c, "io.kubernetes.pod.namespace"), sizeof e->pod_namespace);
                strscpy(e->pod_uid, label(c, "io.kubernetes.pod.uid"), sizeof e->pod_uid);
                strscpy(e->container_name, label(c, "io.kubernetes.container.name"), sizeof e->container_name);
                if (!e->container_name[0] && c->metadata && c->metadata->name)
                        strscpy(e->container_name, c->metadata->name, sizeof e->container_name);
                strscpy(e->name, e->container_name, sizeof e->name);
                k++;
        }
        runtime__v1__list_containers_response__free_unpacked(r, NULL);
        if (k == 0) {
                free(v);
                v = NULL;
        }
        *ret = v;
        *ret_n = k;
        return 0;
}

int cri_list(const char *socket, struct engine_container **ret, size_t *ret_n) {
        if (!socket || !socket[0])
                return -EINVAL;
        if (startswith(socket, "unix://"))
                socket += strlen("unix://");
        char target[4096 + 8];
        int k = snprintf(target, sizeof target, "unix:%s", socket);
        if (k < 0 || (size_t)k >= sizeof target)
                return -ENAMETOOLONG;

        Runtime__V1__ContainerStateValue state = RUNTIME__V1__CONTAINER_STATE_VALUE__INIT;
        state.state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
        Runtime__V1__ContainerFilter filter = RUNTIME__V1__CONTAINER_FILTER__INIT;
        filter.state = &state;
        Runtime__V1__ListContainersRequest req = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
        req.filter = &filter;
        uint8_t *buf = NULL, *resp = NULL;
        size_t len, resp_len = 0;
        int r = rpc_pack(&req.base, &buf, &len);
        if (r < 0)
                return r;
        r = rpc_call_unary(target, CRI_LIST_CONTAINERS, buf, len, CRI_TIMEOUT_MS, &resp, &resp_len, NULL);
        free(buf);
        if (r < 0)
                return r;
        r = cri_parse_list(resp, resp_len, ret, ret_n);
        free(resp);
        return r;
}
