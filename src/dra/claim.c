/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/claim — the ResourceClaim and opaque-parameter decoders (claim.h). Pure. Must never accept a
 * field of the wrong type, a string that does not fit, or a parameter it does not know.
 */
#include "dra/claim.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/util.h"

bool dra_uid_valid(const char *uid) {
        size_t n = uid ? strlen(uid) : 0;
        if (n == 0 || n >= DRA_UID_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(islower((unsigned char)uid[i]) || isdigit((unsigned char)uid[i]) || uid[i] == '-'))
                        return false;
        return true;
}

/* A string member copied into buf: absent → "" when optional; wrong type or too long → -EINVAL. */
static int get_string(const json_t *obj, const char *key, bool required, char *buf, size_t len, const char *where,
                      struct gs_error *err) {
        const json_t *v = json_object_get(obj, key);
        if (!v) {
                buf[0] = '\0';
                return required ? gs_error_set(err, -EINVAL, "%s.%s: missing", where, key) : 0;
        }
        if (!json_is_string(v))
                return gs_error_set(err, -EINVAL, "%s.%s: not a string", where, key);
        const char *s = json_string_value(v);
        if (strlen(s) >= len || strlen(s) != json_string_length(v))
                return gs_error_set(err, -EINVAL, "%s.%s: longer than %zu characters", where, key, len - 1);
        if (required && !s[0])
                return gs_error_set(err, -EINVAL, "%s.%s: empty", where, key);
        strscpy(buf, s, len);
        return 0;
}

/* ---- parameters ---- */

static const char *const sharing_names[] = { "", "TimeSlicing", "MPS" };
static const char *const interval_names[] = { "Default", "Short", "Medium", "Long" };

const char *dra_sharing_name(enum dra_sharing s) {
        return (unsigned)s < ELEMENTSOF(sharing_names) ? sharing_names[s] : "";
}

const char *dra_interval_name(enum dra_interval i) {
        return (unsigned)i < ELEMENTSOF(interval_names) ? interval_names[i] : "";
}

/* Every member of o is one of `known` (NULL-terminated), else -EINVAL naming the first that is not. */
static int only_known(const json_t *o, const char *const *known, const char *where, struct gs_error *err) {
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)o, key, v) {
                bool ok = false;
                for (const char *const *k = known; *k && !ok; k++)
                        ok = streq(key, *k);
                if (!ok)
                        return gs_error_set(err, -EINVAL, "%s: unknown field \"%.60s\"", where, key);
        }
        return 0;
}

/* A Kubernetes quantity as the API writes it (a string, "4Gi") or an integer of bytes; at least 1 MiB. */
static int pinned_quantity(const json_t *v, uint64_t *ret, const char *where, const char *key, struct gs_error *err) {
        int r = -EINVAL;
        if (json_is_string(v))
                r = dra_quantity_parse(json_string_value(v), ret);
        else if (json_is_integer(v) && json_integer_value(v) > 0) {
                *ret = (uint64_t)json_integer_value(v);
                r = 0;
        }
        if (r < 0)
                return gs_error_set(err, -EINVAL, "%s.%.60s: not a quantity", where, key);
        if (*ret < DRA_MPS_MIN_PINNED)
                return gs_error_set(err, -EINVAL, "%s.%.60s: %" PRIu64 " B, at least 1Mi", where, key, *ret);
        return 0;
}

static int mps_per_device(const json_t *m, struct dra_sharing_params *p, struct gs_error *err) {
        static const char where[] = "parameters.sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit";
        if (!m || json_is_null(m))
                return 0;
        if (!json_is_object(m))
                return gs_error_set(err, -EINVAL, "%s: not an object", where);
        if (json_object_size(m) > DRA_MPS_LIMITS_MAX)
                return gs_error_set(err, -E2BIG, "%s: more than %u devices", where, DRA_MPS_LIMITS_MAX);
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)m, key, v) {
                struct dra_mps_limit *l = &p->per_device[p->n_per_device];
                if (!key[0] || strlen(key) >= sizeof l->device)
                        return gs_error_set(err, -EINVAL, "%s: a device key empty or longer than %zu characters", where,
                                            sizeof l->device - 1);
                int r = pinned_quantity(v, &l->bytes, where, key, err);
                if (r < 0)
                        return r;
                strscpy(l->device, key, sizeof l->device);
                p->n_per_device++;
        }
        return 0;
}

