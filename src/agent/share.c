/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share — the fractional GPU services of the node agent (see share.h, docs/sharing.md).
 *
 * Placement works without any cluster component: kubelet admits one pod at a time and, per
 * container, asks resource by resource (GetPreferredAllocation, then Allocate) in an undefined
 * order. The first fractional Allocate of a container opens a pending record (its GPU and its
 * limits dir); the other resource's GetPreferredAllocation steers to that GPU and its Allocate joins
 * the record when it comes next, within SHARE_PAIR_WINDOW_MS. Allocate refuses a request that spans
 * GPUs or does not fit a GPU, and a second resource on another GPU than its first.
 *
 * Must never: index anything with an unchecked ID or count, leave the lock held on an error path,
 * or write a limits file that does not parse back (gs_limits_format checks it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/health.h"
#include "agent/plugin-internal.h"
#include "agent/plugin.h"
#include "agent/share.h"
#include "alloc/alloc.h"
#include "deviceplugin.pb-c.h"
#include "interposer/limits.h"
#include "util/util.h"

#define BITS_WORDS (SHARE_MEM_IDS_MAX / 64u) /* enough for core (100) and memory (1024) IDs */

struct gpu_bits {
        uint64_t w[BITS_WORDS];
};

static void bit_set(struct gpu_bits *b, unsigned n) {
        b->w[n / 64] |= UINT64_C(1) << (n % 64);
}

static bool bit_test(const struct gpu_bits *b, unsigned n) {
        return b->w[n / 64] & (UINT64_C(1) << (n % 64));
}

static unsigned bit_count(const struct gpu_bits *b) {
        unsigned c = 0;
        for (unsigned i = 0; i < BITS_WORDS; i++)
                c += (unsigned)__builtin_popcountll(b->w[i]);
        return c;
}

static const char *kind_word(enum plugin_kind kind) {
        return kind == PLUGIN_CORE ? "core" : kind == PLUGIN_MEMORY ? "mem" : "";
}

static unsigned ids_on_gpu(const struct plugin *p, enum plugin_kind kind, unsigned g) {
        return kind == PLUGIN_CORE ? SHARE_CORE_IDS : kind == PLUGIN_MEMORY ? p->gpu[g].n_mem : 0;
}

static enum plugin_kind other_kind(enum plugin_kind kind) {
        return kind == PLUGIN_CORE ? PLUGIN_MEMORY : PLUGIN_CORE;
}

/* ---- IDs ---- */

int share_format_id(const char *uuid, enum plugin_kind kind, unsigned n, char *buf, size_t len) {
        if (kind != PLUGIN_CORE && kind != PLUGIN_MEMORY)
                return -EINVAL;
        int w = snprintf(buf, len, "%s::%s-%u", uuid, kind_word(kind), n);
        return w < 0 || (size_t)w >= len || (size_t)w >= SHARE_ID_MAX ? -ENAMETOOLONG : 0;
}

int share_parse_id(const struct plugin *p, const char *id, enum plugin_kind *ret_kind, unsigned *ret_gpu,
                   unsigned *ret_n) {
        if (!id || strlen(id) >= SHARE_ID_MAX)
                return -EINVAL;
        const char *sep = strstr(id, "::");
        if (!sep)
                return -EINVAL;
        size_t ulen = (size_t)(sep - id);
        int g = -1;
        for (unsigned i = 0; i < p->n; i++)
                if (strlen(p->gpu[i].id) == ulen && strncmp(p->gpu[i].id, id, ulen) == 0) {
                        g = (int)i;
                        break;
                }
        if (g < 0)
                return -EINVAL;
        const char *rest = sep + 2;
        enum plugin_kind kind;
        if (startswith(rest, "core-")) {
                kind = PLUGIN_CORE;
                rest += 5;
        } else if (startswith(rest, "mem-")) {
                kind = PLUGIN_MEMORY;
                rest += 4;
        } else
                return -EINVAL;
        unsigned n;
        unsigned max = ids_on_gpu(p, kind, (unsigned)g);
        if (max == 0 || parse_uint(rest, max - 1, &n) < 0)
                return -EINVAL;
        char canon[SHARE_ID_MAX];
        if (share_format_id(p->gpu[g].id, kind, n, canon, sizeof canon) < 0 || !streq(canon, id))
                return -EINVAL;
        *ret_kind = kind;
        *ret_gpu = (unsigned)g;
        *ret_n = n;
        return 0;
}

void share_usage(const struct plugin *p, struct share_usage *ret) {
        struct share_usage u = { 0 };
        for (size_t k = 0; k < p->state.n_allocs; k++) {
                const struct state_alloc *a = &p->state.allocs[k];
                if (streq(a->resource, p->opt.resource)) {
                        int i = plugin_find(p, a->device_id);
                        if (i >= 0)
                                u.whole |= UINT64_C(1) << i;
                        continue;
                }
                bool core = p->opt.core_resource[0] && streq(a->resource, p->opt.core_resource);
                bool mem = p->opt.memory_resource[0] && streq(a->resource, p->opt.memory_resource);
                if (!core && !mem)
                        continue;
                enum plugin_kind kind;
                unsigned g, n;
                if (share_parse_id(p, a->device_id, &kind, &g, &n) < 0 || kind != (core ? PLUGIN_CORE : PLUGIN_MEMORY))
                        continue;
                if (core)
                        u.core[g]++;
                else
                        u.mem[g]++;
                u.frac |= UINT64_C(1) << g;
        }
        *ret = u;
}

/* Parse a request's IDs of one kind into per-GPU bit sets. Duplicates and foreign IDs are refused;
 * with `usable`, so are IDs on unhealthy GPUs and on GPUs held whole. */
static enum rpc_code ids_to_bits(const struct plugin *p, enum plugin_kind kind, char **ids, size_t n, bool usable,
                                 const struct share_usage *u, const char *what, struct gpu_bits *bits,
                                 uint64_t *ret_gpus, struct rpc_status *st) {
        uint64_t gpus = 0;
        for (size_t k = 0; k < n; k++) {
                const char *id = ids[k] ? ids[k] : "";
                enum plugin_kind kk;
                unsigned g, num;
                if (share_parse_id(p, id, &kk, &g, &num) < 0 || kk != kind)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: unknown %s device ID \"%.96s\"", what,
                                         plugin_resource(p, kind), id);
                if (bit_test(&bits[g], num))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device ID %s given twice", what, id);
                if (usable && !p->gpu[g].healthy)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device %s is on unhealthy GPU %s (%s)", what,
                                         id, p->gpu[g].id, p->gpu[g].reason);
                if (usable && (u->whole & (UINT64_C(1) << g)))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: device %s is on GPU %s, which is allocated whole (%s); fractions of "
                                         "it cannot be handed out",
                                         what, id, p->gpu[g].id, p->opt.resource);
                bit_set(&bits[g], num);
                gpus |= UINT64_C(1) << g;
        }
        *ret_gpus = gpus;
        return RPC_OK;
}

