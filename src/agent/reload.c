/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reload — the configuration as the plugin sees it (plugin options), and SIGHUP: build the config
 * again and apply what may change at run time (log level, device list strategy, policy, Xid
 * ignore list, quiet period, the PodResources socket); the rest changes only on restart (logged).
 * Must never: apply a config that failed to build (the old one stays).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/node-internal.h"
#include "agent/podres.h"
#include "cdi/cdi.h"
#include "util/limits-dir.h"
#include "util/log.h"
#include "util/util.h"

void plugin_options_from_config(const struct gpuslice_config *cfg, struct plugin_options *o) {
        memset(o, 0, sizeof *o);
        strscpy(o->resource, config_whole_gpu_resource(cfg), sizeof o->resource);
        o->ids_by_index = cfg->device_id_strategy == CONFIG_DEVICE_ID_INDEX;
        o->list_envvar = cfg->device_list_strategy & CONFIG_DEVICE_LIST_ENVVAR;
        o->list_cdi = cfg->device_list_strategy & CONFIG_DEVICE_LIST_CDI;
        snprintf(o->cdi_kind, sizeof o->cdi_kind, "%s/%s", cfg->cdi_vendor, cfg->cdi_class);
        strscpy(o->dev_root, cfg->dev_root, sizeof o->dev_root);
        const struct config_profile_info *pi = config_profile_info(cfg->profile);
        if (pi && pi->core_resource)
                strscpy(o->core_resource, pi->core_resource, sizeof o->core_resource);
        if (pi && pi->memory_resource)
                strscpy(o->memory_resource, pi->memory_resource, sizeof o->memory_resource);
        o->memory_unit = o->memory_resource[0] ? config_memory_unit(cfg) : 0;
        o->spread = cfg->alloc_policy == CONFIG_POLICY_SPREAD;
        o->pack = cfg->alloc_policy == CONFIG_POLICY_FGD    ? CLUSTER_POLICY_FGD
                  : cfg->alloc_policy == CONFIG_POLICY_FRAG ? CLUSTER_POLICY_FRAG
                                                            : CLUSTER_POLICY_BINPACK;
        o->limit_when_alone = cfg->limit_when_alone;
        strscpy(o->interposer, cfg->interposer_library, sizeof o->interposer);
        if ((size_t)snprintf(o->limits_root, sizeof o->limits_root, "%.4080s/containers", cfg->state_dir) >=
            sizeof o->limits_root)
                o->limits_root[0] = 0; /* refused at Allocate: the state dir path is too long */
        strscpy(o->journal_dir, cfg->state_dir, sizeof o->journal_dir);
}

void node_nvml_libs(const struct gpuslice_config *cfg, const struct topo *t, struct plugin_options *o) {
        static char said[128] = "-"; /* the last reason logged ("" none): once, not at every reload */
        char why[128] = "";
        o->nvml_standin[0] = o->nvml_real[0] = 0;
        if (!o->core_resource[0] && !o->memory_resource[0])
                return;
        struct node_cdi_paths p;
        node_cdi_paths(cfg, &p);
        struct cdi_roots roots = { .dev_root = p.dev_root, .driver_root = p.driver_root };
        struct cdi_spec_options so = { .kind = o->cdi_kind, .host_driver_root = p.host_driver_root };
        struct cdi_discovery d;
        struct gs_error err = { 0 };
        if (limits_dir_standin_path(o->interposer, o->nvml_standin, sizeof o->nvml_standin) < 0 ||
            access(o->nvml_standin, R_OK) < 0)
                snprintf(why, sizeof why, "the NVML stand-in %s is missing", LIMITS_DIR_NVML_NAME);
        else if (cdi_discover(t, &roots, CDI_CAP_UTILITY, &d, &err) < 0)
                snprintf(why, sizeof why, "the driver's NVML is not found: %.90s", err.message);
        else {
                if (cdi_real_nvml(&d, &roots, &so, o->nvml_real, sizeof o->nvml_real) < 0) {
                        o->nvml_real[0] = 0;
                        snprintf(why, sizeof why, "the driver's libnvidia-ml.so.%.40s is not found", t->driver_version);
                }
                cdi_discovery_done(&d);
        }
        if (why[0])
                o->nvml_standin[0] = o->nvml_real[0] = 0;
        if (why[0] && !streq(why, said))
                log_warn("limited containers get no NVML stand-in: pynvml there reads the whole GPU",
                         "reason=\"%s\" interposer=%s driver_root=%s", why, o->interposer, p.driver_root);
        else if (!why[0] && !streq(why, said))
                log_info("NVML stand-in for limited containers", "standin=%s nvml=%s", o->nvml_standin, o->nvml_real);
        strscpy(said, why, sizeof said);
}

