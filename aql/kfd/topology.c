/* SPDX-License-Identifier: MIT */
/*
 * The KFD topology in sysfs (kfd_topology.c node_show, mem_show,
 * kfd_cache_show, iolink_show): nodes/N/{gpu_id, name, properties,
 * mem_banks/M/properties, caches/C/properties, io_links/L/properties}.
 * A properties file is "key value" lines; keys are matched by name, since
 * kernels add keys (num_xcc in 6.4, cwsr_size in 2025) and old ones lack
 * them: an unknown key is skipped, a missing one reads 0.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"
#include "util/error.h"

/* A node's properties file is about 1.5 KiB on current kernels. */
#define TEXT_MAX 8192
/* How often a scan is repeated while generation_id keeps changing. */
#define SCAN_TRIES 5

/* The value of key in "key value" lines; 0 when absent or not a number. */
static uint64_t value(const char *text, const char *key)
{
	size_t klen = strlen(key);

	for (const char *line = text; *line; ) {
		size_t len = strcspn(line, " \n");

		if (len == klen && line[len] == ' ' && !memcmp(line, key, klen))
			return strtoull(line + len + 1, NULL, 10);
		line += strcspn(line, "\n");
		if (*line)
			line++;
	}
	return 0;
}

#define GET(text, s, f) ((s)->f = (__typeof__((s)->f))value(text, #f))

static void parse_node(const char *t, struct kfd_node *n)
{
	GET(t, n, simd_count), GET(t, n, simd_per_cu), GET(t, n, array_count);
	GET(t, n, simd_arrays_per_engine), GET(t, n, cu_per_simd_array);
	GET(t, n, max_waves_per_simd), GET(t, n, lds_size_in_kb), GET(t, n, wave_front_size);
	GET(t, n, max_slots_scratch_cu), GET(t, n, gfx_target_version), GET(t, n, vendor_id);
	GET(t, n, device_id), GET(t, n, location_id), GET(t, n, domain);
	GET(t, n, drm_render_minor), GET(t, n, num_xcc), GET(t, n, max_engine_clk_fcompute);
	GET(t, n, fw_version), GET(t, n, sdma_fw_version), GET(t, n, capability);
	GET(t, n, num_sdma_engines), GET(t, n, num_cp_queues), GET(t, n, local_mem_size);
	GET(t, n, cwsr_size), GET(t, n, ctl_stack_size);
}

struct ids {
	uint32_t *v;
	uint32_t count, cap;
};

