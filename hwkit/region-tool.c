/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hwkit-region — the hardware kit's window on the interposer's contract (src/interposer/limits.h):
 *
 *   hwkit-region limits FILE --container ID --region PATH [--uuid UUID] [--memory BYTES] [--core PCT]
 *                                                          writes a limits file (gs_limits_format)
 *   hwkit-region dump REGION                              prints the region as JSON: each device's limit,
 *                                                          use, limiter interval and measured utilization,
 *                                                          each live slot's PID, host PID, bytes, launches
 *
 * For the kit's checks that drive libgpuslice-cuda.so directly (without `gpuslice run`) and read back what
 * it counted. Needs only libc, so the kit can rebuild it with a bare C compiler (hwkit/rebuild.sh). Never
 * writes a region: it maps it read-only.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interposer/limits.h"

static int usage(void) {
        fputs("usage: hwkit-region limits FILE --container ID --region PATH [--uuid UUID] [--memory BYTES] "
              "[--core PCT]\n       hwkit-region dump REGION\n",
              stderr);
        return 2;
}

static int number(const char *s, uint64_t max, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *end || v > max)
                return -1;
        *ret = v;
        return 0;
}

static int write_limits(int argc, char **argv) {
        struct gs_limits l;
        memset(&l, 0, sizeof l);
        l.version = GS_LIMITS_VERSION;
        l.n_devices = 1;
        l.dev[0].core_percent = 100;
        uint64_t v;
        for (int i = 3; i + 1 < argc; i += 2) {
                const char *k = argv[i], *val = argv[i + 1];
                if (strcmp(k, "--container") == 0 && strlen(val) < sizeof l.container)
                        memcpy(l.container, val, strlen(val) + 1);
                else if (strcmp(k, "--region") == 0 && strlen(val) < sizeof l.region)
                        memcpy(l.region, val, strlen(val) + 1);
                else if (strcmp(k, "--uuid") == 0 && strlen(val) < sizeof l.dev[0].uuid)
                        memcpy(l.dev[0].uuid, val, strlen(val) + 1);
                else if (strcmp(k, "--memory") == 0 && number(val, UINT64_MAX, &v) == 0)
                        l.dev[0].memory_bytes = v;
                else if (strcmp(k, "--core") == 0 && number(val, 100, &v) == 0 && v > 0)
                        l.dev[0].core_percent = (unsigned)v;
                else
                        return usage();
        }
        char buf[GS_LIMITS_MAX_FILE];
        int n = gs_limits_format(&l, buf, sizeof buf);
        if (n < 0) {
                fprintf(stderr, "hwkit-region: these limits would not parse back: %s\n", strerror(-n));
                return 1;
        }
        FILE *f = fopen(argv[2], "we");
        if (!f || fwrite(buf, 1, (size_t)n, f) != (size_t)n || fclose(f) != 0) {
                fprintf(stderr, "hwkit-region: cannot write %s: %s\n", argv[2], strerror(errno));
                return 1;
        }
        return 0;
}

static int dump(const char *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || (size_t)st.st_size != sizeof(struct gs_region)) {
                fprintf(stderr, "hwkit-region: %s is not a region of this version\n", path);
                return 1;
        }
        const struct gs_region *r = mmap(NULL, sizeof *r, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (r == MAP_FAILED || r->magic != GS_REGION_MAGIC || r->abi_version != GS_REGION_ABI) {
                fprintf(stderr, "hwkit-region: %s is not a region of this version\n", path);
                return 1;
        }
        unsigned nd = r->n_devices < GS_MAX_DEVICES ? r->n_devices : GS_MAX_DEVICES;
        printf("{\"container\": \"%.*s\", \"reclaims\": %" PRIu64 ", \"devices\": [", (int)sizeof r->container,
               r->container, __atomic_load_n(&r->reclaims, __ATOMIC_RELAXED));
        for (unsigned d = 0; d < nd; d++) {
                const struct gs_region_device *v = &r->dev[d];
                uint64_t used = 0;
                for (unsigned i = 0; i < r->slots_hw && i < GS_REGION_SLOTS; i++)
                        if (GS_OWNER_STATE(__atomic_load_n(&r->slot[i].owner, __ATOMIC_ACQUIRE)) == GS_SLOT_LIVE)
                                used += __atomic_load_n(&r->slot[i].used[d], __ATOMIC_RELAXED);
                printf("%s{\"uuid\": \"%.*s\", \"limit\": %" PRIu64 ", \"core\": %u, \"used\": %" PRIu64
                       ", \"interval_ns\": %" PRIu64 ", \"util_milli\": %" PRIu64 ", \"oom\": %" PRIu64 "}",
                       d ? ", " : "", (int)sizeof v->uuid, v->uuid, v->limit_bytes, v->core_percent, used,
                       __atomic_load_n(&v->interval_ns, __ATOMIC_RELAXED),
                       __atomic_load_n(&v->ctl_util_milli, __ATOMIC_RELAXED),
                       __atomic_load_n(&v->oom_count, __ATOMIC_RELAXED));
        }
        printf("], \"slots\": [");
        bool first = true;
        for (unsigned i = 0; i < r->slots_hw && i < GS_REGION_SLOTS; i++) {
                const struct gs_region_slot *s = &r->slot[i];
                uint64_t o = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
                if (GS_OWNER_STATE(o) != GS_SLOT_LIVE)
                        continue;
                printf("%s{\"slot\": %u, \"pid\": %u, \"host_pid\": %u, \"used\": [", first ? "" : ", ", i,
                       GS_OWNER_PID(o), __atomic_load_n(&s->host_pid, __ATOMIC_RELAXED));
                for (unsigned d = 0; d < nd; d++)
                        printf("%s%" PRIu64, d ? ", " : "", __atomic_load_n(&s->used[d], __ATOMIC_RELAXED));
                printf("], \"launches\": [");
                for (unsigned d = 0; d < nd; d++)
                        printf("%s%" PRIu64, d ? ", " : "", __atomic_load_n(&s->launches[d], __ATOMIC_RELAXED));
                printf("], \"throttled_ns\": [");
                for (unsigned d = 0; d < nd; d++)
                        printf("%s%" PRIu64, d ? ", " : "", __atomic_load_n(&s->throttled_ns[d], __ATOMIC_RELAXED));
                printf("]}");
                first = false;
        }
        printf("]}\n");
        return 0;
}

int main(int argc, char **argv) {
        if (argc >= 3 && strcmp(argv[1], "limits") == 0)
                return write_limits(argc, argv);
        if (argc == 3 && strcmp(argv[1], "dump") == 0)
                return dump(argv[2]);
        return usage();
}
