/* SPDX-License-Identifier: Apache-2.0 */
/* output — loading a node for the CLI and printing its matrix, tree, GPU table and JSON. */
#include "cli/output.h"

#include <getopt.h>
#include <inttypes.h>

#include "cli/commands.h"
#include "nvml/nvml.h"
#include "util/util.h"

#define MAX_TOPOLOGY_FILE (1u << 20)

int cli_nvml_open(const char *cmd, const char *library, struct nvml **ret) {
        struct nvml_error e = { 0 };
        int r = nvml_open(library, ret, &e);
        if (r >= 0)
                return EXIT_OK;
        fprintf(stderr, "%s: cannot use NVML (%s): %s: %s\n", cmd, library ? library : NVML_DEFAULT_LIBRARY, e.func,
                e.text);
        if (r == -ELIBACC || r == -ENXIO)
                fprintf(stderr, "%s: is the NVIDIA driver installed, with its library on the library path?\n", cmd);
        return EXIT_RUNTIME;
}

static int node_load_impl(const struct node_source *src, struct topo *ret, struct mig_node *ret_mig);

int node_load(const struct node_source *src, struct topo *ret) {
        return node_load_impl(src, ret, NULL);
}

/* The MIG side of a node read from a file: the modes the description gives, no instances (the
 * simulator's `mig` lines are read by the simulator). */
static void mig_from_topo(const struct topo *t, struct mig_node *m) {
        mig_node_init(m, t->n_gpus);
        for (unsigned i = 0; i < t->n_gpus; i++)
                m->gpu[i].mode = m->gpu[i].pending = t->gpu[i].mig_mode;
}