static bool pending_open(const struct plugin *p, enum plugin_kind kind, uint64_t now_ms) {
        const struct plugin_pending *q = &p->pending;
        return q->open && q->kind != kind && now_ms - q->at_ms <= SHARE_PAIR_WINDOW_MS;
}

/* ---- GetPreferredAllocation ---- */

static int topo_of(const struct plugin *p, unsigned i) {
        for (unsigned g = 0; g < p->topo.n_gpus; g++)
                if (streq(p->topo.gpu[g].uuid, p->gpu[i].id))
                        return (int)g;
        return -1;
}

/* Whole GPUs through the core resource (a multiple of 100): untouched GPUs, topology-aware. */
static enum rpc_code prefer_whole_cores(struct plugin *p, unsigned count, uint64_t cand, uint64_t must_gpus,
                                        const char *what, uint64_t *ret, struct rpc_status *st) {
        struct alloc_request ar = { .count = count };
        for (unsigned i = 0; i < p->n; i++) {
                int g = topo_of(p, i);
                if (g < 0)
                        continue;
                if (cand & (UINT64_C(1) << i))
                        ar.available |= (alloc_set_t)1 << g;
                if (must_gpus & (UINT64_C(1) << i))
                        ar.must_include |= (alloc_set_t)1 << g;
        }
        if ((unsigned)__builtin_popcountll(ar.available) < count)
                return rpc_error(st, RPC_RESOURCE_EXHAUSTED, "%s: %u whole GPUs wanted, %d untouched ones available",
                                 what, count, __builtin_popcountll(ar.available));
        struct alloc_result res;
        char err[160] = "";
        if (alloc_pick_gpus(&p->topo, &ar, &res, err, sizeof err) < 0)
                return rpc_error(st, RPC_RESOURCE_EXHAUSTED, "%s: no %u whole GPUs: %s", what, count, err);
        uint64_t set = 0;
        for (unsigned j = 0; j < res.n; j++)
                for (unsigned i = 0; i < p->n; i++)
                        if (streq(p->topo.gpu[res.gpus[j]].uuid, p->gpu[i].id))
                                set |= UINT64_C(1) << i;
        *ret = set;
        return RPC_OK;
}

