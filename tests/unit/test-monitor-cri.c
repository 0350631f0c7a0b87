/* SPDX-License-Identifier: Apache-2.0 */
/* CRI ListContainers: decoding the runtime's answer into names, and the client's error paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cri-subset.pb-c.h"
#include "monitor/cri.h"
#include "rpc/rpc.h"
#include "util/util.h"

#define CID "3F1C2A9B8D7E6F5A4B3C2D1E0F9A8B7C6D5E4F3A2B1C0D9E8F7A6B5C4D3E2F1A"

static uint8_t *pack_one(const char *id, Runtime__V1__ContainerState st, bool with_labels, size_t *len) {
        Runtime__V1__Container c = RUNTIME__V1__CONTAINER__INIT;
        Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
        md.name = (char *)"meta-name";
        c.id = (char *)id;
        c.state = st;
        c.metadata = &md;
        Runtime__V1__Container__LabelsEntry e[3] = { RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT,
                                                     RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT,
                                                     RUNTIME__V1__CONTAINER__LABELS_ENTRY__INIT };
        e[0].key = (char *)"io.kubernetes.pod.name";
        e[0].value = (char *)"trainer-0";
        e[1].key = (char *)"io.kubernetes.pod.namespace";
        e[1].value = (char *)"ml";
        e[2].key = (char *)"io.kubernetes.container.name";
        e[2].value = (char *)"worker";
        Runtime__V1__Container__LabelsEntry *ep[3] = { &e[0], &e[1], &e[2] };
        if (with_labels) {
                c.n_labels = 3;
                c.labels = ep;
        }
        Runtime__V1__Container *cp[1] = { &c };
        Runtime__V1__ListContainersResponse r = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
        r.n_containers = 1;
        r.containers = cp;
        uint8_t *buf;
        assert_int_equal(rpc_pack(&r.base, &buf, len), 0);
        return buf;
}

static void test_parse_running(void **state) {
        (void)state;
        size_t len, n;
        uint8_t *b = pack_one(CID, RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, true, &len);
        struct engine_container *c;
        assert_int_equal(cri_parse_list(b, len, &c, &n), 0);
        free(b);
        assert_int_equal(n, 1);
        assert_string_equal(c[0].id, "3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a");
        assert_string_equal(c[0].pod_name, "trainer-0");
        assert_string_equal(c[0].pod_namespace, "ml");
        assert_string_equal(c[0].container_name, "worker");
        free(c);
}

static void test_parse_metadata_name_fallback(void **state) {
        (void)state;
        size_t len, n;
        uint8_t *b = pack_one(CID, RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, false, &len);
        struct engine_container *c;
        assert_int_equal(cri_parse_list(b, len, &c, &n), 0);
        free(b);
        assert_int_equal(n, 1);
        assert_string_equal(c[0].container_name, "meta-name");
        assert_string_equal(c[0].pod_name, "");
        free(c);
}

static void test_parse_skips_exited_and_bad_ids(void **state) {
        (void)state;
        size_t len, n;
        struct engine_container *c;
        uint8_t *b = pack_one(CID, RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED, true, &len);
        assert_int_equal(cri_parse_list(b, len, &c, &n), 0);
        free(b);
        assert_int_equal(n, 0);
        assert_null(c);
        b = pack_one("abc", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, true, &len);
        assert_int_equal(cri_parse_list(b, len, &c, &n), 0);
        free(b);
        assert_int_equal(n, 0);
        b = pack_one("zz1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a",
                     RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, true, &len);
        assert_int_equal(cri_parse_list(b, len, &c, &n), 0);
        free(b);
        assert_int_equal(n, 0);
}

static void test_parse_empty_and_garbage(void **state) {
        (void)state;
        size_t n;
        struct engine_container *c;
        assert_int_equal(cri_parse_list(NULL, 0, &c, &n), 0);
        assert_int_equal(n, 0);
        const uint8_t junk[] = { 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f };
        assert_int_equal(cri_parse_list(junk, sizeof junk, &c, &n), -EBADMSG);
}

static void test_list_no_runtime(void **state) {
        (void)state;
        struct engine_container *c;
        size_t n;
        assert_int_equal(cri_list("/nonexistent/cri.sock", &c, &n), -ECONNREFUSED);
        assert_int_equal(cri_list("", &c, &n), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_running),
                cmocka_unit_test(test_parse_metadata_name_fallback),
                cmocka_unit_test(test_parse_skips_exited_and_bad_ids),
                cmocka_unit_test(test_parse_empty_and_garbage),
                cmocka_unit_test(test_list_no_runtime),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