static int mps_config(const json_t *m, struct dra_sharing_params *p, struct gs_error *err) {
        static const char where[] = "parameters.sharing.mpsConfig";
        static const char *const known[] = { "defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit",
                                             "defaultPerDevicePinnedMemoryLimit", "multiUser", NULL };
        if (!m || json_is_null(m))
                return 0; /* MPS with the daemon's defaults */
        if (!json_is_object(m))
                return gs_error_set(err, -EINVAL, "%s: not an object", where);
        int r = only_known(m, known, where, err);
        if (r < 0)
                return r;
        const json_t *v = json_object_get(m, "defaultActiveThreadPercentage");
        if (v && !json_is_null(v)) {
                if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100)
                        return gs_error_set(err, -EINVAL, "%s.defaultActiveThreadPercentage: not an integer 1..100",
                                            where);
                p->thread_percentage = (unsigned)json_integer_value(v);
        }
        v = json_object_get(m, "defaultPinnedDeviceMemoryLimit");
        if (v && !json_is_null(v) && (r = pinned_quantity(v, &p->pinned, where, "defaultPinnedDeviceMemoryLimit", err)))
                return r;
        v = json_object_get(m, "multiUser");
        if (v && !json_is_null(v) && !json_is_boolean(v))
                return gs_error_set(err, -EINVAL, "%s.multiUser: not a boolean", where);
        if (json_is_true(v))
                return gs_error_set(err, -EINVAL,
                                    "%s.multiUser: true is not supported (the claim's control daemon serves the "
                                    "agent's user alone)",
                                    where);
        return mps_per_device(json_object_get(m, "defaultPerDevicePinnedMemoryLimit"), p, err);
}

static int timeslicing_config(const json_t *t, struct dra_sharing_params *p, struct gs_error *err) {
        static const char where[] = "parameters.sharing.timeSlicingConfig";
        static const char *const known[] = { "interval", NULL };
        if (!t || json_is_null(t))
                return 0;
        if (!json_is_object(t))
                return gs_error_set(err, -EINVAL, "%s: not an object", where);
        int r = only_known(t, known, where, err);
        if (r < 0)
                return r;
        const json_t *v = json_object_get(t, "interval");
        if (!v || json_is_null(v))
                return 0;
        for (unsigned i = 0; json_is_string(v) && i < ELEMENTSOF(interval_names); i++)
                if (streq(json_string_value(v), interval_names[i])) {
                        p->interval = (enum dra_interval)i;
                        return 0;
                }
        return gs_error_set(err, -EINVAL, "%s.interval: %s, expected Default, Short, Medium or Long", where,
                            json_is_string(v) ? "an unknown value" : "not a string");
}

static int sharing_from_json(const json_t *o, struct dra_sharing_params *p, struct gs_error *err) {
        static const char *const known[] = { "strategy", "timeSlicingConfig", "mpsConfig", NULL };
        if (!json_is_object(o))
                return gs_error_set(err, -EINVAL, "parameters.sharing: not an object");
        int r = only_known(o, known, "parameters.sharing", err);
        if (r < 0)
                return r;
        char strategy[16];
        if ((r = get_string(o, "strategy", true, strategy, sizeof strategy, "parameters.sharing", err)) < 0)
                return r;
        memset(p, 0, sizeof *p);
        const json_t *ts = json_object_get(o, "timeSlicingConfig"), *mps = json_object_get(o, "mpsConfig");
        if (streq(strategy, "TimeSlicing")) {
                p->strategy = DRA_SHARING_TIMESLICING;
                if (mps && !json_is_null(mps))
                        return gs_error_set(err, -EINVAL, "parameters.sharing.mpsConfig: given with TimeSlicing");
                return timeslicing_config(ts, p, err);
        }
        if (streq(strategy, "MPS")) {
                p->strategy = DRA_SHARING_MPS;
                if (ts && !json_is_null(ts))
                        return gs_error_set(err, -EINVAL, "parameters.sharing.timeSlicingConfig: given with MPS");
                return mps_config(mps, p, err);
        }
        return gs_error_set(err, -EINVAL, "parameters.sharing.strategy: \"%s\", expected TimeSlicing or MPS", strategy);
}