static enum rpc_code prefer_one(struct plugin_service *svc, const V1beta1__ContainerPreferredAllocationRequest *cr,
                                unsigned k, struct arena *a, V1beta1__ContainerPreferredAllocationResponse *out,
                                struct rpc_status *st) {
        struct plugin *p = svc->p;
        enum plugin_kind kind = svc->kind;
        const char *res = plugin_resource(p, kind);
        char what[48];
        struct gpu_bits avail[TOPO_MAX_GPUS] = { 0 }, must[TOPO_MAX_GPUS] = { 0 };
        uint64_t avail_gpus, must_gpus;
        struct share_usage u;
        enum rpc_code c;

        snprintf(what, sizeof what, "container request %u", k);
        share_usage(p, &u);
        if (cr->allocation_size <= 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: allocation_size %" PRId32 " is not positive", what,
                                 cr->allocation_size);
        unsigned size = (unsigned)cr->allocation_size;
        c = ids_to_bits(p, kind, cr->available_deviceids, cr->n_available_deviceids, false, &u, what, avail,
                        &avail_gpus, st);
        if (c != RPC_OK)
                return c;
        c = ids_to_bits(p, kind, cr->must_include_deviceids, cr->n_must_include_deviceids, true, &u, what, must,
                        &must_gpus, st);
        if (c != RPC_OK)
                return c;
        for (unsigned g = 0; g < p->n; g++)
                for (unsigned w = 0; w < BITS_WORDS; w++)
                        if (must[g].w[w] & ~avail[g].w[w])
                                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                                 "%s: must_include_deviceIDs not all in available_deviceIDs", what);
        if (cr->n_must_include_deviceids > size)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %zu must-include devices but allocation_size %u", what,
                                 cr->n_must_include_deviceids, size);

        /* GPUs that may be offered at all. */
        uint64_t usable = 0;
        for (unsigned g = 0; g < p->n; g++)
                if (p->gpu[g].healthy && !(u.whole & (UINT64_C(1) << g)) &&
                    (p->explicit_gpu < 0 || (unsigned)p->explicit_gpu == g))
                        usable |= UINT64_C(1) << g;

        uint64_t chosen = 0;
        if (kind == PLUGIN_CORE && size > SHARE_CORE_IDS) {
                if (size % SHARE_CORE_IDS)
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: %u %s exceeds one GPU (100) and is not a multiple of 100: more than "
                                         "one GPU must be whole GPUs",
                                         what, size, res);
                uint64_t cand = 0;
                for (unsigned g = 0; g < p->n; g++)
                        if ((usable & (UINT64_C(1) << g)) && bit_count(&avail[g]) == SHARE_CORE_IDS &&
                            !(u.frac & (UINT64_C(1) << g)))
                                cand |= UINT64_C(1) << g;
                if (must_gpus & ~cand)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: must-include IDs are on a GPU not wholly free",
                                         what);
                c = prefer_whole_cores(p, size / SHARE_CORE_IDS, cand, must_gpus, what, &chosen, st);
                if (c != RPC_OK)
                        return c;
        } else {
                unsigned largest = 0;
                for (unsigned g = 0; g < p->n; g++)
                        largest = MAX(largest, ids_on_gpu(p, kind, g));
                if (size > largest)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %u %s exceeds one GPU (%u at most)", what,
                                         size, res, largest);
                if (__builtin_popcountll(must_gpus) > 1)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: must-include IDs span GPUs", what);
                uint64_t cand = 0;
                for (unsigned g = 0; g < p->n; g++)
                        if ((usable & (UINT64_C(1) << g)) && bit_count(&avail[g]) >= size &&
                            (!must_gpus || (must_gpus & (UINT64_C(1) << g))))
                                cand |= UINT64_C(1) << g;
                if (!cand)
                        return rpc_error(st, RPC_RESOURCE_EXHAUSTED, "%s: no healthy GPU has %u %s available", what,
                                         size, res);
                uint64_t now = health_now_ms();
                if (pending_open(p, kind, now) && (cand & p->pending.gpus)) {
                        /* This container's other resource is already on a GPU: follow it. */
                        chosen = UINT64_C(1) << __builtin_ctzll(cand & p->pending.gpus);
                } else {
                        /* First resource of a container: avoid GPUs where the other resource has
                         * nothing left, then binpack (fullest first) or spread (emptiest first). */
                        enum plugin_kind ok = other_kind(kind);
                        if (plugin_resource(p, ok)[0]) {
                                uint64_t roomy = 0;
                                for (unsigned g = 0; g < p->n; g++) {
                                        unsigned used = ok == PLUGIN_CORE ? u.core[g] : u.mem[g];
                                        if ((cand & (UINT64_C(1) << g)) && used < ids_on_gpu(p, ok, g))
                                                roomy |= UINT64_C(1) << g;
                                }
                                if (roomy)
                                        cand = roomy;
                        }
                        int best = -1;
                        unsigned best_free = 0;
                        for (unsigned g = 0; g < p->n; g++) {
                                if (!(cand & (UINT64_C(1) << g)))
                                        continue;
                                unsigned f = bit_count(&avail[g]);
                                if (best < 0 || (p->opt.spread ? f > best_free : f < best_free)) {
                                        best = (int)g;
                                        best_free = f;
                                }
                        }
                        chosen = UINT64_C(1) << best;
                }
        }

        /* Must-include first, then the lowest available IDs on the chosen GPUs. */
        out->deviceids = arena_alloc(a, sizeof(char *) * (size + 1));
        if (!out->deviceids)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        for (size_t j = 0; j < cr->n_must_include_deviceids; j++)
                out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", cr->must_include_deviceids[j]);
        for (unsigned g = 0; g < p->n && out->n_deviceids < size; g++) {
                if (!(chosen & (UINT64_C(1) << g)))
                        continue;
                unsigned max = ids_on_gpu(p, kind, g);
                for (unsigned n = 0; n < max && out->n_deviceids < size; n++) {
                        if (!bit_test(&avail[g], n) || bit_test(&must[g], n))
                                continue;
                        char id[SHARE_ID_MAX];
                        if (share_format_id(p->gpu[g].id, kind, n, id, sizeof id) < 0)
                                return rpc_error(st, RPC_INTERNAL, "device ID too long");
                        out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", id);
                }
        }
        if (out->n_deviceids != size || a->failed)
                return rpc_error(st, RPC_INTERNAL, "%s: could not fill %u IDs", what, size);
        return RPC_OK;
}

