/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the topology model: parser (every reference file, pasted variants, malformed input),
 * link names and bandwidths, defaults, the tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>

#include "topo/topo.h"
#include "util/util.h"

static struct topo T;

static int parse_str(const char *s, struct gs_error *e) {
        return topo_parse(s, strlen(s), &T, e);
}

static void load_ref(const char *name) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", GPUSLICE_TOPO_DIR, name);
        _cleanup_(freep) char *buf = NULL;
        size_t len;
        assert_int_equal(read_file(path, 1 << 20, &buf, &len), 0);
        struct gs_error e = { 0 };
        int r = topo_parse(buf, len, &T, &e);
        if (r < 0)
                fail_msg("%s: %s", name, e.message);
}

static const char *L(unsigned a, unsigned b) {
        static char buf[8];
        return topo_link_name(T.link[a][b], buf);
}

static void test_every_reference_topology_parses(void **state) {
        (void)state;
        char dir[512];
        snprintf(dir, sizeof dir, "%s", GPUSLICE_TOPO_DIR);
        DIR *d = opendir(dir);
        assert_non_null(d);
        unsigned n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strstr(de->d_name, ".topo"))
                        continue;
                load_ref(de->d_name);
                assert_true(T.n_gpus >= 1);
                assert_int_equal(topo_validate(&T, NULL), 0);
                n++;
        }
        closedir(d);
        assert_true(n >= 5);
}

static void test_seed000_soc_is_sys(void **state) {
        (void)state;
        load_ref("seed000-8gpu-pcie-2socket.topo");
        assert_int_equal(T.n_gpus, 8);
        assert_string_equal(L(0, 1), "PIX");
        assert_string_equal(L(0, 2), "PHB");
        assert_string_equal(L(2, 7), "SYS");
        assert_string_equal(L(6, 7), "PIX");
        assert_string_equal(L(5, 5), "X");
        /* no affinity columns: NUMA nodes come from the SYS islands */
        assert_int_equal(T.gpu[0].numa_node, 0);
        assert_int_equal(T.gpu[3].numa_node, 0);
        assert_int_equal(T.gpu[4].numa_node, 1);
        assert_int_equal(T.gpu[7].numa_node, 1);
}

static void test_nic_and_cpu_columns(void **state) {
        (void)state;
        load_ref("pcie-8gpu-pix-phb-sys.topo");
        assert_int_equal(T.n_gpus, 8);
        assert_int_equal(T.n_nics, 1);
        assert_string_equal(T.nic[0].name, "mlx4_0");
        assert_int_equal(T.nic[0].level[0], TOPO_LEVEL_PHB);
        assert_int_equal(T.nic[0].level[7], TOPO_LEVEL_SYS);
        assert_string_equal(T.gpu[0].cpu_affinity, "0-9,20-29");
        assert_string_equal(T.gpu[5].cpu_affinity, "10-19,30-39");
        assert_int_equal(T.gpu[0].numa_node, 0);
        assert_int_equal(T.gpu[5].numa_node, 1);
}

static void test_tabs_legend_numa_column(void **state) {
        (void)state;
        load_ref("seed004-7gpu-p40-mlx4.topo");
        assert_int_equal(T.n_gpus, 7);
        assert_int_equal(T.n_nics, 1);
        assert_string_equal(L(0, 2), "PIX");
        assert_string_equal(L(2, 3), "PHB");
        assert_string_equal(L(3, 6), "PIX");
        for (unsigned i = 0; i < 7; i++)
                assert_int_equal(T.gpu[i].numa_node, 0);
}

static void test_nvlink_counts(void **state) {
        (void)state;
        load_ref("dgx1-v100-hybrid-cube-mesh.topo");
        assert_int_equal(T.link[0][3].nvlinks, 2);
        assert_int_equal(T.link[0][1].nvlinks, 1);
        assert_int_equal(T.link[0][5].nvlinks, 0);
        assert_int_equal(topo_link_bw(T.link[0][3]), 50);
        assert_int_equal(topo_link_bw(T.link[0][5]), 5);
        /* the PCIe path under an NVLink is estimated from the CPU side */
        assert_int_equal(T.link[0][4].pcie, TOPO_LEVEL_SYS);
        assert_int_equal(T.link[0][1].pcie, TOPO_LEVEL_NODE);
        load_ref("dgx-a100-nvswitch.topo");
        assert_int_equal(T.link[0][7].nvlinks, 12);
        assert_int_equal(topo_link_bw(T.link[0][7]), 300);
        assert_int_equal(T.gpu[0].numa_node, 3);
        assert_int_equal(T.gpu[6].numa_node, 5);
}