void node_cdi_paths(const struct gpuslice_config *cfg, struct node_cdi_paths *ret) {
        *ret = (struct node_cdi_paths){ .dev_root = cfg->dev_root,
                                        .driver_root = cfg->driver_root,
                                        .host_dev_root = cfg->host_dev_root,
                                        .host_driver_root = cfg->host_driver_root };
        if (cfg->hook_path[0]) {
                strscpy(ret->hook, cfg->hook_path, sizeof ret->hook);
                return;
        }
        ssize_t len = readlink("/proc/self/exe", ret->hook, sizeof ret->hook - 1); /* the agent runs on the host */
        ret->hook[len > 0 ? len : 0] = '\0';
}

/* The CDI spec defining the names Allocate hands out (src/cdi, docs/runtime.md): at start and
 * after a reload (the kind or id strategy may have changed). */
void cdi_refresh(struct node *n, const struct plugin_options *o) {
        char path[1024];
        struct gs_error err;
        if (!o->list_cdi)
                return;
        struct node_cdi_paths p;
        node_cdi_paths(&n->cfg, &p);
        struct cdi_generate g = {
                .roots = { .dev_root = p.dev_root, .driver_root = p.driver_root },
                .spec = { .kind = o->cdi_kind,
                          .host_dev_root = p.host_dev_root,
                          .host_driver_root = p.host_driver_root,
                          .hook_path = p.hook,
                          .interposer = o->core_resource[0] || o->memory_resource[0] ? o->interposer : NULL,
                          .nvml_standin = o->nvml_standin[0] ? o->nvml_standin : NULL },
                .mig = n->mig,
        };
        int r = cdi_agent_refresh(devices_topo(n->devices), &g, path, sizeof path, &err);
        if (r < 0)
                log_warn("cannot write the CDI spec: engines will not know the CDI names", "error=\"%s\"", err.message);
        else if (r == 0)
                log_info("CDI spec written", "path=%s driver_root=%s host_driver_root=%s host_dev_root=%s hook=%s",
                         path, p.driver_root, p.host_driver_root[0] ? p.host_driver_root : p.driver_root,
                         p.host_dev_root[0] ? p.host_dev_root : p.dev_root, p.hook[0] ? p.hook : "none");
        if (!o->list_envvar)
                log_warn("device list strategy is cdi only: kubelets before 1.28 drop cdi_devices silently");
}

static void apply_runtime_config(struct node *n) {
        log_set_level((enum log_level)n->cfg.log_level);
        struct plugin_options o;
        plugin_options_from_config(&n->cfg, &o);
        node_nvml_libs(&n->cfg, devices_topo(n->devices), &o);
        /* Resource names, units and the limits root are fixed for the plugin's life: kept. */
        plugin_set_options(n->plugin, &o);
        devices_lock(n->devices);
        o = *plugin_options(n->plugin);
        devices_unlock(n->devices);
        cdi_refresh(n, &o);
        if (n->health.running)
                health_set_options(&n->health, n->cfg.xid_ignore, n->cfg.n_xid_ignore,
                                   n->cfg.health_quiet_period_sec * 1000);
}

void node_reload(struct node *n) {
        struct gpuslice_config c;
        struct gs_error err;
        int r = config_build(&n->args, CONFIG_DEFAULT_PATH, &c, &err);
        if (r < 0) {
                log_error_errno(r, "config reload failed, keeping the old config", "error=\"%s\"", err.message);
                return;
        }
        if (node_nvidia_reload(n, &c) < 0) /* NVIDIA's plugin config over it again (nvidia.c) */
                return;
        if (!streq(c.plugin_dir, n->cfg.plugin_dir) || !streq(c.state_dir, n->cfg.state_dir) ||
            !streq(config_whole_gpu_resource(&c), config_whole_gpu_resource(&n->cfg)) ||
            c.health_disabled != n->cfg.health_disabled || c.profile != n->cfg.profile ||
            config_memory_unit(&c) != config_memory_unit(&n->cfg))
                log_warn("plugin dir, state dir, resource names, memory unit and health.disabled change only on "
                         "restart");
        strscpy(c.plugin_dir, n->cfg.plugin_dir, sizeof c.plugin_dir);
        strscpy(c.state_dir, n->cfg.state_dir, sizeof c.state_dir);
        strscpy(c.whole_gpu_resource, n->cfg.whole_gpu_resource, sizeof c.whole_gpu_resource);
        c.health_disabled = n->cfg.health_disabled;
        if (!streq(c.pod_resources_socket, n->cfg.pod_resources_socket))
                log_info("PodResources socket changed", "socket=%s", c.pod_resources_socket);
        podres_service_set_socket(n->podres, c.pod_resources_socket); /* every reader's next call follows */
        pthread_mutex_lock(&n->sync_lock);
        n->cfg = c;
        pthread_mutex_unlock(&n->sync_lock);
        apply_runtime_config(n);
        log_info("config reloaded", "quiet_period_s=%" PRIu64 " xid_ignored=%zu", c.health_quiet_period_sec,
                 c.n_xid_ignore);
}