static enum rpc_code prefer_share(void *ctx, const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k,
                                  struct arena *a, V1beta1__ContainerPreferredAllocationResponse *out,
                                  struct rpc_status *st) {
        return prefer_one(ctx, cr, k, a, out, st);
}

enum rpc_code share_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret,
                                  size_t *ret_len, struct rpc_status *st) {
        struct plugin_service *svc = userdata;
        return plugin_preferred_each(svc->p, req, req_len, prefer_share, svc, ret, ret_len, st);
}

/* ---- the per-container limits dir ---- */

/* Remove dir and what is in it, two levels deep (key, limits, shm/region). */
static int remove_tree_at(int parent, const char *name, unsigned depth) {
        int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return unlinkat(parent, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (de->d_type == DT_DIR && depth > 0)
                        (void)remove_tree_at(dirfd(d), de->d_name, depth - 1);
                else
                        (void)unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
        return unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

static int write_file_at(int dfd, const char *name, const char *text, size_t len, mode_t mode) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, ".%s.tmp", name);
        (void)unlinkat(dfd, tmp, 0);
        int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        int r = 0;
        if (write(fd, text, len) != (ssize_t)len || fchmod(fd, mode) < 0)
                r = errno ? -errno : -EIO;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0)
                (void)unlinkat(dfd, tmp, 0);
        return r;
}

/* Write <root>/<name>/{key,limits,shm/} for a record. fresh: a new container (an old dir of the
 * same name belonged to a container whose key ID kubelet has handed out again: it is gone). */