static void test_defaults_documented(void **state) {
        (void)state;
        load_ref("seed000-8gpu-pcie-2socket.topo");
        assert_string_equal(T.gpu[0].name, "Tesla P40");
        assert_int_equal(T.gpu[0].memory_total, 24ULL << 30);
        assert_int_equal(T.gpu[3].minor, 3);
        assert_true(startswith(T.gpu[0].uuid, "GPU-"));
        assert_int_equal(strlen(T.gpu[0].uuid), 40);
        for (unsigned i = 0; i < T.n_gpus; i++)
                for (unsigned j = i + 1; j < T.n_gpus; j++) {
                        assert_string_not_equal(T.gpu[i].uuid, T.gpu[j].uuid);
                        assert_string_not_equal(T.gpu[i].bus_id, T.gpu[j].bus_id);
                }
        assert_string_equal(T.driver_version, "550.54.15");
        assert_int_equal(T.cuda_version, 12040);
        /* stable: the same text gives the same UUIDs */
        char uuid[96];
        strscpy(uuid, T.gpu[5].uuid, sizeof uuid);
        load_ref("seed000-8gpu-pcie-2socket.topo");
        assert_string_equal(T.gpu[5].uuid, uuid);
}

static const char *const MINI = "  GPU0 GPU1\nGPU0 X PIX\nGPU1 PIX X\n";

static void test_directives(void **state) {
        (void)state;
        const char *s = "# a rich node\n"
                        "node driver=535.104.05 cuda=12.2\n"
                        "default name=\"NVIDIA A100-SXM4-40GB\" memory=40GiB sms=108 cc=8.0 power=400W\n"
                        "gpu 1 name=\"Tesla T4\" memory=15360MiB uuid=GPU-11111111-2222-3333-4444-555555555555 "
                        "bus=0000:3b:00.0 minor=7 numa=1 mig=on\n"
                        "nvswitch\n"
                        "\tGPU0\tGPU1\n"
                        "GPU0\tX\tNV12\n"
                        "GPU1\tNV12\tX\n";
        struct gs_error e;
        int r = parse_str(s, &e);
        if (r < 0)
                fail_msg("%s", e.message);
        assert_true(T.nvswitch);
        assert_string_equal(T.driver_version, "535.104.05");
        assert_int_equal(T.cuda_version, 12020);
        assert_string_equal(T.gpu[0].name, "NVIDIA A100-SXM4-40GB");
        assert_int_equal(T.gpu[0].memory_total, 40ULL << 30);
        assert_int_equal(T.gpu[0].sm_count, 108);
        assert_int_equal(T.gpu[0].cc_major, 8);
        assert_int_equal(T.gpu[0].power_limit_mw, 400000);
        assert_string_equal(T.gpu[1].name, "Tesla T4");
        assert_int_equal(T.gpu[1].memory_total, 15360ULL << 20);
        assert_string_equal(T.gpu[1].uuid, "GPU-11111111-2222-3333-4444-555555555555");
        assert_string_equal(T.gpu[1].bus_id, "00000000:3B:00.0");
        assert_int_equal(T.gpu[1].minor, 7);
        assert_int_equal(T.gpu[1].numa_node, 1);
        assert_int_equal(T.gpu[1].mig_mode, 1);
        assert_int_equal(T.gpu[1].sm_count, 108); /* from default */
        assert_int_equal(T.gpu[0].minor, 0);
}

static void test_defaults_avoid_explicit_values(void **state) {
        (void)state;
        struct gs_error e;
        assert_int_equal(parse_str("  GPU0 GPU1 GPU2\nGPU0 X PIX PIX\nGPU1 PIX X PIX\nGPU2 PIX PIX X\n"
                                   "gpu 0 minor=1 bus=00000000:1D:00.0\n",
                                   &e),
                         0);
        assert_int_equal(T.gpu[0].minor, 1);
        assert_int_not_equal(T.gpu[1].minor, 1);
        assert_int_not_equal(T.gpu[2].minor, 1);
        assert_int_not_equal(T.gpu[1].minor, T.gpu[2].minor);
        assert_string_not_equal(T.gpu[1].bus_id, "00000000:1D:00.0");
        assert_string_not_equal(T.gpu[1].bus_id, T.gpu[2].bus_id);
}