static int node_load_impl(const struct node_source *src, struct topo *ret, struct mig_node *ret_mig) {
        if (src->topology) {
                _cleanup_(freep) char *text = NULL;
                size_t len;
                int r = streq(src->topology, "-") ? read_fd(STDIN_FILENO, MAX_TOPOLOGY_FILE, &text, &len)
                                                  : read_file(src->topology, MAX_TOPOLOGY_FILE, &text, &len);
                if (r < 0) {
                        fprintf(stderr, "gpuslice: cannot read %s: %s\n", src->topology,
                                r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
                        return EXIT_RUNTIME;
                }
                struct gs_error e;
                if (topo_parse(text, len, ret, &e) < 0) {
                        fprintf(stderr, "gpuslice: %s: %s\n", src->topology, e.message);
                        return EXIT_DATA;
                }
                if (ret_mig)
                        mig_from_topo(ret, ret_mig);
                return EXIT_OK;
        }
        struct nvml_error e = { 0 };
        struct nvml *n = NULL;
        int r = cli_nvml_open("gpuslice", src->nvml_library, &n);
        if (r != EXIT_OK) {
                fputs("gpuslice: without a driver, --topology FILE works from a saved `nvidia-smi topo -m`.\n", stderr);
                return r;
        }
        r = nvml_inventory(n, ret, &e);
        if (r >= 0 && ret_mig)
                r = nvml_mig_inventory(n, ret, ret_mig, &e);
        nvml_close(n);
        if (r < 0) {
                fprintf(stderr, "gpuslice: NVML inventory failed: %s: %s\n", e.func, e.text);
                return EXIT_RUNTIME;
        }
        return EXIT_OK;
}

int node_load_new_mig(const struct node_source *src, struct topo **ret, struct mig_node **ret_mig) {
        _cleanup_(freep) struct topo *t = malloc(sizeof *t);
        _cleanup_(freep) struct mig_node *m = malloc(sizeof *m);
        if (!t || !m)
                return EXIT_RUNTIME;
        int r = node_load_impl(src, t, m);
        if (r == EXIT_OK) {
                *ret = TAKE_PTR(t);
                *ret_mig = TAKE_PTR(m);
        }
        return r;
}

static const char *mode_name(int mode) {
        return mode < 0 ? "n/a" : mode ? "on" : "off";
}

/* Like nvidia-smi: the GPU instances (`nvidia-smi mig -lgi`), then the MIG devices table. */
void print_mig(FILE *f, const struct mig_node *m) {
        bool any = false;
        for (unsigned g = 0; g < m->n_gpus; g++) {
                const struct mig_gpu *mg = &m->gpu[g];
                if (mg->mode < 0)
                        continue;
                if (!any)
                        fprintf(f, "MIG mode:\n%-4s %-8s %s\n", "GPU", "CURRENT", "PENDING");
                any = true;
                fprintf(f, "%-4u %-8s %s\n", g, mode_name(mg->mode), mode_name(mg->pending));
        }
        if (!any)
                return;
        bool gis = false;
        for (unsigned g = 0; g < m->n_gpus; g++)
                for (unsigned i = 0; i < m->gpu[g].n_gis; i++) {
                        const struct mig_gi *gi = &m->gpu[g].gi[i];
                        if (!gis)
                                fprintf(f, "\nGPU instances:\n%-4s %-16s %-10s %-11s %-10s %s\n", "GPU", "NAME",
                                        "PROFILE ID", "INSTANCE ID", "PLACEMENT", "COMPUTE INSTANCES");
                        gis = true;
                        char pl[24], name[48];
                        snprintf(pl, sizeof pl, "%u:%u", gi->placement.start, gi->placement.size);
                        snprintf(name, sizeof name, "MIG %s", gi->profile[0] ? gi->profile : "?");
                        fprintf(f, "%-4u %-16s %-10u %-11u %-10s %u\n", g, name, gi->profile_id, gi->id, pl, gi->n_cis);
                }
        bool devs = false;
        for (unsigned g = 0; g < m->n_gpus; g++)
                for (unsigned k = 0; k < m->gpu[g].n_devices; k++) {
                        const struct mig_device *d = &m->gpu[g].dev[k];
                        if (!devs)
                                fprintf(f,
                                        "\nMIG devices:\n%-4s %-3s %-3s %-4s %-12s %-22s %-4s %-3s %-3s %-3s %-3s %-3s "
                                        "%s\n",
                                        "GPU", "GI", "CI", "MIG", "PROFILE", "MEMORY-USAGE", "SM", "CE", "ENC", "DEC",
                                        "OFA", "JPG", "UUID");
                        devs = true;
                        char mem[48];
                        snprintf(mem, sizeof mem, "%lluMiB / %lluMiB", (unsigned long long)(d->memory_used >> 20),
                                 (unsigned long long)(d->memory_total >> 20));
                        fprintf(f, "%-4u %-3u %-3u %-4u %-12s %-22s %-4u %-3u %-3u %-3u %-3u %-3u %s\n", g, d->gi,
                                d->ci, d->index, d->profile, mem, d->sms, d->copy_engines, d->encoders, d->decoders,
                                d->ofas, d->jpegs, d->uuid);
                }
        if (!devs)
                fputs("\nMIG devices: none\n", f);
}

json_t *json_mig(const struct mig_node *m) {
        json_t *gpus = json_array();
        for (unsigned g = 0; g < m->n_gpus; g++) {
                const struct mig_gpu *mg = &m->gpu[g];
                json_t *gis = json_array(), *devs = json_array();
                for (unsigned i = 0; i < mg->n_gis; i++) {
                        const struct mig_gi *gi = &mg->gi[i];
                        json_t *cis = json_array();
                        for (unsigned j = 0; j < gi->n_cis; j++)
                                json_array_append_new(cis, json_pack("{s:i, s:i, s:i, s:i}", "id", gi->ci[j].id,
                                                                     "profile_id", gi->ci[j].profile_id, "start",
                                                                     gi->ci[j].placement.start, "size",
                                                                     gi->ci[j].placement.size));
                        json_array_append_new(gis, json_pack("{s:i, s:s, s:i, s:i, s:i, s:i, s:o}", "id", gi->id,
                                                             "profile", gi->profile, "profile_id", gi->profile_id,
                                                             "start", gi->placement.start, "size", gi->placement.size,
                                                             "slices", gi->slices, "compute_instances", cis));
                }
                for (unsigned k = 0; k < mg->n_devices; k++) {
                        const struct mig_device *d = &mg->dev[k];
                        json_array_append_new(
                                devs, json_pack("{s:i, s:i, s:i, s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:i}", "index",
                                                d->index, "gpu_instance", d->gi, "compute_instance", d->ci, "profile",
                                                d->profile, "uuid", d->uuid, "name", d->name, "memory_total_bytes",
                                                (json_int_t)d->memory_total, "memory_used_bytes",
                                                (json_int_t)d->memory_used, "sms", d->sms, "gpu_instance_slices",
                                                d->gi_slices, "compute_instance_slices", d->ci_slices));
                }
                json_array_append_new(gpus, json_pack("{s:i, s:s, s:s, s:o, s:o}", "gpu", g, "mode",
                                                      mode_name(mg->mode), "pending", mode_name(mg->pending),
                                                      "gpu_instances", gis, "devices", devs));
        }
        return gpus;
}

int node_load_new(const struct node_source *src, struct topo **ret) {
        _cleanup_(freep) struct topo *t = malloc(sizeof *t);
        if (!t)
                return EXIT_RUNTIME;
        int r = node_load(src, t);
        if (r == EXIT_OK)
                *ret = TAKE_PTR(t);
        return r;
}

int cli_no_more_args(const char *cmd, int argc, char *const *argv) {
        if (optind >= argc)
                return EXIT_OK;
        fprintf(stderr, "gpuslice %s: unexpected argument '%s'\n", cmd, argv[optind]);
        return EXIT_USAGE;
}

static const char *cuda_str(int v, char *buf, size_t len) {
        if (v <= 0)
                snprintf(buf, len, "unknown");
        else
                snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
        return buf;
}

void print_matrix(FILE *f, const struct topo *t) {
        char b[8];
        bool cpu = false, numa = false;
        for (unsigned i = 0; i < t->n_gpus; i++) {
                cpu |= t->gpu[i].cpu_affinity[0] != '\0';
                numa |= t->gpu[i].numa_node >= 0;
        }
        fputs("      ", f);
        for (unsigned j = 0; j < t->n_gpus; j++)
                fprintf(f, "\tGPU%u", j);
        for (unsigned k = 0; k < t->n_nics; k++)
                fprintf(f, "\t%s", t->nic[k].name);
        if (cpu)
                fputs("\tCPU Affinity", f);
        if (numa)
                fputs("\tNUMA Affinity", f);
        fputc('\n', f);
        for (unsigned i = 0; i < t->n_gpus; i++) {
                fprintf(f, "GPU%u", i);
                for (unsigned j = 0; j < t->n_gpus; j++)
                        fprintf(f, "\t%s", topo_link_name(t->link[i][j], b));
                for (unsigned k = 0; k < t->n_nics; k++)
                        fprintf(f, "\t%s", topo_level_name((enum topo_level)t->nic[k].level[i]));
                if (cpu)
                        fprintf(f, "\t%s", t->gpu[i].cpu_affinity[0] ? t->gpu[i].cpu_affinity : "N/A");
                if (numa) {
                        if (t->gpu[i].numa_node >= 0)
                                fprintf(f, "\t%d", t->gpu[i].numa_node);
                        else
                                fputs("\tN/A", f);
                }
                fputc('\n', f);
        }
        for (unsigned k = 0; k < t->n_nics; k++) {
                fprintf(f, "%s", t->nic[k].name);
                for (unsigned j = 0; j < t->n_gpus; j++)
                        fprintf(f, "\t%s", topo_level_name((enum topo_level)t->nic[k].level[j]));
                for (unsigned m = 0; m < t->n_nics; m++)
                        fprintf(f, "\t%s", m == k ? "X" : "?");
                fputc('\n', f);
        }
        fputs("\nLegend:\n\n"
              "  X    = Self\n"
              "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
              "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA "
              "node\n"
              "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
              "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
              "  PIX  = Connection traversing at most a single PCIe bridge\n"
              "  NV#  = Connection traversing a bonded set of # NVLinks\n",
              f);
}

static const char *state_name(enum topo_gpu_state s) {
        switch (s) {
                case TOPO_GPU_OK: return "ok";
                case TOPO_GPU_NO_PERMISSION: return "no-permission";
                case TOPO_GPU_LOST: return "lost";
                case TOPO_GPU_ERROR: return "error";
        }
        return "?";
}

/* CPUs of a group when every GPU below it agrees, else NULL. */
static const char *group_cpus(const struct topo *t, const struct topo_tree *tr, unsigned k) {
        const char *cpus = NULL;
        for (unsigned m = k + 1; m < tr->n_nodes && tr->nodes[m].depth > tr->nodes[k].depth; m++) {
                if (tr->nodes[m].kind != TOPO_TREE_GPU)
                        continue;
                const char *c = t->gpu[tr->nodes[m].gpu].cpu_affinity;
                if (!c[0] || (cpus && !streq(cpus, c)))
                        return NULL;
                cpus = c;
        }
        return cpus;
}

static void tree_label(FILE *f, const struct topo *t, const struct topo_tree *tr, unsigned k) {
        const struct topo_tree_node *n = &tr->nodes[k];
        char mem[32], cuda[16];
        switch (n->kind) {
                case TOPO_TREE_SYSTEM:
                        fprintf(f, "node: %u GPU%s, driver %s, CUDA %s%s\n", t->n_gpus, t->n_gpus == 1 ? "" : "s",
                                t->driver_version[0] ? t->driver_version : "unknown",
                                cuda_str(t->cuda_version, cuda, sizeof cuda), t->nvswitch ? ", NVSwitch fabric" : "");
                        return;
                case TOPO_TREE_GPU: {
                        const struct topo_gpu *g = &t->gpu[n->gpu];
                        fprintf(f, "GPU%d  %s  %s  %s", n->gpu, g->name[0] ? g->name : "?",
                                g->memory_total ? format_size(g->memory_total, mem, sizeof mem) : "?",
                                g->bus_id[0] ? g->bus_id : "?");
                        if (g->state != TOPO_GPU_OK)
                                fprintf(f, "  [%s]", state_name(g->state));
                        fputc('\n', f);
                        return;
                }
                case TOPO_TREE_NUMA: {
                        const char *cpus = group_cpus(t, tr, k);
                        fputs("NUMA node", f);
                        if (n->numa_node >= 0)
                                fprintf(f, " %d", n->numa_node);
                        if (cpus)
                                fprintf(f, " (CPUs %s)", cpus);
                        fputc('\n', f);
                        return;
                }
                default: fprintf(f, "%s\n", topo_tree_kind_name(n->kind));
        }
}

void print_tree(FILE *f, const struct topo *t) {
        struct topo_tree *tr = malloc(sizeof *tr);
        if (!tr)
                return;
        topo_tree_build(t, tr);
        for (unsigned k = 0; k < tr->n_nodes; k++) {
                const struct topo_tree_node *n = &tr->nodes[k];
                /* prefix: for each ancestor depth, "│   " if that ancestor has a later sibling */
                for (unsigned d = 1; d < n->depth; d++) {
                        /* find the ancestor at depth d */
                        int a = (int)k;
                        while (a >= 0 && tr->nodes[a].depth > d)
                                a = tr->nodes[a].parent;
                        bool more = false;
                        for (unsigned m = k + 1; m < tr->n_nodes && tr->nodes[m].depth >= d; m++)
                                if (tr->nodes[m].depth == d && tr->nodes[m].parent == tr->nodes[a].parent) {
                                        more = true;
                                        break;
                                }
                        fputs(more ? "│   " : "    ", f);
                }
                if (n->depth > 0) {
                        bool last = true;
                        for (unsigned m = k + 1; m < tr->n_nodes && tr->nodes[m].depth >= n->depth; m++)
                                if (tr->nodes[m].depth == n->depth && tr->nodes[m].parent == n->parent) {
                                        last = false;
                                        break;
                                }
                        fputs(last ? "└── " : "├── ", f);
                }
                tree_label(f, t, tr, k);
        }
        free(tr);
}

void print_gpus(FILE *f, const struct topo *t) {
        char mem[32], used[32], cuda[16];
        fprintf(f, "driver %s, CUDA %s\n", t->driver_version[0] ? t->driver_version : "unknown",
                cuda_str(t->cuda_version, cuda, sizeof cuda));
        fprintf(f, "%-4s %-22s %-10s %-10s %-17s %-4s %-16s %-5s %-4s %-13s %s\n", "GPU", "NAME", "MEMORY", "USED",
                "BUS ID", "NUMA", "CPUS", "MINOR", "MIG", "STATE", "UUID");
        for (unsigned i = 0; i < t->n_gpus; i++) {
                const struct topo_gpu *g = &t->gpu[i];
                char numa[8], minor[8];
                snprintf(numa, sizeof numa, "%d", g->numa_node);
                snprintf(minor, sizeof minor, "%d", g->minor);
                fprintf(f, "%-4u %-22s %-10s %-10s %-17s %-4s %-16s %-5s %-4s %-13s %s\n", i,
                        g->name[0] ? g->name : "?",
                        g->memory_total ? format_size(g->memory_total, mem, sizeof mem) : "?",
                        g->memory_total ? format_size(g->memory_used, used, sizeof used) : "?",
                        g->bus_id[0] ? g->bus_id : "?", g->numa_node >= 0 ? numa : "?",
                        g->cpu_affinity[0] ? g->cpu_affinity : "?", g->minor >= 0 ? minor : "?",
                        g->mig_mode < 0 ? "n/a"
                        : g->mig_mode   ? "on"
                                        : "off",
                        state_name(g->state), g->uuid[0] ? g->uuid : "?");
                if (g->state != TOPO_GPU_OK && g->state_text[0])
                        fprintf(f, "     %s\n", g->state_text);
        }
}

json_t *json_link(struct topo_link l) {
        char b[8];
        return json_string(topo_link_name(l, b));
}

static json_t *json_tree(const struct topo *t, const struct topo_tree *tr, unsigned k) {
        const struct topo_tree_node *n = &tr->nodes[k];
        if (n->kind == TOPO_TREE_GPU)
                return json_pack("{s:s, s:i}", "kind", "gpu", "gpu", n->gpu);
        json_t *children = json_array();
        for (unsigned m = k + 1; m < tr->n_nodes && tr->nodes[m].depth > n->depth; m++)
                if (tr->nodes[m].parent == (int)k)
                        json_array_append_new(children, json_tree(t, tr, m));
        json_t *o = json_pack("{s:s, s:o}", "kind", topo_tree_kind_name(n->kind), "children", children);
        if (n->kind == TOPO_TREE_NUMA && n->numa_node >= 0)
                json_object_set_new(o, "numa_node", json_integer(n->numa_node));
        return o;
}

json_t *json_topo(const struct topo *t) {
        char cuda[16];
        json_t *gpus = json_array(), *links = json_array(), *nics = json_array();
        for (unsigned i = 0; i < t->n_gpus; i++) {
                const struct topo_gpu *g = &t->gpu[i];
                json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:s, s:i}", "index", g->index,
                                      "state", state_name(g->state), "uuid", g->uuid, "name", g->name, "bus_id",
                                      g->bus_id, "memory_total_bytes", (json_int_t)g->memory_total, "memory_used_bytes",
                                      (json_int_t)g->memory_used, "minor", g->minor, "numa_node", g->numa_node,
                                      "cpu_affinity", g->cpu_affinity, "mig_mode", g->mig_mode);
                if (g->state_text[0])
                        json_object_set_new(o, "state_text", json_string(g->state_text));
                if (g->brand[0]) /* as NVIDIA_REQUIRE_* brand= terms name it */
                        json_object_set_new(o, "brand", json_string(g->brand));
                json_array_append_new(gpus, o);
                json_t *row = json_array();
                for (unsigned j = 0; j < t->n_gpus; j++)
                        json_array_append_new(row, json_link(t->link[i][j]));
                json_array_append_new(links, row);
        }
        for (unsigned k = 0; k < t->n_nics; k++) {
                json_t *row = json_array();
                for (unsigned j = 0; j < t->n_gpus; j++)
                        json_array_append_new(row, json_string(topo_level_name((enum topo_level)t->nic[k].level[j])));
                json_array_append_new(nics, json_pack("{s:s, s:o}", "name", t->nic[k].name, "links", row));
        }
        struct topo_tree *tr = malloc(sizeof *tr);
        json_t *tree = json_null();
        if (tr) {
                topo_tree_build(t, tr);
                json_decref(tree);
                tree = json_tree(t, tr, 0);
                free(tr);
        }
        return json_pack("{s:s, s:s, s:b, s:o, s:o, s:o, s:o}", "driver_version", t->driver_version, "cuda_version",
                         cuda_str(t->cuda_version, cuda, sizeof cuda), "nvswitch", t->nvswitch, "gpus", gpus, "links",
                         links, "nics", nics, "tree", tree);
}