static int params_from_json(const json_t *o, struct dra_params *ret, struct gs_error *err) {
        if (!json_is_object(o))
                return gs_error_set(err, -EINVAL, "parameters: not a JSON object");
        char av[64], kind[32], policy[16];
        int r = get_string(o, "apiVersion", true, av, sizeof av, "parameters", err);
        r = r ?: get_string(o, "kind", true, kind, sizeof kind, "parameters", err);
        if (r < 0)
                return r;
        bool ours = streq(av, DRA_PARAMS_API_VERSION), nvidia = streq(av, DRA_PARAMS_NVIDIA_API_VERSION);
        if ((!ours && !nvidia) || !streq(kind, DRA_PARAMS_KIND))
                return gs_error_set(err, -EINVAL, "parameters: apiVersion/kind %.63s/%.31s, expected %s/%s or %s/%s",
                                    av, kind, DRA_PARAMS_API_VERSION, DRA_PARAMS_KIND, DRA_PARAMS_NVIDIA_API_VERSION,
                                    DRA_PARAMS_KIND);
        static const char *const known_ours[] = { "apiVersion", "kind", "corePolicy", "sharing", NULL };
        static const char *const known_nvidia[] = { "apiVersion", "kind", "sharing", NULL };
        if ((r = only_known(o, ours ? known_ours : known_nvidia, "parameters", err)) < 0)
                return r;
        struct dra_params p;
        memset(&p, 0, sizeof p);
        const json_t *sharing = json_object_get(o, "sharing");
        if (sharing && !json_is_null(sharing) && (r = sharing_from_json(sharing, &p.sharing, err)) < 0)
                return r;
        if (json_object_get(o, "corePolicy")) {
                if ((r = get_string(o, "corePolicy", true, policy, sizeof policy, "parameters", err)) < 0)
                        return r;
                if (streq(policy, "hard"))
                        p.core_policy = DRA_POLICY_HARD;
                else if (streq(policy, "elastic"))
                        p.core_policy = DRA_POLICY_ELASTIC;
                else
                        return gs_error_set(err, -EINVAL, "parameters.corePolicy: \"%s\", expected hard or elastic",
                                            policy);
        }
        *ret = p;
        return 0;
}

int dra_params_decode(const char *text, size_t len, struct dra_params *ret, struct gs_error *err) {
        if (!text || len > DRA_PARAMS_MAX)
                return gs_error_set(err, -E2BIG, "parameters: longer than %u bytes", DRA_PARAMS_MAX);
        json_error_t je;
        json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!o)
                return gs_error_set(err, -EINVAL, "parameters: not JSON: %s", je.text);
        int r = params_from_json(o, ret, err);
        json_decref(o);
        return r;
}

/* ---- the claim ---- */

/* Does a config whose requests are `reqs` apply to result request `request` ("main" or "main/sub")? */
static bool config_applies(const json_t *reqs, const char *request) {
        if (json_array_size(reqs) == 0)
                return true;
        size_t i;
        const json_t *v;
        json_array_foreach(reqs, i, v) {
                const char *s = json_string_value(v);
                size_t n = s ? strlen(s) : 0;
                if (s && (streq(s, request) || (strncmp(request, s, n) == 0 && request[n] == '/')))
                        return true;
        }
        return false;
}

static int capacity(const json_t *cc, const char *driver, const char *name, bool *has, uint64_t *ret, const char *where,
                    struct gs_error *err) {
        char qualified[DRA_MAX_DOMAIN + DRA_MAX_ID + 2];
        snprintf(qualified, sizeof qualified, "%s/%s", driver, name);
        const json_t *v = json_object_get(cc, name) ?: json_object_get(cc, qualified);
        if (!v)
                return 0;
        const char *s = json_string_value(v);
        int r = s ? dra_quantity_parse(s, ret) : -EINVAL;
        if (r < 0)
                return gs_error_set(err, -EINVAL, "%s.consumedCapacity.%s: not a quantity", where, name);
        *has = true;
        return 0;
}