static void test_pasted_variants(void **state) {
        (void)state;
        struct gs_error e;
        /* header without leading blank, CRLF, trailing blanks, lowercase-free SOC, comments inside */
        assert_int_equal(
                parse_str("GPU0\tGPU1\tCPU Affinity\r\nGPU0\t X \tSOC\t0-3  \r\n# note\nGPU1\tSOC\tX\t4-7\r\n", &e), 0);
        assert_string_equal(L(0, 1), "SYS");
        assert_string_equal(T.gpu[1].cpu_affinity, "4-7");
        /* single GPU */
        assert_int_equal(parse_str("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-11\t0\n", &e), 0);
        assert_int_equal(T.n_gpus, 1);
        /* N/A affinities */
        assert_int_equal(parse_str("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
                                   "GPU0\tX\tNODE\tN/A\tN/A\tN/A\nGPU1\tNODE\tX\tN/A\tN/A\tN/A\n",
                                   &e),
                         0);
        assert_string_equal(L(0, 1), "NODE");
        /* the matrix gpuslice prints is read back: PXB, NV#, NIC without row */
        assert_int_equal(
                parse_str("  GPU0 GPU1 GPU2 NIC0\nGPU0 X PXB NV4 PIX\nGPU1 PXB X NV4 PHB\nGPU2 NV4 NV4 X SYS\n", &e),
                0);
        assert_string_equal(L(0, 1), "PXB");
        assert_string_equal(L(1, 2), "NV4");
        assert_int_equal(T.nic[0].level[1], TOPO_LEVEL_PHB);
}

struct bad_case {
        const char *text;
        const char *msg; /* a substring the message must contain */
        unsigned line;
};

