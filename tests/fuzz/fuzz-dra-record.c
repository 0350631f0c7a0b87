/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the DRA driver's journal record codec (src/dra/journal.c): no crash; a decoded record
 * has a valid UID, known state, consistent device names (each the name of the device it parses to) and at
 * most 32 devices, instance ids only on dynamic MIG devices, and encodes to a text that decodes to a record encoding to that same text. The input as
 * a reason makes a taint value that is a label value. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dra/journal.h"
#include "dra/slices.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size ? size : 1);
        struct dra_record *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
        if (!buf || !a || !b)
                goto out;
        memcpy(buf, data, size);
        if (size > 0) { /* the input as a reason (NUL-terminated at its end) */
                char *reason = strndup(buf, size - 1), v[DRA_MAX_LABEL + 1];
                if (reason) {
                        dra_taint_value(reason, v, sizeof v);
                        size_t n = strlen(v);
                        CHECK(n <= DRA_MAX_LABEL &&
                              (n == 0 || (isalnum((unsigned char)v[0]) && isalnum((unsigned char)v[n - 1]))));
                        for (size_t i = 0; i < n; i++)
                                CHECK(isalnum((unsigned char)v[i]) || strchr("-._", v[i]));
                        free(reason);
                }
        }
        struct gs_error err = { 0 };
        if (dra_record_decode(buf, size, a, &err) < 0) {
                CHECK(err.message[0]);
                goto out;
        }
        CHECK(dra_uid_valid(a->uid) && a->n <= DRA_RESULTS_MAX);
        CHECK(a->state >= DRA_REC_PREPARING && a->state <= DRA_REC_UNPREPARING);
        for (unsigned i = 0; i < a->n; i++) {
                struct dra_device_ref ref;
                char name[DRA_MAX_LABEL + 1];
                CHECK(dra_device_parse(a->dev[i].device, &ref) == 0 && ref.index == a->dev[i].index &&
                      dra_kind_shared(ref.kind) == a->dev[i].shared && ref.kind == a->dev[i].kind);
                CHECK(dra_device_name(&ref, name, sizeof name) == 0 && strcmp(name, a->dev[i].device) == 0);
                /* instance ids only on a dynamic MIG device, and only both */
                CHECK(!a->dev[i].made ||
                      (ref.kind == DRA_DEVICE_MIG_DYNAMIC && a->dev[i].gi <= 14 && a->dev[i].ci < MIG_MAX_CIS));
        }
        char *text = NULL;
        CHECK(dra_record_encode(a, &text) == 0);
        CHECK(dra_record_decode(text, strlen(text), b, &err) == 0);
        char *again = NULL;
        CHECK(dra_record_encode(b, &again) == 0 && strcmp(text, again) == 0);
        free(again);
        free(text);
out:
        free(buf);
        free(a);
        free(b);
        return 0;
}
