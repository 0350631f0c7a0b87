/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/slim — what an informer keeps of a node or a pod: only the fields gpuslice reads
 * (src/cluster/cluster.h, docs/cluster.md), so a cached pod costs a few hundred bytes whatever the API sent. Pure.
 */
#include <string.h>

#include "cluster/cluster.h"
#include "kube/kube.h"
#include "util/util.h"

static bool gpu_label(const char *k) {
        return startswith(k, "gpuslice.io/") || startswith(k, "nvidia.com/") || streq(k, "nvidia-gpu-name");
}

/* dst[key] = the entries of src[key] whose names pass keep; nothing when none. */
static bool copy_filtered(json_t *dst, const json_t *src, const char *key, bool (*keep)(const char *)) {
        json_t *in = json_object_get(src, key), *out = NULL;
        const char *k;
        json_t *v;
        json_object_foreach(in, k, v) {
                if (!json_is_string(v) || !keep(k))
                        continue;
                if (!out && !(out = json_object()))
                        return false;
                json_object_set(out, k, v);
        }
        if (out)
                json_object_set_new(dst, key, out);
        return out != NULL;
}

static void copy_str(json_t *dst, const json_t *src, const char *key) {
        json_t *v = json_object_get(src, key);
        if (json_is_string(v))
                json_object_set(dst, key, v);
}

static json_t *slim_meta(const json_t *obj, bool (*label)(const char *)) {
        json_t *m = json_object_get(obj, "metadata"), *out = json_object();
        if (!out)
                return NULL;
        copy_str(out, m, "name");
        copy_str(out, m, "namespace");
        copy_str(out, m, "uid");
        copy_str(out, m, "resourceVersion");
        if (label)
                copy_filtered(out, m, "labels", label);
        copy_filtered(out, m, "annotations", cluster_annotation_is_gpu);
        return out;
}

static bool cpu_mem(const char *k) {
        return streq(k, "cpu") || streq(k, "memory");
}

static bool gpu_cpu_mem(const char *k) {
        return cluster_resource_is_gpu(k) || cpu_mem(k);
}

json_t *kube_slim_node(json_t *obj) {
        json_t *out = json_object(), *meta = slim_meta(obj, gpu_label), *st = json_object();
        if (!out || !meta || !st) {
                json_decref(out);
                json_decref(meta);
                json_decref(st);
                return NULL;
        }
        json_object_set_new(out, "metadata", meta);
        json_t *status = json_object_get(obj, "status");
        copy_filtered(st, status, "capacity", cluster_resource_is_gpu);
        copy_filtered(st, status, "allocatable", gpu_cpu_mem); /* CPU and memory: the extender's packing */
        json_object_set_new(out, "status", st);
        return out;
}

static bool asks_gpu(const json_t *c) {
        const json_t *r = json_object_get(c, "resources");
        static const char *const keys[2] = { "limits", "requests" };
        for (unsigned k = 0; k < 2; k++) {
                const char *name;
                json_t *v;
                json_object_foreach(json_object_get(r, keys[k]), name,
                                    v) if (json_is_string(v) && cluster_resource_is_gpu(name)) return true;
        }
        return false;
}

/* spec[key]'s containers: name and the resources keep passes. *gpu: one asks for a GPU resource; *kept: some
 * resource was kept. false on ENOMEM. */
static bool slim_containers(json_t *sp, const json_t *spec, const char *key, bool (*keep)(const char *), bool *gpu,
                            bool *kept) {
        const json_t *in = json_object_get(spec, key);
        if (!json_array_size(in) && !streq(key, "containers"))
                return true;
        json_t *cs = json_array();
        if (!cs)
                return false;
        size_t i;
        json_t *c;
        json_array_foreach(in, i, c) {
                json_t *oc = json_object(), *res = json_object();
                if (!oc || !res || json_array_append_new(cs, oc) < 0) {
                        json_decref(res);
                        json_decref(cs);
                        return false;
                }
                copy_str(oc, c, "name");
                json_t *r = json_object_get(c, "resources");
                *kept |= copy_filtered(res, r, "limits", keep);
                *kept |= copy_filtered(res, r, "requests", keep);
                json_object_set_new(oc, "resources", res);
                *gpu |= asks_gpu(c);
        }
        json_object_set_new(sp, key, cs);
        return true;
}

/* One slimming for both (kube.h): cpu keeps the CPU and memory requests too, and a bound pod that asks for CPU or
 * memory but no GPU. */
static json_t *slim_pod(json_t *obj, bool cpu) {
        json_t *spec = json_object_get(obj, "spec"), *status = json_object_get(obj, "status");
        const char *phase = json_string_value(json_object_get(status, "phase"));
        if (phase && (streq(phase, "Succeeded") || streq(phase, "Failed")))
                return NULL; /* holds nothing any more */
        json_t *out = json_object(), *meta = slim_meta(obj, NULL), *sp = json_object();
        if (!out || !meta || !sp)
                goto fail;
        bool gpu = json_object_get(meta, "annotations") != NULL, kept = false;
        bool (*keep)(const char *) = cpu ? gpu_cpu_mem : cluster_resource_is_gpu;
        if (!slim_containers(sp, spec, "containers", keep, &gpu, &kept) ||
            (cpu && !slim_containers(sp, spec, "initContainers", keep, &gpu, &kept)))
                goto fail;
        if (cpu)
                kept |= copy_filtered(sp, spec, "overhead", cpu_mem);
        const char *node = json_string_value(json_object_get(spec, "nodeName"));
        if (!gpu && !(cpu && kept && node && node[0]))
                goto fail;
        copy_str(meta, json_object_get(obj, "metadata"), "creationTimestamp"); /* kubelet's admission order */
        json_object_set_new(out, "metadata", meta);
        copy_str(sp, spec, "nodeName");
        json_object_set_new(out, "spec", sp);
        json_t *st = json_object();
        if (st) {
                copy_str(st, status, "phase");
                json_object_set_new(out, "status", st);
        }
        return out;
fail:
        json_decref(out);
        json_decref(meta);
        json_decref(sp);
        return NULL;
}

json_t *kube_slim_pod(json_t *obj) {
        return slim_pod(obj, false);
}

json_t *kube_slim_pod_requests(json_t *obj) {
        return slim_pod(obj, true);
}