static void test_malformed_rejected_with_reason(void **state) {
        (void)state;
        static const struct bad_case cases[] = {
                { "", "no topology matrix", 0 },
                { "# only a comment\n", "no topology matrix", 0 },
                { "hello world\n", "expected the matrix header", 1 },
                { "GPU0 X PIX\n", "row before the header", 1 },
                { "  GPU0 GPU2\nGPU0 X PIX\n", "expected GPU1", 1 },
                { "  GPU0 GPU1\nGPU0 X FOO\nGPU1 PIX X\n", "'FOO' in row GPU0 is not a link", 2 },
                { "  GPU0 GPU1\nGPU0 PIX PIX\nGPU1 PIX X\n", "expected X on the diagonal", 2 },
                { "  GPU0 GPU1\nGPU0 X X\nGPU1 PIX X\n", "X off the diagonal", 2 },
                { "  GPU0 GPU1\nGPU0 X PIX\nGPU1 PHB X\n", "not symmetric", 3 },
                { "  GPU0 GPU1\nGPU0 X PIX\n", "row GPU1 is missing", 0 },
                { "  GPU0 GPU1\nGPU0 X PIX\nGPU0 X PIX\n", "appears twice", 3 },
                { "  GPU0 GPU1\nGPU0 X\nGPU1 PIX X\n", "has 1 values, expected 2", 2 },
                { "  GPU0 GPU1\nGPU0 X PIX PIX\nGPU1 PIX X\n", "has 3 values", 2 },
                { "  GPU0 GPU1\nGPU0 X NV0\nGPU1 NV0 X\n", "not a link", 2 },
                { "  GPU0 GPU1\nGPU0 X NV999\nGPU1 NV999 X\n", "not a link", 2 },
                { "  GPU0 GPU1 CPU Affinity\nGPU0 X PIX zz\nGPU1 PIX X 0\n", "not a CPU list", 2 },
                { "  GPU0 GPU1\nGPU0 X PIX\nGPU3 PIX X\n", "not a column", 3 },
                { "  GPU0 GPU1 CPU Affinty\nGPU0 X PIX\nGPU1 PIX X\n", "unexpected header column 'CPU'", 1 },
                { "  GPU0 GPU1 mlx5_0\nGPU0 X PIX\nGPU1 PIX X\n", "row GPU0 has 2 values, expected 3", 2 },
                { "  GPU0\nGPU0 X\nLegend:\n\n  X = Self\nGPU1 X\n", "after the legend", 6 },
                { "  GPU0\x01 GPU1\n", "control byte", 1 },
                { "  GPU0\nGPU0 X\ngpu 3 name=x\n", "matrix has 1 GPUs", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 colour=red\n", "unknown GPU attribute 'colour'", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 memory=lots\n", "memory: expected a size", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 brand=Tesla\n", "brand: expected tesla", 3 },
                { "  GPU0\nGPU0 X\ndefault brand=\n", "brand: expected tesla", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 brand=tesla,geforce\n", "brand: expected tesla", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 uuid=nope\n", "uuid: expected GPU-", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 bus=zz\n", "bus: expected a PCI bus id", 3 },
                /* found in review: sscanf took signs and 0x, and device/function were not range-checked */
                { "  GPU0\nGPU0 X\ngpu 0 bus=-1:1A:00.0\n", "bus: expected a PCI bus id", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 bus=0x1:1A:00.0\n", "bus: expected a PCI bus id", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 bus=0:1A:ff.0\n", "bus: expected a PCI bus id", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 bus=0:1A:00.9\n", "bus: expected a PCI bus id", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 bus=10000:1A:00.0\n", "bus: expected a PCI bus id", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 cc=-1.0\n", "cc: expected a compute capability", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 cc=+8.0\n", "cc: expected a compute capability", 3 },
                { "  GPU0\nGPU0 X\nnode cuda=twelve\n", "cuda: expected a version", 3 },
                { "  GPU0\nGPU0 X\nnode flavour=1\n", "unknown node attribute", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 name=\"unterminated\n", "stray quote", 3 },
                { "  GPU0\nGPU0 X\ngpu 0 noequals\n", "expected key=value", 3 },
                { "  GPU0\nGPU0 X\nnvswitch yes\n", "nvswitch takes no arguments", 3 },
                { "  GPU0\nGPU0 X\ncuda context=big\n", "context: expected a size", 3 },
                { "  GPU0\nGPU0 X\ncuda ctx=1G\n", "unknown cuda attribute 'ctx'", 3 },
                { "  GPU0\nGPU0 X\ncuda context\n", "expected key=value", 3 },
                { "  GPU0\nGPU0 X\nunsupported\n", "name at least one query", 3 },
                { "  GPU0\nGPU0 X\nunsupported clocks\n", "unknown query 'clocks'", 3 },
                { "  GPU0 GPU1\nGPU0 X PIX\nGPU1 PIX X\ngpu 0 minor=1\ngpu 1 minor=1\n", "same minor number", 0 },
                { "  GPU0 GPU1\nGPU0 X PIX\nGPU1 PIX X\ngpu 0 bus=0:1:0.0\ngpu 1 bus=00000000:01:00.0\n", "same bus id",
                  0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct gs_error e = { 0 };
                int r = parse_str(cases[i].text, &e);
                if (r != -EINVAL)
                        fail_msg("case %zu: expected -EINVAL, got %d", i, r);
                if (!strstr(e.message, cases[i].msg))
                        fail_msg("case %zu: message '%s' lacks '%s'", i, e.message, cases[i].msg);
                unsigned line = 0; /* the line at fault starts the message: "line N: …" */
                if (sscanf(e.message, "line %u:", &line) != 1)
                        line = 0;
                if (line != cases[i].line || e.code != -EINVAL)
                        fail_msg("case %zu: line %u code %d, expected line %u (%s)", i, line, e.code, cases[i].line,
                                 e.message);
        }
}

/* The published per-model figures of what one CUDA context takes (docs/node-description.md, "What a context
 * costs") are in every node description the repository ships for those models, so the simulated driver charges
 * them and the limiter counts them by default. A node of a model with no published figure says nothing (0). */
static const struct {
        const char *model; /* a substring of the GPU's name */
        uint64_t bytes;
} context_figures[] = {
        { "A100", 416ULL << 20 }, /* HAMi #1662 */
        { "V100", 300000000ULL }, /* pytorch/pytorch#20532, the low end of 300-400 MB */
};

static unsigned check_node_dir(const char *rel) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", GPUSLICE_SOURCE_DIR, rel);
        DIR *d = opendir(dir);
        assert_non_null(d);
        unsigned n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strstr(de->d_name, ".topo") && !strstr(de->d_name, ".node"))
                        continue;
                char path[1024];
                snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
                _cleanup_(freep) char *buf = NULL;
                size_t len;
                assert_int_equal(read_file(path, 1 << 20, &buf, &len), 0);
                struct gs_error e = { 0 };
                if (topo_parse(buf, len, &T, &e) < 0)
                        fail_msg("%s: %s", path, e.message);
                /* a matrix without model directives is a pasted topology, its GPUs the defaults */
                if (!strstr(buf, "name=")) {
                        assert_int_equal(T.cuda_context_bytes, 0);
                        continue;
                }
                for (unsigned g = 0; g < T.n_gpus; g++) {
                        uint64_t want = 0;
                        for (size_t i = 0; i < ELEMENTSOF(context_figures); i++)
                                if (strstr(T.gpu[g].name, context_figures[i].model))
                                        want = context_figures[i].bytes;
                        if (T.gpu[g].context_bytes != want)
                                fail_msg("%s: GPU %u (%s): context %llu, the published figure for its model is %llu",
                                         path, g, T.gpu[g].name, (unsigned long long)T.gpu[g].context_bytes,
                                         (unsigned long long)want);
                }
                n++;
        }
        closedir(d);
        return n;
}