static int write_container_dir(struct plugin *p, const struct plugin_pending *rec, const char *key_resource,
                               const char *key_id, bool fresh, char *err, size_t errlen) {
        struct gs_limits l = { .version = GS_LIMITS_VERSION,
                               .core_policy = p->opt.limit_when_alone ? GS_CORE_HARD : GS_CORE_ELASTIC };
        strscpy(l.container, rec->name, sizeof l.container);
        strscpy(l.region, SHARE_REGION_PATH, sizeof l.region);
        for (unsigned g = 0; g < p->n; g++) {
                if (!(rec->gpus & (UINT64_C(1) << g)))
                        continue;
                if (l.n_devices >= GS_MAX_DEVICES) {
                        snprintf(err, errlen, "more than %u GPUs in one container", GS_MAX_DEVICES);
                        return -E2BIG;
                }
                struct gs_limits_device *d = &l.dev[l.n_devices];
                d->index = l.n_devices++;
                strscpy(d->uuid, p->gpu[g].id, sizeof d->uuid);
                d->memory_bytes = MIN((uint64_t)rec->mem[g] * p->opt.memory_unit, p->gpu[g].memory_total);
                d->core_percent = rec->core[g] > 0 && rec->core[g] < SHARE_CORE_IDS ? rec->core[g] : 100;
        }
        char text[GS_LIMITS_MAX_FILE];
        int n = gs_limits_format(&l, text, sizeof text);
        if (n < 0) {
                snprintf(err, errlen, "cannot format the limits file: %s", strerror(-n));
                return n;
        }

        if (mkdir(p->opt.limits_root, 0755) < 0 && errno != EEXIST) {
                int r = -errno;
                snprintf(err, errlen, "cannot create %.180s: %s", p->opt.limits_root, strerror(-r));
                return r;
        }
        _cleanup_(closep) int root = open(p->opt.limits_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0) {
                int r = -errno;
                snprintf(err, errlen, "cannot open %.180s: %s", p->opt.limits_root, strerror(-r));
                return r;
        }
        if (fresh)
                (void)remove_tree_at(root, rec->name, 2);
        if (mkdirat(root, rec->name, 0755) < 0 && errno != EEXIST) {
                int r = -errno;
                snprintf(err, errlen, "cannot create %.100s/%.60s: %s", p->opt.limits_root, rec->name, strerror(-r));
                return r;
        }
        _cleanup_(closep) int dfd = openat(root, rec->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
                int r = -errno;
                snprintf(err, errlen, "cannot open %.100s/%.60s: %s", p->opt.limits_root, rec->name, strerror(-r));
                return r;
        }
        /* The region is created by the first process of the container, whatever its user. */
        if ((mkdirat(dfd, SHARE_SHM_DIR, 0777) < 0 && errno != EEXIST) || fchmodat(dfd, SHARE_SHM_DIR, 0777, 0) < 0) {
                int r = -errno;
                snprintf(err, errlen, "cannot create the region dir: %s", strerror(-r));
                return r;
        }
        char key[STATE_RESOURCE_MAX + STATE_DEVICE_ID_MAX + 4];
        int kl = snprintf(key, sizeof key, "%s\n%s\n", key_resource, key_id);
        int r = write_file_at(dfd, SHARE_KEY_FILE, key, (size_t)kl, 0644);
        if (r >= 0)
                r = write_file_at(dfd, SHARE_LIMITS_FILE, text, (size_t)n, 0444);
        if (r < 0)
                snprintf(err, errlen, "cannot write %.100s/%.60s: %s", p->opt.limits_root, rec->name, strerror(-r));
        return r;
}

/* ---- Allocate ---- */

static V1beta1__Mount *mount_msg(struct arena *a, const char *container_path, const char *host_path, bool ro) {
        V1beta1__Mount *m = arena_alloc(a, sizeof *m);
        if (!m)
                return NULL;
        v1beta1__mount__init(m);
        m->container_path = arena_printf(a, "%s", container_path);
        m->host_path = arena_printf(a, "%s", host_path);
        m->read_only = ro;
        return m->container_path && m->host_path ? m : NULL;
}

static bool add_env(V1beta1__ContainerAllocateResponse *out, struct arena *a, const char *key, const char *value) {
        V1beta1__ContainerAllocateResponse__EnvsEntry *e = arena_alloc(a, sizeof *e);
        if (!e)
                return false;
        v1beta1__container_allocate_response__envs_entry__init(e);
        e->key = arena_printf(a, "%s", key);
        e->value = arena_printf(a, "%s", value);
        out->envs[out->n_envs++] = e;
        return e->key && e->value;
}

/* Check the shape of one container's IDs: core up to 100 on one GPU, more only as whole GPUs;
 * memory on one GPU. */