static int push(struct ids *ids, uint32_t v)
{
	if (ids->count == ids->cap) {
		uint32_t cap = ids->cap ? ids->cap * 2 : 16;
		uint32_t *p = realloc(ids->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		ids->v = p;
		ids->cap = cap;
	}
	ids->v[ids->count++] = v;
	return 0;
}

/* Numbered entries only: nodes/ and mem_banks/ hold nothing else today. */
static int collect(const char *name, void *user)
{
	char *end;
	unsigned long v = strtoul(name, &end, 10);

	if (end == name || *end || v > UINT32_MAX)
		return 0;
	return push(user, (uint32_t)v);
}

static int by_value(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

struct scan {
	const struct aql_kfd_sys *sys;
	const char *root;
	int err;			/* the last read's -errno, 0 when it worked */
	char path[512];
	char text[TEXT_MAX];
};

static aql_status read_text(struct scan *s, int *missing, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Read root/<fmt> into s->text; *missing (if given) says -ENOENT. */
static aql_status read_text(struct scan *s, int *missing, const char *fmt, ...)
{
	int n = snprintf(s->path, sizeof(s->path), "%s/", s->root);
	va_list ap;
	long r;

	va_start(ap, fmt);
	vsnprintf(s->path + n, sizeof(s->path) - (size_t)n, fmt, ap);
	va_end(ap);
	r = s->sys->read_file(s->path, s->text, sizeof(s->text));
	s->err = r < 0 ? (int)r : 0;
	if (missing)
		*missing = r == -ENOENT;
	if (r < 0) {
		s->text[0] = '\0';
		return aql_fail_errno(r == -ENOENT ? AQL_ERR_NOT_FOUND : AQL_ERR_SYSTEM, (int)-r,
				      "KFD topology: reading %s", s->path);
	}
	return AQL_OK;
}

/* The numbered entries of root/nodes/<node>/<sub>, sorted; none if absent. */
static aql_status list(struct scan *s, const char *sub, struct ids *ids)
{
	int r;

	ids->count = 0;
	snprintf(s->path, sizeof(s->path), "%s/%s", s->root, sub);
	r = s->sys->list_dir(s->path, collect, ids);
	if (r == -ENOENT)
		return AQL_OK;
	if (r == -ENOMEM)
		return aql_fail(AQL_ERR_NOMEM, "KFD topology: no memory to list %s", s->path);
	if (r < 0)
		return aql_fail_errno(AQL_ERR_SYSTEM, -r, "KFD topology: listing %s", s->path);
	qsort(ids->v, ids->count, sizeof(*ids->v), by_value);
	return AQL_OK;
}

static aql_status read_banks(struct scan *s, struct kfd_node *n, struct ids *ids)
{
	char sub[64];
	aql_status st;

	snprintf(sub, sizeof(sub), "nodes/%u/mem_banks", n->node_id);
	if ((st = list(s, sub, ids)) != AQL_OK)
		return st;
	for (uint32_t i = 0; i < ids->count; i++) {
		uint64_t heap, size, clk;

		st = read_text(s, NULL, "nodes/%u/mem_banks/%u/properties", n->node_id, ids->v[i]);
		if (st != AQL_OK)
			return st;
		heap = value(s->text, "heap_type");
		size = value(s->text, "size_in_bytes");
		clk = value(s->text, "mem_clk_max");
		if (heap != HSA_MEM_HEAP_TYPE_FB_PUBLIC && heap != HSA_MEM_HEAP_TYPE_FB_PRIVATE)
			continue;
		n->vram_size += size;
		n->vram_public |= heap == HSA_MEM_HEAP_TYPE_FB_PUBLIC;
		if (clk > n->mem_clk_max)
			n->mem_clk_max = (uint32_t)clk;
	}
	return AQL_OK;
}

static aql_status read_caches(struct scan *s, struct kfd_node *n, struct ids *ids)
{
	char sub[64];
	aql_status st;

	snprintf(sub, sizeof(sub), "nodes/%u/caches", n->node_id);
	if ((st = list(s, sub, ids)) != AQL_OK)
		return st;
	for (uint32_t i = 0; i < ids->count; i++) {
		uint64_t level;

		st = read_text(s, NULL, "nodes/%u/caches/%u/properties", n->node_id, ids->v[i]);
		if (st != AQL_OK)
			return st;
		level = value(s->text, "level");
		if (level >= 1 && level <= KFD_CACHE_LEVELS && !n->cache_kb[level - 1])
			n->cache_kb[level - 1] = (uint32_t)value(s->text, "size");
	}
	return AQL_OK;
}

/* The first io_link's far end; mapped to a CPU node once all are known. */
static aql_status read_links(struct scan *s, struct kfd_node *n, struct ids *ids)
{
	char sub[64];
	aql_status st;

	n->cpu_node = -1;
	snprintf(sub, sizeof(sub), "nodes/%u/io_links", n->node_id);
	if ((st = list(s, sub, ids)) != AQL_OK)
		return st;
	n->io_links = ids->count;
	if (!ids->count)
		return AQL_OK;
	st = read_text(s, NULL, "nodes/%u/io_links/%u/properties", n->node_id, ids->v[0]);
	if (st != AQL_OK)
		return st;
	n->cpu_node = (int32_t)value(s->text, "node_to");
	return AQL_OK;
}

void kfd_node_unusable(struct kfd_node *n, aql_status st, const char *fmt, ...)
{
	int len = n->gpu_id ? snprintf(n->reason, sizeof(n->reason), "KFD node %u (gpu_id %u): ",
				       n->node_id, n->gpu_id) :
			      snprintf(n->reason, sizeof(n->reason), "KFD node %u: ", n->node_id);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(n->reason + len, sizeof(n->reason) - (size_t)len, fmt, ap);
	va_end(ap);
	n->usable = st;
}

/*
 * gfx_target_version is major * 10000 + minor * 100 + stepping, each the
 * value of one digit of the processor's name (kfd_topology.c): 90010 is
 * gfx90a, 90402 gfx942, 110000 gfx1100.
 */
static void derive(struct kfd_node *n)
{
	uint32_t v = n->gfx_target_version, major = v / 10000, minor = v / 100 % 100,
		 step = v % 100;
	uint32_t doorbell = (n->capability & HSA_CAP_DOORBELL_TYPE_TOTALBITS_MASK) >>
			    HSA_CAP_DOORBELL_TYPE_TOTALBITS_SHIFT;

	n->cus = n->simd_per_cu ? n->simd_count / n->simd_per_cu : 0;
	n->ses = n->simd_arrays_per_engine ? n->array_count / n->simd_arrays_per_engine : 0;
	n->waves_per_cu = n->max_waves_per_simd * n->simd_per_cu;
	n->xccs = n->num_xcc ? n->num_xcc : 1;
	n->usable = AQL_OK;
	if (!major || minor > 15 || step > 15) {
		snprintf(n->gfx, sizeof(n->gfx), "unknown");
		kfd_node_unusable(n, AQL_ERR_UNSUPPORTED,
			 "gfx_target_version %u names no gfx processor", v);
		return;
	}
	snprintf(n->gfx, sizeof(n->gfx), "gfx%u%x%x", major, minor, step);
	if (aql_target_parse(n->gfx, &n->target) != AQL_OK) {
		kfd_node_unusable(n, AQL_ERR_UNSUPPORTED, "%s is a processor aql does not know", n->gfx);
		return;
	}
	if (n->target.sramecc != AQL_FEATURE_UNSUPPORTED)
		n->target.sramecc = n->capability & HSA_CAP_SRAM_EDCSUPPORTED ? AQL_FEATURE_ON :
									     AQL_FEATURE_OFF;
	aql_target_format(&n->target, n->target_id, sizeof(n->target_id));
	/* gfx7/8 ring 32-bit doorbells on double-mapped rings: not aql's. */
	if (doorbell != HSA_CAP_DOORBELL_TYPE_2_0 || !aql_target_dispatchable(&n->target))
		kfd_node_unusable(n, AQL_ERR_UNSUPPORTED,
			 "%s has doorbell type %u, and aql needs the 64-bit AQL doorbells "
			 "(type 2) of gfx9 and later", n->gfx, doorbell);
	else if (!n->cus || !n->wave_front_size || !n->lds_size_in_kb)
		kfd_node_unusable(n, AQL_ERR_DEVICE,
			 "%s reports %u compute units, wavefront size %u and %u KiB of LDS",
			 n->gfx, n->cus, n->wave_front_size, n->lds_size_in_kb);
	else if (!n->drm_render_minor)
		kfd_node_unusable(n, AQL_ERR_DEVICE, "%s has no drm_render_minor: no render node to open",
			 n->gfx);
}

static aql_status read_generation(struct scan *s, uint32_t *gen)
{
	int missing;
	aql_status st = read_text(s, &missing, "generation_id");

	if (st != AQL_OK && missing)
		return aql_fail(AQL_ERR_NOT_FOUND,
				"no KFD topology at %s: the amdgpu driver has not published one",
				s->root);
	*gen = (uint32_t)strtoul(s->text, NULL, 10);
	return st;
}

static aql_status read_gpu(struct scan *s, struct kfd_node *n, struct ids *ids)
{
	aql_status st;
	int missing;

	st = read_text(s, &missing, "nodes/%u/name", n->node_id);
	if (st == AQL_OK)
		snprintf(n->name, sizeof(n->name), "%.*s", (int)strcspn(s->text, "\n"), s->text);
	else if (!missing)
		return st;
	if ((st = read_text(s, NULL, "nodes/%u/properties", n->node_id)) != AQL_OK)
		return st;
	parse_node(s->text, n);
	if ((st = read_banks(s, n, ids)) != AQL_OK || (st = read_caches(s, n, ids)) != AQL_OK ||
	    (st = read_links(s, n, ids)) != AQL_OK)
		return st;
	if (!n->vram_size)
		n->vram_size = n->local_mem_size;
	derive(n);
	return AQL_OK;
}

/*
 * A GPU node whose files read -EPERM (or -EACCES): kfd_topology.c's show
 * functions refuse every file of a GPU the device cgroup denies the
 * process (kfd_devcgroup_check_permission), as in a container given other
 * GPUs. Kept with its reason, as libhsakmt's topology.c skips it
 * (topology_sysfs_check_node_supported). Whether it is denied.
 */
static int denied(struct scan *s, struct kfd_node *n)
{
	if (s->err != -EPERM && s->err != -EACCES)
		return 0;
	*n = (struct kfd_node){ .node_id = n->node_id, .gpu_id = n->gpu_id, .cpu_node = -1 };
	snprintf(n->gfx, sizeof(n->gfx), "unknown");
	kfd_node_unusable(n, AQL_ERR_SYSTEM,
		 "%s: %s: the device cgroup denies this GPU to the process (a container "
		 "given other GPUs)", s->path, strerror(-s->err));
	return 1;
}

/* One pass over nodes/; out holds the GPU nodes. */
static aql_status scan_once(struct scan *s, struct kfd_topology *out)
{
	struct ids nodes = { 0 }, cpus = { 0 }, sub = { 0 };
	aql_status st;

	if ((st = read_generation(s, &out->generation)) != AQL_OK ||
	    (st = list(s, "nodes", &nodes)) != AQL_OK)
		goto out;
	out->nodes = calloc(nodes.count ? nodes.count : 1, sizeof(*out->nodes));
	if (!out->nodes) {
		st = aql_fail(AQL_ERR_NOMEM, "KFD topology: no memory for %u nodes", nodes.count);
		goto out;
	}
	for (uint32_t i = 0; i < nodes.count; i++) {
		struct kfd_node *n = &out->nodes[out->count];
		unsigned long long gpu_id;

		*n = (struct kfd_node){ .node_id = nodes.v[i] };
		st = read_text(s, NULL, "nodes/%u/gpu_id", nodes.v[i]);
		/* only a GPU's files are refused: a CPU node has no cgroup */
		if (st != AQL_OK && denied(s, n)) {
			st = AQL_OK;
			out->count++;
			continue;
		}
		if (st != AQL_OK)
			goto out;
		gpu_id = strtoull(s->text, NULL, 10);
		if (!gpu_id) {
			if (push(&cpus, nodes.v[i]) < 0) {
				st = aql_fail(AQL_ERR_NOMEM, "KFD topology: no memory");
				goto out;
			}
			continue;
		}
		n->gpu_id = (uint32_t)gpu_id;
		st = read_gpu(s, n, &sub);
		if (st != AQL_OK && denied(s, n))
			st = AQL_OK;
		if (st != AQL_OK)
			goto out;
		out->count++;
	}
	/* KFD makes one CPU node per NUMA node, in order (kfd_crat.c). */
	for (uint32_t i = 0; i < out->count; i++) {
		struct kfd_node *n = &out->nodes[i];
		int32_t to = n->cpu_node;

		n->cpu_node = -1;
		for (uint32_t c = 0; to >= 0 && c < cpus.count; c++)
			if (cpus.v[c] == (uint32_t)to)
				n->cpu_node = (int32_t)c;
	}
out:
	free(nodes.v);
	free(cpus.v);
	free(sub.v);
	return st;
}

aql_status kfd_topology_scan(const struct aql_kfd_sys *sys, const char *root,
			     struct kfd_topology *out)
{
	struct scan *s = malloc(sizeof(*s));
	aql_status st = AQL_OK;
	int tries = 0;

	*out = (struct kfd_topology){ 0 };
	if (!s)
		return aql_fail(AQL_ERR_NOMEM, "KFD topology: no memory to scan it");
	s->sys = sys;
	s->root = root;
	for (;;) {
		uint32_t gen = 0;
		aql_status again;

		st = scan_once(s, out);
		/* A GPU added or removed under the scan shows as a new
		 * generation_id (kfd_topology.c topology_generation++). */
		again = read_generation(s, &gen);
		if (again != AQL_OK) {
			if (st == AQL_OK)
				st = again;
			break;
		}
		if (gen == out->generation) {
			if (st == AQL_OK && !out->count)
				st = aql_fail(AQL_ERR_NOT_FOUND,
					      "the KFD topology at %s lists no GPU: amdkfd found "
					      "no AMD GPU it supports", root);
			break;
		}
		kfd_topology_free(out);
		if (++tries == SCAN_TRIES) {
			st = aql_fail(AQL_ERR_DEVICE,
				      "the KFD topology at %s changed under %d scans in a row",
				      root, SCAN_TRIES);
			break;
		}
	}
	if (st != AQL_OK)
		kfd_topology_free(out);
	free(s);
	return st;
}

void kfd_topology_free(struct kfd_topology *topo)
{
	free(topo->nodes);
	*topo = (struct kfd_topology){ 0 };
}