static void test_shipped_nodes_carry_context_figures(void **state) {
        (void)state;
        static const char *const dirs[] = { "sim/nodes",       "hwkit/nodes",    "tests/data/mig",
                                            "tests/data/kube", "tests/data/dra", "tests/data/topologies" };
        unsigned n = 0;
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                n += check_node_dir(dirs[i]);
        assert_true(n >= 10);
}

/* What the node's driver does (recorded by `gpuslice sim record`): a context's cost, unsupported queries. */
static void test_driver_directives(void **state) {
        (void)state;
        struct topo t;
        struct gs_error e;
        const char *text = "  GPU0\nGPU0 X\ncuda context=504MiB\nunsupported process-utilization\n";
        assert_int_equal(topo_parse(text, strlen(text), &t, &e), 0);
        assert_int_equal(t.cuda_context_bytes, 504ULL << 20);
        assert_int_equal(t.gpu[0].context_bytes, 504ULL << 20); /* every GPU's, unless its line says */
        assert_int_equal(t.unsupported, TOPO_UNSUPPORTED_PROCESS_UTIL);
        const char *mixed = "  GPU0 GPU1 GPU2\nGPU0 X SYS SYS\nGPU1 SYS X SYS\nGPU2 SYS SYS X\ncuda context=100MiB\n"
                            "default context=416MiB\ngpu 2 context=300MB\n";
        assert_int_equal(topo_parse(mixed, strlen(mixed), &t, &e), 0);
        assert_int_equal(t.gpu[0].context_bytes, 416ULL << 20);
        assert_int_equal(t.gpu[1].context_bytes, 416ULL << 20);
        assert_int_equal(t.gpu[2].context_bytes, 300000000ULL);
        const char *bad = "  GPU0\nGPU0 X\ngpu 0 context=lots\n";
        assert_int_equal(topo_parse(bad, strlen(bad), &t, &e), -EINVAL);
        assert_non_null(strstr(e.message, "context: expected a size"));
        const char *none = "  GPU0\nGPU0 X\n";
        assert_int_equal(topo_parse(none, strlen(none), &t, &e), 0);
        assert_int_equal(t.cuda_context_bytes, 0); /* unknown: the simulated driver takes nothing */
        assert_int_equal(t.cuda_teardown_ms, 0);   /* memory freed at exit */
        assert_int_equal(t.unsupported, 0);
        assert_int_equal(t.gpu[0].numa_node, 0); /* a default NUMA node */
        /* numa=none: NVML knew none (a VM), so no default either */
        const char *vm = "  GPU0 GPU1\nGPU0 X SYS\nGPU1 SYS X\ngpu 0 numa=none\n";
        assert_int_equal(topo_parse(vm, strlen(vm), &t, &e), 0);
        assert_int_equal(t.gpu[0].numa_node, -1);
        assert_true(t.gpu[1].numa_node >= 0);
        /* how long the driver keeps an exited process's memory while tearing it down */
        const char *td = "  GPU0\nGPU0 X\ncuda context=1MiB teardown-ms=1500\n";
        assert_int_equal(topo_parse(td, strlen(td), &t, &e), 0);
        assert_int_equal(t.cuda_teardown_ms, 1500);
        const char *bad_td = "  GPU0\nGPU0 X\ncuda teardown-ms=soon\n";
        assert_int_equal(topo_parse(bad_td, strlen(bad_td), &t, &e), -EINVAL);
        assert_non_null(strstr(e.message, "teardown-ms"));
}

