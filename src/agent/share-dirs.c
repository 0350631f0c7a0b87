/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-dirs — the per-container limits dirs of the fractional path (share-internal.h):
 * <limits root>/<record>/{key,limits,ld.so.preload,shm/}, written from a record through the dir's
 * fd (util/limits-dir.h), removed, read back for the invariants, and cleaned up when their
 * allocation is gone.
 * Must never: write a limits file looser than the record's grant, write outside the limits root or
 * through a path rebuilt from a dir fd it holds, or remove a dir a record or the allocation record
 * still keeps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/share-internal.h"
#include "agent/share.h"
#include "state/state.h"
#include "util/atomic-file.h"
#include "util/limits-dir.h"
#include "util/log.h"
#include "util/util.h"

int share_dir_limits(const struct plugin *p, const struct share_rec *r, struct gs_limits *l) {
        const struct plugin_options *o = plugin_options(p);
        const struct devices *dev = plugin_devices(p);
        *l = (struct gs_limits){ .version = GS_LIMITS_VERSION,
                                 .core_policy = o->limit_when_alone ? GS_CORE_HARD : GS_CORE_ELASTIC };
        strscpy(l->container, r->name, sizeof l->container);
        strscpy(l->region, SHARE_REGION_PATH, sizeof l->region);
        for (unsigned g = 0; g < devices_count(dev); g++) {
                if (!(r->gpus & (UINT64_C(1) << g)))
                        continue;
                if (l->n_devices >= GS_MAX_DEVICES)
                        return -E2BIG;
                const struct device_info *x = devices_info(dev, g);
                struct gs_limits_device *d = &l->dev[l->n_devices];
                d->index = l->n_devices++;
                strscpy(d->uuid, x->id, sizeof d->uuid);
                unsigned core = share_rec_count(r, PLUGIN_CORE, g), mem = share_rec_count(r, PLUGIN_MEMORY, g);
                if (r->has[PLUGIN_CORE])
                        d->core_percent = core > 0 && core < SHARE_CORE_IDS ? core : 100;
                else
                        d->core_percent = o->core_resource[0] ? 1 : 100;
                if (r->has[PLUGIN_MEMORY])
                        d->memory_bytes = MIN((uint64_t)mem * o->memory_unit, x->memory_total);
                else if (o->memory_resource[0])
                        d->memory_bytes = MIN(o->memory_unit, x->memory_total);
        }
        return 0;
}

/* The key file: the resource and device ID the dir lives by (the record's first ID). */
static int rec_key(const struct plugin *p, const struct share_rec *r, char *buf, size_t len) {
        char id[SHARE_ID_MAX];
        if (r->n_ids == 0 || share_format_id(devices_info(plugin_devices(p), r->ids[0].gpu)->id,
                                             (enum plugin_kind)r->ids[0].kind, r->ids[0].n, id, sizeof id) < 0)
                return -EINVAL;
        return share_key_format(plugin_resource(p, (enum plugin_kind)r->ids[0].kind), id, buf, len);
}

int share_dir_write(const struct plugin *p, const struct share_rec *r, bool fresh, struct gs_error *err) {
        const char *root = plugin_options(p)->limits_root;
        struct gs_limits l;
        char text[GS_LIMITS_MAX_FILE], key[STATE_RESOURCE_MAX + STATE_DEVICE_ID_MAX + 4];
        int n = share_dir_limits(p, r, &l);
        if (n == 0)
                n = gs_limits_format(&l, text, sizeof text);
        if (n < 0)
                return gs_error_set(err, n, "cannot format the limits file: %s", strerror(-n));
        int kl = rec_key(p, r, key, sizeof key);
        if (kl < 0)
                return gs_error_set(err, kl, "bad record name %.100s", r->name);
        _cleanup_(closep) int dfd = limits_dir_create(root, r->name, fresh, err);
        if (dfd < 0)
                return dfd;
        /* No fsync: the journal (fsynced before) is the durable record, and every dir is rewritten from
         * it at start; the rename still shows a reader the old file or the new one, whole. */
        const struct plugin_options *o = plugin_options(p);
        struct limits_dir_libs libs;
        limits_dir_libs(o->interposer, o->nvml_standin, o->nvml_real, &libs);
        int e = limits_dir_write_files(dfd, key, (size_t)kl, text, (size_t)n, libs.preload, ATOMIC_FILE_NO_SYNC, err);
        if (e < 0)
                gs_error_prefix(err, "%.100s/%.60s", root, r->name);
        return e;
}

int share_dir_read_limits(const struct plugin *p, const char *name, struct gs_limits *ret) {
        char path[4400], err[128];
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        if ((size_t)snprintf(path, sizeof path, "%s/%s/%s", plugin_options(p)->limits_root, name, SHARE_LIMITS_FILE) >=
            sizeof path)
                return -ENAMETOOLONG;
        int r = read_file(path, GS_LIMITS_MAX_FILE, &text, &len);
        if (r < 0)
                return r;
        return gs_limits_parse(text, len, ret, err, sizeof err) < 0 ? -EBADMSG : 0;
}

void share_dir_remove(const struct plugin *p, const char *name) {
        _cleanup_(closep) int root = open(plugin_options(p)->limits_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root >= 0)
                (void)limits_dir_remove_at(root, name);
}

/* ---- clean-up ---- */

static bool read_key(int root, const char *name, char *resource, size_t rlen, char *id, size_t ilen) {
        char buf[STATE_RESOURCE_MAX + STATE_DEVICE_ID_MAX + 4];
        _cleanup_(closep) int dfd = openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return false;
        _cleanup_(closep) int fd = openat(dfd, SHARE_KEY_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n <= 0)
                return false;
        buf[n] = 0;
        return share_key_parse(buf, resource, rlen, id, ilen);
}

/* Records none of whose IDs the allocation record still holds: the container is gone. */
static size_t drop_ended_records(struct plugin *p, struct share_book *b) {
        const struct devices *d = plugin_devices(p);
        size_t dropped = 0;
        for (size_t i = 0; i < share_book_count(b);) {
                struct share_rec *r = share_book_at(b, i);
                bool live = r->open;
                for (size_t k = 0; k < r->n_ids && !live; k++) {
                        char id[SHARE_ID_MAX];
                        live = share_format_id(devices_info(d, r->ids[k].gpu)->id, (enum plugin_kind)r->ids[k].kind,
                                               r->ids[k].n, id, sizeof id) == 0 &&
                               state_find(plugin_record(p), plugin_resource(p, (enum plugin_kind)r->ids[k].kind), id);
                }
                if (live) {
                        i++;
                        continue;
                }
                log_debug("fraction record ended", "container=%s", r->name);
                share_book_remove(b, r);
                dropped++;
        }
        return dropped;
}

int share_dirs_cleanup(struct plugin *p, struct share_book *b, struct share_journal *j) {
        struct devices *dev = plugin_devices(p);
        devices_lock(dev);
        if (drop_ended_records(p, b) > 0)
                (void)share_journal_save(j, dev, b);
        char root_path[4096];
        strscpy(root_path, plugin_options(p)->limits_root, sizeof root_path);
        devices_unlock(dev);
        int root = open(root_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
                devices_lock(dev);
                bool live = share_book_find(b, de->d_name) || (have && state_find(plugin_record(p), resource, id));
                if (!live && limits_dir_remove_at(dirfd(d), de->d_name) == 0)
                        removed++;
                devices_unlock(dev);
        }
        closedir(d);
        return removed;
}