/* lint: long — every field of one allocation result, each type-checked with its own message. */
static int decode_result(const json_t *o, const char *driver, unsigned i, struct dra_result *r, bool *ours,
                         struct gs_error *err) {
        char where[64], drv[DRA_MAX_DOMAIN + 2];
        snprintf(where, sizeof where, "status.allocation.devices.results[%u]", i);
        if (!json_is_object(o))
                return gs_error_set(err, -EINVAL, "%s: not an object", where);
        int e = get_string(o, "driver", true, drv, sizeof drv, where, err);
        if (e < 0)
                return e;
        *ours = streq(drv, driver);
        if (!*ours)
                return 0;
        memset(r, 0, sizeof *r);
        e = get_string(o, "request", true, r->request, sizeof r->request, where, err);
        e = e ?: get_string(o, "pool", true, r->pool, sizeof r->pool, where, err);
        e = e ?: get_string(o, "device", true, r->device, sizeof r->device, where, err);
        e = e ?: get_string(o, "shareID", false, r->share_id, sizeof r->share_id, where, err);
        if (e < 0)
                return e;
        if (r->share_id[0] && !dra_uid_valid(r->share_id))
                return gs_error_set(err, -EINVAL, "%s.shareID: not a UID", where);
        const json_t *admin = json_object_get(o, "adminAccess");
        if (admin && !json_is_boolean(admin) && !json_is_null(admin))
                return gs_error_set(err, -EINVAL, "%s.adminAccess: not a boolean", where);
        r->admin = json_is_true(admin);
        const json_t *cc = json_object_get(o, "consumedCapacity");
        if (cc && !json_is_object(cc) && !json_is_null(cc))
                return gs_error_set(err, -EINVAL, "%s.consumedCapacity: not an object", where);
        e = capacity(cc, driver, "memory", &r->has_memory, &r->memory, where, err);
        e = e ?: capacity(cc, driver, "cores", &r->has_cores, &r->cores, where, err);
        return e;
}

/* Apply the configs of `source` ("FromClass" or "FromClaim") for this driver to every result. */
static int apply_configs(const json_t *configs, const char *driver, const char *source, struct dra_claim *c,
                         struct gs_error *err) {
        size_t i;
        const json_t *cfg;
        json_array_foreach(configs, i, cfg) {
                const json_t *opaque = json_object_get(cfg, "opaque");
                const json_t *reqs = json_object_get(cfg, "requests");
                const char *src = json_string_value(json_object_get(cfg, "source"));
                if (!json_is_object(cfg) || (reqs && !json_is_array(reqs) && !json_is_null(reqs)))
                        return gs_error_set(err, -EINVAL, "status.allocation.devices.config[%zu]: malformed", i);
                if (!src || !streq(src, source) || !json_is_object(opaque))
                        continue;
                const char *drv = json_string_value(json_object_get(opaque, "driver"));
                if (!drv || !streq(drv, driver))
                        continue;
                struct dra_params p;
                int r = params_from_json(json_object_get(opaque, "parameters"), &p, err);
                if (r < 0)
                        return gs_error_prefix(err, "status.allocation.devices.config[%zu].opaque", i);
                for (unsigned k = 0; k < c->n_results; k++) {
                        if (!config_applies(reqs, c->results[k].request))
                                continue;
                        if (p.core_policy != DRA_POLICY_NODE)
                                c->results[k].params.core_policy = p.core_policy;
                        if (p.sharing.strategy != DRA_SHARING_NONE)
                                c->results[k].params.sharing = p.sharing;
                }
        }
        return 0;
}