/* brand: given per GPU, by `default`, or derived from the model name */
static void test_brand(void **state) {
        (void)state;
        struct topo t;
        struct gs_error e;
        const char *text = "  GPU0 GPU1 GPU2\nGPU0 X PIX PIX\nGPU1 PIX X PIX\nGPU2 PIX PIX X\n"
                           "default brand=nvidia\ngpu 0 brand=geforce\ngpu 2 name=\"NVIDIA GeForce RTX 3090\"\n";
        assert_int_equal(topo_parse(text, strlen(text), &t, &e), 0);
        assert_string_equal(t.gpu[0].brand, "geforce");
        assert_string_equal(t.gpu[1].brand, "nvidia");
        assert_string_equal(t.gpu[2].brand, "nvidia"); /* default wins over the name */
        const char *plain = "  GPU0 GPU1\nGPU0 X PIX\nGPU1 PIX X\ngpu 1 name=\"NVIDIA GeForce RTX 3090\"\n";
        assert_int_equal(topo_parse(plain, strlen(plain), &t, &e), 0);
        assert_string_equal(t.gpu[0].brand, "tesla"); /* Tesla P40, the default model */
        assert_string_equal(t.gpu[1].brand, "geforce");
        assert_int_equal(topo_parse_raw(plain, strlen(plain), &t, &e), 0);
        assert_string_equal(t.gpu[0].brand, ""); /* raw: unknown stays unknown */
}

static void test_too_many_gpus(void **state) {
        (void)state;
        char *s = malloc(1 << 16);
        size_t n = 0;
        n += (size_t)snprintf(s + n, 65536 - n, " ");
        for (unsigned i = 0; i < 65; i++)
                n += (size_t)snprintf(s + n, 65536 - n, " GPU%u", i);
        n += (size_t)snprintf(s + n, 65536 - n, "\n");
        struct gs_error e;
        assert_int_equal(topo_parse(s, n, &T, &e), -EINVAL);
        assert_non_null(strstr(e.message, "more than 64 GPUs"));
        free(s);
}

static void test_not_nul_terminated(void **state) {
        (void)state;
        /* the parser must stop at len: a valid matrix followed by junk outside len */
        char buf[64];
        const char *m = "  GPU0 GPU1\nGPU0 X PIX\nGPU1 PIX X\n";
        size_t len = strlen(m);
        memcpy(buf, m, len);
        memset(buf + len, 'Z', sizeof buf - len);
        struct gs_error e;
        assert_int_equal(topo_parse(buf, len, &T, &e), 0);
        assert_int_equal(T.n_gpus, 2);
}

static void test_link_names_round_trip(void **state) {
        (void)state;
        static const char *const names[] = { "X", "PIX", "PXB", "PHB", "NODE", "SYS", "NV1", "NV12", "NV255" };
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                struct topo_link l;
                char b[8];
                assert_int_equal(topo_link_from_name(names[i], strlen(names[i]), &l), 0);
                assert_string_equal(topo_link_name(l, b), names[i]);
        }
        struct topo_link l;
        assert_int_equal(topo_link_from_name("SOC", 3, &l), 0);
        assert_int_equal(l.pcie, TOPO_LEVEL_SYS);
        assert_int_equal(topo_link_from_name("NV", 2, &l), -EINVAL);
        assert_int_equal(topo_link_from_name("NV256", 5, &l), -EINVAL);
        assert_int_equal(topo_link_from_name("PIXX", 4, &l), -EINVAL);
}

static void test_bandwidth_order(void **state) {
        (void)state;
        struct topo_link sys = { TOPO_LEVEL_SYS, 0 }, node = { TOPO_LEVEL_NODE, 0 }, phb = { TOPO_LEVEL_PHB, 0 },
                         pxb = { TOPO_LEVEL_PXB, 0 }, pix = { TOPO_LEVEL_PIX, 0 }, nv1 = { TOPO_LEVEL_SYS, 1 },
                         nv2 = { TOPO_LEVEL_SYS, 2 };
        assert_int_equal(topo_link_bw(sys), 5);
        assert_int_equal(topo_link_bw(node), 7);
        assert_int_equal(topo_link_bw(phb), 8);
        assert_int_equal(topo_link_bw(pxb), 11);
        assert_int_equal(topo_link_bw(pix), 12);
        assert_int_equal(topo_link_bw(nv2), 50);
        assert_true(topo_link_cmp(sys, node) < 0);
        assert_true(topo_link_cmp(pix, nv1) < 0);
        assert_true(topo_link_cmp(nv2, nv1) > 0);
        assert_int_equal(topo_link_cmp(pxb, pxb), 0);
}

