/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migctl/config — MIG layout files in NVIDIA mig-parted's config format, read with the one YAML reader
 * (kube/yaml.h: every scalar a string) and checked field by field: a file of NVIDIA's own layouts
 * (config-default.yaml) loads as is. Must never accept a field it does not understand, and never log.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/yaml.h"
#include "migctl/migctl.h"
#include "util/util.h"

static const char *str_of(const json_t *v) {
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static int parse_bool(const json_t *v, bool *ret) {
        const char *s = str_of(v);
        if (s && (streq(s, "true") || streq(s, "True") || streq(s, "TRUE")))
                *ret = true;
        else if (s && (streq(s, "false") || streq(s, "False") || streq(s, "FALSE")))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

/* "0x20B010DE" (device << 16 | vendor) */
static int parse_pci_id(const char *s, uint32_t *ret) {
        if (!s || !startswith(s, "0x") || strlen(s) != 10)
                return -EINVAL;
        uint32_t v = 0;
        for (const char *p = s + 2; *p; p++) {
                if (!isxdigit((unsigned char)*p))
                        return -EINVAL;
                v = v << 4 |
                    (uint32_t)(isdigit((unsigned char)*p) ? *p - '0' : (tolower((unsigned char)*p) - 'a' + 10));
        }
        *ret = v;
        return 0;
}

static int parse_devices(const json_t *v, struct migctl_entry *e, const char *where, struct gs_error *err) {
        const char *s = str_of(v);
        if (s && streq(s, "all")) {
                e->all = true;
                return 0;
        }
        if (!json_is_array(v) || json_array_size(v) == 0)
                return gs_error_set(err, -EINVAL, "%s: devices: expected all or a list of GPU indices", where);
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) {
                unsigned idx;
                if (!str_of(x) || parse_uint(str_of(x), 63, &idx) < 0)
                        return gs_error_set(err, -EINVAL, "%s: devices: '%s' is not a GPU index 0..63", where,
                                            str_of(x) ? str_of(x) : "(not a number)");
                e->devices |= 1ULL << idx;
        }
        return 0;
}

static int parse_filter(const json_t *v, struct migctl_entry *e, const char *where, struct gs_error *err) {
        size_t n = json_is_array(v) ? json_array_size(v) : 1;
        if (n == 0 || n > MIGCTL_MAX_FILTERS)
                return gs_error_set(err, -EINVAL, "%s: device-filter: 1 to %u PCI ids", where, MIGCTL_MAX_FILTERS);
        for (size_t i = 0; i < n; i++) {
                const json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
                if (parse_pci_id(str_of(x), &e->filter[e->n_filters]) < 0)
                        return gs_error_set(err, -EINVAL, "%s: device-filter: '%s' is not a PCI id like 0x20B010DE",
                                            where, str_of(x) ? str_of(x) : "(not a string)");
                e->n_filters++;
        }
        return 0;
}

static int parse_mig_devices(const json_t *v, struct migctl_entry *e, const char *where, struct gs_error *err) {
        if (!json_is_object(v))
                return gs_error_set(err, -EINVAL, "%s: mig-devices: expected {profile: count}", where);
        const char *k;
        const json_t *x;
        json_object_foreach((json_t *)v, k, x) {
                unsigned count;
                if (!mig_profile_name_valid(k))
                        return gs_error_set(err, -EINVAL,
                                            "%s: mig-devices: '%.40s' is not a GPU instance profile like 1g.10gb "
                                            "(compute-instance subdivisions are not supported)",
                                            where, k);
                if (!str_of(x) || parse_uint(str_of(x), MIG_MAX_DEVICES, &count) < 0 || count == 0 || count > 7)
                        return gs_error_set(err, -EINVAL, "%s: mig-devices: %s: count 1..7 expected", where, k);
                if (e->want.n == MIG_MAX_PROFILES)
                        return gs_error_set(err, -EINVAL, "%s: mig-devices: too many profiles", where);
                strscpy(e->want.item[e->want.n].profile, k, MIG_PROFILE_NAME_MAX);
                e->want.item[e->want.n++].count = count;
        }
        return 0;
}

/* lint: long — one entry of the format: each known key with its own check and message, in the format's order. */
static int parse_entry(const json_t *v, struct migctl_entry *e, const char *where, struct gs_error *err) {
        if (!json_is_object(v))
                return gs_error_set(err, -EINVAL, "%s: expected a mapping (devices, mig-enabled, mig-devices)", where);
        memset(e, 0, sizeof *e);
        const char *k;
        const json_t *x;
        bool have_devices = false, have_enabled = false;
        const json_t *devs = NULL;
        json_object_foreach((json_t *)v, k, x) {
                int r = 0;
                if (streq(k, "devices")) {
                        r = parse_devices(x, e, where, err);
                        have_devices = true;
                } else if (streq(k, "device-filter"))
                        r = parse_filter(x, e, where, err);
                else if (streq(k, "mig-enabled")) {
                        if (parse_bool(x, &e->want.enabled) < 0)
                                return gs_error_set(err, -EINVAL, "%s: mig-enabled: expected true or false", where);
                        have_enabled = true;
                } else if (streq(k, "mig-devices"))
                        devs = x;
                else
                        return gs_error_set(
                                err, -EINVAL,
                                "%s: unknown key '%.40s' (devices, device-filter, mig-enabled, mig-devices)", where, k);
                if (r < 0)
                        return r;
        }
        if (!have_devices || !have_enabled)
                return gs_error_set(err, -EINVAL, "%s: devices and mig-enabled are required", where);
        if (devs) {
                int r = parse_mig_devices(devs, e, where, err);
                if (r < 0)
                        return r;
                if (!e->want.enabled && e->want.n)
                        return gs_error_set(err, -EINVAL, "%s: mig-devices with mig-enabled: false", where);
        }
        return 0;
}

static int parse_layout(const char *name, const json_t *v, struct migctl_layout *l, struct gs_error *err) {
        if (strlen(name) == 0 || strlen(name) >= MIGCTL_NAME_MAX)
                return gs_error_set(err, -EINVAL, "mig-configs: a layout name of 1..%u characters",
                                    MIGCTL_NAME_MAX - 1);
        if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > MIGCTL_MAX_ENTRIES)
                return gs_error_set(err, -EINVAL, "mig-configs: %s: expected a list of 1..%u entries", name,
                                    MIGCTL_MAX_ENTRIES);
        strscpy(l->name, name, sizeof l->name);
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) {
                char where[MIGCTL_NAME_MAX + 32];
                snprintf(where, sizeof where, "mig-configs: %s[%zu]", name, i);
                int r = parse_entry(x, &l->entry[l->n], where, err);
                if (r < 0)
                        return r;
                l->n++;
        }
        return 0;
}