static enum rpc_code check_shape(const struct plugin *p, enum plugin_kind kind, const struct gpu_bits *bits,
                                 uint64_t gpus, const char *what, struct rpc_status *st) {
        const char *res = plugin_resource(p, kind);
        unsigned total = 0, ngpus = (unsigned)__builtin_popcountll(gpus);
        for (unsigned g = 0; g < p->n; g++)
                total += bit_count(&bits[g]);
        if (kind == PLUGIN_CORE && total > SHARE_CORE_IDS) {
                if (total % SHARE_CORE_IDS)
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: %u %s exceeds one GPU (100) and is not a multiple of 100; more than "
                                         "one GPU must be whole GPUs",
                                         what, total, res);
                for (unsigned g = 0; g < p->n; g++)
                        if ((gpus & (UINT64_C(1) << g)) && bit_count(&bits[g]) != SHARE_CORE_IDS)
                                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                                 "%s: %u %s must be %u whole GPUs, but GPU %s gives %u of 100", what,
                                                 total, res, total / SHARE_CORE_IDS, p->gpu[g].id,
                                                 bit_count(&bits[g]));
                return RPC_OK;
        }
        if (ngpus > 1) {
                char list[256] = "";
                size_t len = 0;
                for (unsigned g = 0; g < p->n && len < sizeof list - 1; g++)
                        if (gpus & (UINT64_C(1) << g)) {
                                int w = snprintf(list + len, sizeof list - len, "%s%s: %u", len ? ", " : "",
                                                 p->gpu[g].id, bit_count(&bits[g]));
                                len = w < 0 ? len : MIN(len + (size_t)w, sizeof list - 1);
                        }
                unsigned largest = 0;
                for (unsigned g = 0; g < p->n; g++)
                        largest = MAX(largest, ids_on_gpu(p, kind, g));
                if (total > largest)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %u %s exceeds one GPU (%u at most) (%s)", what,
                                         total, res, largest, list);
                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                 "%s: %s IDs span %u GPUs (%s); one container's share must come from one GPU", what,
                                 res, ngpus, list);
        }
        return RPC_OK;
}

static enum rpc_code allocate_one(struct plugin_service *svc, const V1beta1__ContainerAllocateRequest *cr,
                                  unsigned k, bool may_pair, struct gpu_bits *all, struct arena *a,
                                  V1beta1__ContainerAllocateResponse *out, struct plugin_pending *ret_rec,
                                  bool *ret_paired, struct rpc_status *st) {
        struct plugin *p = svc->p;
        enum plugin_kind kind = svc->kind;
        const char *res = plugin_resource(p, kind);
        struct gpu_bits bits[TOPO_MAX_GPUS] = { 0 };
        struct share_usage u;
        uint64_t gpus = 0;
        char what[48], err[256];

        snprintf(what, sizeof what, "container request %u", k);
        if (cr->n_devices_ids == 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: no device IDs", what);
        share_usage(p, &u);
        enum rpc_code c = ids_to_bits(p, kind, cr->devices_ids, cr->n_devices_ids, true, &u, what, bits, &gpus, st);
        if (c != RPC_OK)
                return c;
        /* An ID in two containers of one message (all: the IDs of the earlier containers). */
        for (unsigned g = 0; g < p->n; g++)
                for (unsigned w = 0; w < BITS_WORDS; w++) {
                        if (all[g].w[w] & bits[g].w[w])
                                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                                 "%s: a device is also requested by another container", what);
                        all[g].w[w] |= bits[g].w[w];
                }
        c = check_shape(p, kind, bits, gpus, what, st);
        if (c != RPC_OK)
                return c;
        if (p->explicit_gpu >= 0 && gpus != UINT64_C(1) << p->explicit_gpu)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: the scheduler placed this container on GPU %s", what,
                                 p->gpu[p->explicit_gpu].id);
        struct stat lib;
        if (stat(p->opt.interposer, &lib) < 0 || !S_ISREG(lib.st_mode))
                return rpc_error(st, RPC_FAILED_PRECONDITION,
                                 "%s: the CUDA interposer %s is missing on the node (sharing.interposer)", what,
                                 p->opt.interposer);

        /* This container's record: joined to the pending one of its other resource, or new. */
        struct plugin_pending rec = { 0 };
        bool paired = false;
        uint64_t now = health_now_ms();
        if (may_pair && pending_open(p, kind, now)) {
                const struct plugin_pending *q = &p->pending;
                bool same = kind == PLUGIN_MEMORY ? (gpus & ~q->gpus) == 0
                                                  : (q->gpus & ~gpus) == 0; /* core may be whole GPUs */
                if (!same) {
                        char other[96] = "";
                        for (unsigned g = 0; g < p->n; g++)
                                if (q->gpus & (UINT64_C(1) << g)) {
                                        strscpy(other, p->gpu[g].id, sizeof other);
                                        break;
                                }
                        p->pending.open = false; /* kubelet fails this container: nothing will join */
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: %s IDs are on another GPU than this container's %s (on %s, allocated "
                                         "just before); one container's core and memory must be on one GPU",
                                         what, res, plugin_resource(p, q->kind), other);
                }
                rec = *q;
                paired = true;
        } else {
                /* Named after its first ID: unique among live allocations, and kubelet hands that
                 * ID out again only after this container is gone. */
                for (unsigned g = 0; g < p->n && !rec.name[0]; g++)
                        for (unsigned n = 0; n < ids_on_gpu(p, kind, g); n++)
                                if (bit_test(&bits[g], n)) {
                                        snprintf(rec.name, sizeof rec.name, "%s.%s-%u", p->gpu[g].id, kind_word(kind),
                                                 n);
                                        break;
                                }
                rec.kind = kind;
        }
        rec.gpus |= gpus;
        rec.at_ms = now;
        for (unsigned g = 0; g < p->n; g++) {
                unsigned cnt = bit_count(&bits[g]);
                if (kind == PLUGIN_CORE)
                        rec.core[g] = (uint16_t)cnt;
                else
                        rec.mem[g] = (uint16_t)cnt;
        }
        /* The key the dir lives by: the record's first ID (of the kind that opened it). */
        char key_id[SHARE_ID_MAX];
        const char *dot = strrchr(rec.name, '.');
        if (!dot || (size_t)(dot - rec.name) >= sizeof key_id - 8)
                return rpc_error(st, RPC_INTERNAL, "bad record name");
        snprintf(key_id, sizeof key_id, "%.*s::%s", (int)(dot - rec.name), rec.name, dot + 1);
        int r = write_container_dir(p, &rec, plugin_resource(p, rec.kind), key_id, !paired, err, sizeof err);
        if (r < 0)
                return rpc_error(st, RPC_INTERNAL, "%s: %s", what, err);

        c = plugin_fill_devices(p, a, rec.gpus, 2, out, st);
        if (c != RPC_OK)
                return c;
        /* CDI: the GPU's <id>-shared device, which also brings the interposer (src/cdi, docs/runtime.md) */
        for (size_t j = 0; j < out->n_cdi_devices; j++)
                if (!(out->cdi_devices[j]->name = arena_printf(a, "%s-shared", out->cdi_devices[j]->name)))
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
        if (!add_env(out, a, "LD_PRELOAD", SHARE_LIB_PATH) || !add_env(out, a, GS_LIMITS_ENV, SHARE_LIMITS_PATH))
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        char host[4400];
        out->mounts = arena_alloc(a, sizeof(void *) * 3);
        if (!out->mounts)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        snprintf(host, sizeof host, "%s/%s/%s", p->opt.limits_root, rec.name, SHARE_LIMITS_FILE);
        out->mounts[out->n_mounts++] = mount_msg(a, SHARE_LIMITS_PATH, host, true);
        snprintf(host, sizeof host, "%s/%s/%s", p->opt.limits_root, rec.name, SHARE_SHM_DIR);
        out->mounts[out->n_mounts++] = mount_msg(a, SHARE_SHM_PATH, host, false);
        out->mounts[out->n_mounts++] = mount_msg(a, SHARE_LIB_PATH, p->opt.interposer, true);
        if (!out->mounts[0] || !out->mounts[1] || !out->mounts[2])
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        *ret_rec = rec;
        *ret_paired = paired;
        return RPC_OK;
}