static int decode_meta(const json_t *root, struct dra_claim *c, struct gs_error *err) {
        const json_t *meta = json_object_get(root, "metadata");
        if (!json_is_object(meta))
                return gs_error_set(err, -EINVAL, "metadata: missing");
        int r = get_string(meta, "uid", true, c->uid, sizeof c->uid, "metadata", err);
        r = r ?: get_string(meta, "namespace", true, c->namespace_, sizeof c->namespace_, "metadata", err);
        r = r ?: get_string(meta, "name", true, c->name, sizeof c->name, "metadata", err);
        if (r == 0 && !dra_uid_valid(c->uid))
                return gs_error_set(err, -EINVAL, "metadata.uid: not a UID");
        return r;
}

/* The pods status.reservedFor names (other consumers are counted out). */
static int decode_reserved(const json_t *list, struct dra_claim *c, struct gs_error *err) {
        size_t i;
        const json_t *o;
        if (list && !json_is_array(list) && !json_is_null(list))
                return gs_error_set(err, -EINVAL, "status.reservedFor: not an array");
        json_array_foreach(list, i, o) {
                const char *res = json_string_value(json_object_get(o, "resource"));
                char name[DRA_MAX_POOL_NAME + 1];
                if (!res || !streq(res, "pods"))
                        continue;
                int r = get_string(o, "name", true, name, sizeof name, "status.reservedFor[]", err);
                if (r < 0)
                        return r;
                if (c->n_reserved_pods < DRA_RESERVED_KEPT)
                        strscpy(c->reserved_pods[c->n_reserved_pods], name, sizeof c->reserved_pods[0]);
                c->n_reserved_pods++;
        }
        return 0;
}

static int claim_from_json(const json_t *root, const char *driver, struct dra_claim *c, struct gs_error *err) {
        if (!json_is_object(root))
                return gs_error_set(err, -EINVAL, "not a JSON object");
        int r = decode_meta(root, c, err);
        r = r ?: decode_reserved(json_object_get(json_object_get(root, "status"), "reservedFor"), c, err);
        if (r < 0)
                return r;
        const json_t *alloc = json_object_get(json_object_get(root, "status"), "allocation");
        if (!alloc || json_is_null(alloc))
                return 0;
        const json_t *devs = json_object_get(alloc, "devices");
        const json_t *results = json_object_get(devs, "results");
        const json_t *configs = json_object_get(devs, "config");
        if (!json_is_object(alloc) || (devs && !json_is_object(devs)) || (results && !json_is_array(results)) ||
            (configs && !json_is_array(configs)))
                return gs_error_set(err, -EINVAL, "status.allocation: malformed");
        if (json_array_size(results) > DRA_RESULTS_MAX)
                return gs_error_set(err, -E2BIG, "status.allocation.devices.results: more than %u", DRA_RESULTS_MAX);
        c->allocated = true;
        size_t i;
        const json_t *o;
        json_array_foreach(results, i, o) {
                bool ours = false;
                r = decode_result(o, driver, (unsigned)i, &c->results[c->n_results], &ours, err);
                if (r < 0)
                        return r;
                c->n_results += ours;
        }
        r = apply_configs(configs, driver, "FromClass", c, err);
        return r ?: apply_configs(configs, driver, "FromClaim", c, err);
}

int dra_claim_from_json(const json_t *root, const char *driver, struct dra_claim *ret, struct gs_error *err) {
        if (!driver)
                return gs_error_set(err, -EINVAL, "no driver name");
        struct dra_claim *c = calloc(1, sizeof *c);
        int r = c ? claim_from_json(root, driver, c, err) : gs_error_set(err, -ENOMEM, "out of memory");
        if (r == 0)
                *ret = *c;
        free(c);
        return r;
}

int dra_claim_decode(const char *text, size_t len, const char *driver, struct dra_claim *ret, struct gs_error *err) {
        if (!text || len > DRA_CLAIM_TEXT_MAX)
                return gs_error_set(err, -E2BIG, "claim longer than %u bytes", DRA_CLAIM_TEXT_MAX);
        json_error_t je;
        json_t *root = json_loadb(text, len, 0, &je);
        if (!root)
                return gs_error_set(err, -EINVAL, "not JSON: %s", je.text);
        int r = dra_claim_from_json(root, driver, ret, err);
        json_decref(root);
        return r;
}