static void test_validate_catches_asymmetry(void **state) {
        (void)state;
        assert_int_equal(parse_str(MINI, NULL), 0);
        T.link[0][1].pcie = TOPO_LEVEL_SYS;
        struct gs_error e;
        assert_int_equal(topo_validate(&T, &e), -EINVAL);
        assert_non_null(strstr(e.message, "not symmetric"));
}

/* collect (kind, gpu) pairs of the tree in order */
static void tree_string(char *buf, size_t len) {
        struct topo_tree *tr = malloc(sizeof *tr);
        topo_tree_build(&T, tr);
        size_t n = 0;
        for (unsigned k = 0; k < tr->n_nodes && n < len; k++) {
                const struct topo_tree_node *nd = &tr->nodes[k];
                if (nd->kind == TOPO_TREE_GPU)
                        n += (size_t)snprintf(buf + n, len - n, "%u:g%d ", nd->depth, nd->gpu);
                else
                        n += (size_t)snprintf(buf + n, len - n, "%u:%s ", nd->depth, topo_tree_kind_name(nd->kind));
        }
        free(tr);
}

static void test_tree_two_sockets(void **state) {
        (void)state;
        char s[1024];
        load_ref("seed000-8gpu-pcie-2socket.topo");
        tree_string(s, sizeof s);
        assert_string_equal(s, "0:system 1:NUMA node 2:PCIe switch 3:g0 3:g1 2:PCIe switch 3:g2 3:g3 "
                               "1:NUMA node 2:PCIe switch 3:g4 3:g5 2:PCIe switch 3:g6 3:g7 ");
        load_ref("seed004-7gpu-p40-mlx4.topo");
        tree_string(s, sizeof s);
        assert_string_equal(s, "0:system 1:PCIe switch 2:g0 2:g1 2:g2 1:PCIe switch 2:g3 2:g4 2:g5 2:g6 ");
}

static void test_tree_pxb_and_singletons(void **state) {
        (void)state;
        char s[1024];
        struct gs_error e;
        /* GPU0-1 PIX, GPU2 under the same switch tree (PXB), GPU3 alone behind the host bridge */
        assert_int_equal(parse_str("  GPU0 GPU1 GPU2 GPU3\n"
                                   "GPU0 X PIX PXB PHB\nGPU1 PIX X PXB PHB\nGPU2 PXB PXB X PHB\nGPU3 PHB PHB PHB X\n",
                                   &e),
                         0);
        tree_string(s, sizeof s);
        assert_string_equal(s, "0:system 1:PCIe switches 2:PCIe switch 3:g0 3:g1 2:g2 1:g3 ");
        /* a NUMA group carries its node number */
        load_ref("dgx-a100-nvswitch.topo");
        struct topo_tree *tr = malloc(sizeof *tr);
        topo_tree_build(&T, tr);
        assert_int_equal(tr->nodes[1].kind, TOPO_TREE_NUMA);
        assert_int_equal(tr->nodes[1].numa_node, 3);
        free(tr);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_reference_topology_parses),
                cmocka_unit_test(test_seed000_soc_is_sys),
                cmocka_unit_test(test_nic_and_cpu_columns),
                cmocka_unit_test(test_tabs_legend_numa_column),
                cmocka_unit_test(test_nvlink_counts),
                cmocka_unit_test(test_defaults_documented),
                cmocka_unit_test(test_directives),
                cmocka_unit_test(test_defaults_avoid_explicit_values),
                cmocka_unit_test(test_pasted_variants),
                cmocka_unit_test(test_malformed_rejected_with_reason),
                cmocka_unit_test(test_driver_directives),
                cmocka_unit_test(test_shipped_nodes_carry_context_figures),
                cmocka_unit_test(test_brand),
                cmocka_unit_test(test_too_many_gpus),
                cmocka_unit_test(test_not_nul_terminated),
                cmocka_unit_test(test_link_names_round_trip),
                cmocka_unit_test(test_bandwidth_order),
                cmocka_unit_test(test_validate_catches_asymmetry),
                cmocka_unit_test(test_tree_two_sockets),
                cmocka_unit_test(test_tree_pxb_and_singletons),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