enum rpc_code share_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                             struct rpc_status *st) {
        struct plugin_service *svc = userdata;
        struct plugin *p = svc->p;
        const char *res = plugin_resource(p, svc->kind);
        struct arena a = { 0 };
        enum rpc_code c = RPC_OK;
        struct plugin_pending last = { 0 };
        bool paired = false;

        V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode AllocateRequest");
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;

        pthread_mutex_lock(&p->lock);
        p->n_allocate++;
        void **slots = NULL;
        c = plugin_responses_new(in->n_container_requests, "AllocateRequest", &a, &slots, st);
        resp.container_responses = (void *)slots;
        struct gpu_bits *all = calloc(TOPO_MAX_GPUS, sizeof *all);
        if (!all && c == RPC_OK)
                c = rpc_error(st, RPC_INTERNAL, "out of memory");
        for (size_t k = 0; c == RPC_OK && k < in->n_container_requests; k++) {
                V1beta1__ContainerAllocateResponse *o = arena_alloc(&a, sizeof *o);
                if (!o) {
                        c = rpc_error(st, RPC_INTERNAL, "out of memory");
                        break;
                }
                v1beta1__container_allocate_response__init(o);
                /* kubelet sends one container per call; only then may it join a pending record. */
                c = allocate_one(svc, in->container_requests[k], (unsigned)k, in->n_container_requests == 1, all, &a,
                                 o, &last, &paired, st);
                resp.container_responses[resp.n_container_responses++] = o;
        }
        if (c == RPC_OK) {
                time_t now = time(NULL);
                for (size_t k = 0; k < in->n_container_requests; k++) {
                        const V1beta1__ContainerAllocateRequest *cr = in->container_requests[k];
                        for (size_t j = 0; j < cr->n_devices_ids; j++) {
                                enum plugin_kind kind;
                                unsigned g, n;
                                if (share_parse_id(p, cr->devices_ids[j], &kind, &g, &n) < 0)
                                        continue; /* cannot happen: checked above */
                                struct state_alloc e = { .gpu_index = p->gpu[g].index, .alloc_time = (uint64_t)now };
                                strscpy(e.resource, res, sizeof e.resource);
                                strscpy(e.device_id, cr->devices_ids[j], sizeof e.device_id);
                                if (kind == PLUGIN_CORE)
                                        e.core_percent = 1;
                                else
                                        e.memory_bytes = p->opt.memory_unit;
                                (void)state_remove(&p->state, res, e.device_id);
                                (void)state_add(&p->state, &e);
                        }
                }
                /* A paired record is complete; a new one waits for its other resource (if the
                 * profile has one). */
                p->pending = last;
                p->pending.open = !paired && plugin_resource(p, other_kind(svc->kind))[0];
                atomic_fetch_add(&p->generation, 1); /* the other kind's IDs of these GPUs change health */
        } else {
                p->n_errors++;
        }
        pthread_mutex_unlock(&p->lock);
        free(all);