static int parse_root(const json_t *root, struct migctl_config *c, struct gs_error *err) {
        if (!json_is_object(root))
                return gs_error_set(err, -EINVAL, "expected a mapping with version and mig-configs");
        const char *k;
        const json_t *x;
        json_object_foreach((json_t *)root, k, x) {
                if (!streq(k, "version") && !streq(k, "mig-configs"))
                        return gs_error_set(err, -EINVAL, "unknown key '%.40s' (version, mig-configs)", k);
        }
        const char *version = str_of(json_object_get(root, "version"));
        if (!version || !streq(version, "v1"))
                return gs_error_set(err, -EINVAL, "version: expected v1");
        const json_t *configs = json_object_get(root, "mig-configs");
        if (!json_is_object(configs) || json_object_size(configs) == 0)
                return gs_error_set(err, -EINVAL, "mig-configs: expected a mapping of layout names");
        if (json_object_size(configs) > 1024)
                return gs_error_set(err, -EINVAL, "mig-configs: more than 1024 layouts");
        c->layout = calloc(json_object_size(configs), sizeof *c->layout);
        if (!c->layout)
                return -ENOMEM;
        json_object_foreach((json_t *)configs, k, x) {
                int r = parse_layout(k, x, &c->layout[c->n], err);
                if (r < 0)
                        return r;
                c->n++;
        }
        return 0;
}

int migctl_config_parse(const char *text, size_t len, const char *path, struct migctl_config *ret,
                        struct gs_error *err) {
        memset(ret, 0, sizeof *ret);
        if (len > MIGCTL_CONFIG_MAX)
                return gs_error_set(err, -EFBIG, "%s: larger than %u bytes", path, MIGCTL_CONFIG_MAX);
        json_t *root = NULL;
        int r = kube_yaml_to_json(text, len, path, &root, err);
        if (r < 0)
                return r;
        r = parse_root(root, ret, err);
        json_decref(root);
        if (r < 0) {
                migctl_config_done(ret);
                if (r == -EINVAL)
                        gs_error_prefix(err, "%s", path);
        }
        return r;
}

int migctl_config_load(const char *path, struct migctl_config *ret, struct gs_error *err) {
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        int r = read_file(path, MIGCTL_CONFIG_MAX, &text, &len);
        if (r < 0)
                return gs_error_set(err, r, "%s: %s", path, r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
        return migctl_config_parse(text, len, path, ret, err);
}

void migctl_config_done(struct migctl_config *c) {
        if (!c)
                return;
        free(c->layout);
        c->layout = NULL;
        c->n = 0;
}

const struct migctl_layout *migctl_config_find(const struct migctl_config *c, const char *name) {
        for (unsigned i = 0; i < c->n; i++)
                if (streq(c->layout[i].name, name))
                        return &c->layout[i];
        return NULL;
}

int migctl_layout_select(const struct migctl_layout *l, unsigned index, uint32_t pci_id,
                         const struct migctl_entry **ret, struct gs_error *err) {
        const struct migctl_entry *hit = NULL;
        unsigned hit_at = 0;
        for (unsigned i = 0; i < l->n; i++) {
                const struct migctl_entry *e = &l->entry[i];
                bool dev = e->all || (index < 64 && (e->devices >> index) & 1);
                bool filter = e->n_filters == 0;
                for (unsigned k = 0; k < e->n_filters; k++)
                        filter |= e->filter[k] == pci_id;
                if (!dev || !filter)
                        continue;
                if (hit)
                        return gs_error_set(err, -EINVAL, "layout %s: GPU %u is selected by entries %u and %u", l->name,
                                            index, hit_at, i);
                hit = e;
                hit_at = i;
        }
        *ret = hit;
        return 0;
}