int json_print_text(FILE *f, const char *text, size_t len) {
        /* jansson's JSON_INDENT(2) layout, streamed: no tree of the document is built (inspect's is MBs); the
         * text between two structural characters goes out in one fwrite */
        static const char spaces[] = "                                                                ";
        unsigned depth = 0;
        bool in_str = false;
        size_t run = 0;
        for (size_t i = 0; i < len; i++) {
                char c = text[i];
                if (in_str) {
                        if (c == '\\')
                                i++;
                        else if (c == '"')
                                in_str = false;
                        continue;
                }
                if (c == '"') {
                        in_str = true;
                        continue;
                }
                if (c != '{' && c != '[' && c != '}' && c != ']' && c != ',' && c != ':')
                        continue;
                fwrite(text + run, 1, i - run, f);
                run = i + 1;
                if ((c == '{' || c == '[') && i + 1 < len && (text[i + 1] == '}' || text[i + 1] == ']')) {
                        fwrite(text + i, 1, 2, f); /* {} and [] stay on the line */
                        run = ++i + 1;
                        continue;
                }
                if (c == ':') {
                        fwrite(": ", 1, 2, f);
                        continue;
                }
                bool close = c == '}' || c == ']';
                if (close)
                        depth -= depth > 0;
                else
                        putc(c, f); /* an opening bracket or a comma ends the line */
                if (c == '{' || c == '[')
                        depth++;
                putc('\n', f);
                for (size_t n = 2 * (size_t)depth; n > 0;) {
                        size_t k = MIN(n, sizeof spaces - 1);
                        fwrite(spaces, 1, k, f);
                        n -= k;
                }
                if (close)
                        putc(c, f); /* a closing bracket starts one */
        }
        fwrite(text + run, 1, len - run, f);
        putc('\n', f);
        return ferror(f) ? -EIO : 0;
}

int json_print(FILE *f, json_t *j) {
        if (!j)
                return -ENOMEM;
        int r = json_dumpf(j, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(j);
        fputc('\n', f);
        return r < 0 ? -EIO : 0;
}