        if (c == RPC_OK && rpc_pack(&resp.base, ret, ret_len) < 0)
                c = rpc_error(st, RPC_INTERNAL, "out of memory");
        arena_free(&a);
        v1beta1__allocate_request__free_unpacked(in, NULL);
        return c;
}

/* ---- state upkeep ---- */

size_t share_fixup_state(struct plugin *p) {
        size_t fixed = 0;
        for (size_t k = 0; k < p->state.n_allocs; k++) {
                struct state_alloc *a = &p->state.allocs[k];
                bool core = p->opt.core_resource[0] && streq(a->resource, p->opt.core_resource);
                bool mem = p->opt.memory_resource[0] && streq(a->resource, p->opt.memory_resource);
                enum plugin_kind kind;
                unsigned g, n;
                if ((!core && !mem) || a->gpu_index >= 0 || share_parse_id(p, a->device_id, &kind, &g, &n) < 0)
                        continue;
                a->gpu_index = p->gpu[g].index;
                if (kind == PLUGIN_CORE)
                        a->core_percent = 1;
                else
                        a->memory_bytes = p->opt.memory_unit;
                fixed++;
        }
        if (fixed)
                p->state.generation++;
        return fixed;
}

static bool read_key(int root, const char *name, char *resource, size_t rlen, char *id, size_t ilen) {
        char path[512], buf[STATE_RESOURCE_MAX + STATE_DEVICE_ID_MAX + 4];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", name, SHARE_KEY_FILE) >= sizeof path)
                return false;
        int fd = openat(root, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return false;
        buf[n] = 0;
        char *nl = strchr(buf, '\n');
        if (!nl)
                return false;
        *nl = 0;
        char *end = strchr(nl + 1, '\n');
        if (end)
                *end = 0;
        if (strlen(buf) >= rlen || strlen(nl + 1) >= ilen)
                return false;
        strscpy(resource, buf, rlen);
        strscpy(id, nl + 1, ilen);
        return true;
}

int share_cleanup_dirs(struct plugin *p) {
        int root = open(p->opt.limits_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        DIR *d = fdopendir(root);
        if (!d) {
                int r = -errno;
                close(root);
                return r;
        }
        int removed = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char resource[STATE_RESOURCE_MAX], id[STATE_DEVICE_ID_MAX];
                bool have = read_key(dirfd(d), de->d_name, resource, sizeof resource, id, sizeof id);
                /* Decide and remove under the lock: an Allocate may be re-creating this name. */
                pthread_mutex_lock(&p->lock);
                bool live = (p->pending.open && streq(p->pending.name, de->d_name)) ||
                            (have && state_find(&p->state, resource, id));
                if (!live && remove_tree_at(dirfd(d), de->d_name, 2) == 0)
                        removed++;
                pthread_mutex_unlock(&p->lock);
        }
        closedir(d);
        return removed;
}

int share_set_explicit_gpu(struct plugin *p, const char *uuid) {
        if (!uuid) {
                p->explicit_gpu = -1;
                return 0;
        }
        int i = plugin_find(p, uuid);
        if (i < 0)
                return -ENOENT;
        p->explicit_gpu = i;
        return 0;
}
