/* SPDX-License-Identifier: MIT */
/*
 * aql-info: every agent this machine offers, in the manner of rocminfo
 * (all fields) or nvidia-smi -L (one line each, -L), or as one JSON
 * document (--json). For each kind of agent that cannot be offered it
 * prints why (aql_error_message()), so that "no GPU" is never silent.
 *
 * AMD agents also show what the KFD topology says of them (chip, PCI
 * address, shader engines, caches, firmware) and what libdrm does
 * (marketing name, clocks, memory heaps, more firmware), read through the
 * AMD agent's internal aql/kfd/kfd.h, which libaql.a keeps visible.
 *
 * Exit status: 0 when at least one agent was listed, 1 when none was,
 * 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>
#include "aql/kfd/kfd.h"

enum format { FMT_FULL, FMT_LIST, FMT_JSON };

/* Kinds that offer no agent, plus devices of a kind that failed to open. */
#define MAX_UNAVAILABLE 64

/* "AQL_ERR_NOT_FOUND" out of aql_status_str()'s "AQL_ERR_NOT_FOUND: ...". */
static const char *status_name(aql_status st, char *buf, size_t len)
{
	const char *s = aql_status_str(st);

	snprintf(buf, len, "%.*s", (int)strcspn(s, ":"), s);
	return buf;
}

static const char *signal_path_name(const aql_agent_info *in)
{
	switch (in->signal_path) {
	case AQL_SIGNAL_PATH_HOST: return "host";
	case AQL_SIGNAL_PATH_DEVICE:
		return in->kind == AQL_AGENT_AMD ? "device (command processor)" :
						   "device (stream memory operations)";
	case AQL_SIGNAL_PATH_HOST_CALLBACK: return "host callback (cuLaunchHostFunc)";
	default: return "unknown";
	}
}

/* CUDA encodes 13.0 as 13000 and 12.8 as 12080. */
static const char *driver_version(uint32_t v, char *buf, size_t len)
{
	if (!v)
		snprintf(buf, len, "none");
	else
		snprintf(buf, len, "%" PRIu32 ".%" PRIu32, v / 1000, v % 1000 / 10);
	return buf;
}

static const char *memory_size(uint64_t bytes, char *buf, size_t len)
{
	if (!bytes)
		snprintf(buf, len, "host memory");
	else
		snprintf(buf, len, "%" PRIu64 " MiB (%" PRIu64 " bytes)", bytes >> 20, bytes);
	return buf;
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c < 0x20 || c == 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* The topology node behind an AMD agent, or NULL. */
static const struct kfd_node *amd_node(const aql_agent_info *in, const struct kfd_process **p)
{
	if (in->kind != AQL_AGENT_AMD || kfd_process_get(p) != AQL_OK)
		return NULL;
	return kfd_agent_node(*p, in->device_index);
}

/* " (emulated by kfd-emu ...)" when the KFD is not the kernel's. */
static const char *emulated(const aql_agent_info *in, char *buf, size_t len)
{
	const struct kfd_process *p;

	buf[0] = '\0';
	if (amd_node(in, &p) && strcmp(p->sys->name, "linux"))
		snprintf(buf, len, " (emulated by %s)", p->sys->name);
	return buf;
}

/*
 * libdrm's view of n's GPU: 0 and *q, or the query's -errno with why
 * saying "libdrm: amdgpu_device_initialize: -EACCES (Permission denied)".
 */
static int amd_drm(const struct kfd_node *n, struct aql_kfd_gpu_query *q, char *why, size_t len)
{
	int r = kfd_gpu_query(n, q);
	const char *name = r ? strerrorname_np(-r) : NULL;

	if (r == -ENODATA)
		snprintf(why, len, "libdrm: not asked (no agent of the GPU opened)");
	else if (r)
		snprintf(why, len, "libdrm: %s: -%s (%s)", q->failed, name ? name : "?",
			 strerror(-r));
	return r;
}

static void print_mib(const char *what, int known, uint64_t bytes)
{
	if (known)
		printf("  %-28s %" PRIu64 " MiB\n", what, bytes >> 20);
	else
		printf("  %-28s unknown\n", what);
}

static void print_fw(const char *what, int known, uint32_t version)
{
	if (known)
		printf("  %-28s %" PRIu32 " (0x%08" PRIx32 ")\n", what, version, version);
	else
		printf("  %-28s unknown\n", what);
}

/* What libdrm adds to the topology, as rocminfo shows it; where the query
 * failed each field is unknown and the reason is printed once. */
static void print_amd_drm(const struct kfd_node *n)
{
	struct aql_kfd_gpu_query q;
	char why[160];
	int ok = amd_drm(n, &q, why, sizeof(why)) == 0;

	if (!ok) {
		printf("  %-28s unknown (%s)\n", "Marketing Name:", why);
		printf("  %-28s unknown\n", "ASIC revision:");
		printf("  %-28s unknown\n", "Max memory clock:");
	} else {
		printf("  %-28s %s\n", "Marketing Name:",
		       q.marketing_name[0] ? q.marketing_name : "(not in libdrm's amdgpu.ids)");
		printf("  %-28s %" PRIu32 " (family %" PRIu32 ", external 0x%02" PRIx32
		       ", PCI revision 0x%02" PRIx32 ")\n", "ASIC revision:", q.chip_rev,
		       q.family_id, q.chip_external_rev, q.pci_rev);
		printf("  %-28s %" PRIu32 " MHz\n", "Max memory clock:", q.max_memory_clock_mhz);
	}
	print_mib("VRAM:", ok, q.vram.total);
	print_mib("VRAM usable:", ok, q.vram.usable);
	print_mib("Host-visible VRAM size:", ok, q.visible_vram.total);
	print_mib("GTT:", ok, q.gtt.total);
	print_fw("Firmware, RLC:", ok, q.fw_rlc);
	print_fw("Firmware, SMC:", ok, q.fw_smc);
	print_fw("Firmware, SOS:", ok, q.fw_sos);
}

static void json_heap(const char *name, const struct aql_kfd_heap *h)
{
	printf("\"%s\":{\"total\":%" PRIu64 ",\"usable\":%" PRIu64 ",\"used\":%" PRIu64
	       ",\"max_allocation\":%" PRIu64 "}", name, h->total, h->usable, h->used,
	       h->max_allocation);
}

/* ,"drm":{...},"drm_error":null, or "drm":null and the reason. */
static void print_amd_drm_json(const struct kfd_node *n)
{
	struct aql_kfd_gpu_query q;
	char why[160];

	if (amd_drm(n, &q, why, sizeof(why))) {
		printf(",\"drm\":null,\"drm_error\":");
		json_string(why);
		return;
	}
	printf(",\"drm\":{\"marketing_name\":");
	json_string(q.marketing_name);
	printf(",\"asic_id\":%" PRIu32 ",\"chip_revision\":%" PRIu32
	       ",\"external_revision\":%" PRIu32 ",\"pci_revision\":%" PRIu32
	       ",\"family_id\":%" PRIu32 ",\"max_engine_clock_mhz\":%" PRIu32
	       ",\"max_memory_clock_mhz\":%" PRIu32 ",", q.asic_id, q.chip_rev,
	       q.chip_external_rev, q.pci_rev, q.family_id, q.max_engine_clock_mhz,
	       q.max_memory_clock_mhz);
	json_heap("vram", &q.vram);
	putchar(',');
	json_heap("visible_vram", &q.visible_vram);
	putchar(',');
	json_heap("gtt", &q.gtt);
	printf(",\"firmware\":{\"mec\":%" PRIu32 ",\"rlc\":%" PRIu32 ",\"sdma\":%" PRIu32
	       ",\"smc\":%" PRIu32 ",\"sos\":%" PRIu32 "}},\"drm_error\":null", q.fw_mec,
	       q.fw_rlc, q.fw_sdma, q.fw_smc, q.fw_sos);
}

/* rocminfo's view of an AMD GPU: the topology's, then libdrm's. */
static void print_amd(const aql_agent_info *in)
{
	const struct kfd_process *p;
	const struct kfd_node *n = amd_node(in, &p);
	static const char *levels[KFD_CACHE_LEVELS] = { "L1 cache:", "L2 cache:", "L3 cache:" };

	if (!n)
		return;
	printf("  %-28s %s\n", "KFD node name:", n->name[0] ? n->name : "(not reported)");
	printf("  %-28s 0x%04" PRIx32 "\n", "Vendor:", n->vendor_id);
	printf("  %-28s 0x%04" PRIx32 "\n", "Chip ID:", n->device_id);
	printf("  %-28s %04" PRIx32 ":%02" PRIx32 ":%02" PRIx32 ".%" PRIx32 "\n", "PCI address:",
	       n->domain, n->location_id >> 8 & 0xff, n->location_id >> 3 & 0x1f,
	       n->location_id & 7);
	printf("  %-28s %" PRIu32 " (gpu_id %" PRIu32 ", /dev/dri/renderD%" PRIu32 ")\n",
	       "KFD node:", n->node_id, n->gpu_id, n->drm_render_minor);
	printf("  %-28s %" PRIu32 "\n", "SIMDs per CU:", n->simd_per_cu);
	printf("  %-28s %" PRIu32 "\n", "Shader engines:", n->ses);
	printf("  %-28s %" PRIu32 "\n", "Shader arrays per engine:", n->simd_arrays_per_engine);
	printf("  %-28s %" PRIu32 "\n", "XCCs:", n->xccs);
	printf("  %-28s %" PRIu32 "\n", "Max waves per CU:", n->waves_per_cu);
	printf("  %-28s %" PRIu32 " MHz\n", "Max clock:", n->max_engine_clk_fcompute);
	for (int i = 0; i < KFD_CACHE_LEVELS; i++)
		if (n->cache_kb[i])
			printf("  %-28s %" PRIu32 " KiB\n", levels[i], n->cache_kb[i]);
	printf("  %-28s %s\n", "Host-visible VRAM:",
	       n->vram_public ? "all (large BAR)" : "part (small BAR)");
	printf("  %-28s %" PRIu32 "\n", "Firmware, MEC:", n->fw_version);
	printf("  %-28s %" PRIu32 "\n", "Firmware, SDMA:", n->sdma_fw_version);
	print_amd_drm(n);
	printf("  %-28s %s\n", "KFD system table:", p->sys->name);
}

static void print_amd_json(const aql_agent_info *in)
{
	const struct kfd_process *p;
	const struct kfd_node *n = amd_node(in, &p);

	if (!n)
		return;
	printf(",\"amd\":{\"node_name\":");
	json_string(n->name);
	printf(",\"vendor_id\":%" PRIu32 ",\"chip_id\":%" PRIu32
	       ",\"pci_address\":\"%04" PRIx32 ":%02" PRIx32 ":%02" PRIx32 ".%" PRIx32 "\""
	       ",\"node\":%" PRIu32 ",\"gpu_id\":%" PRIu32 ",\"render_minor\":%" PRIu32
	       ",\"simds_per_cu\":%" PRIu32 ",\"shader_engines\":%" PRIu32
	       ",\"shader_arrays_per_engine\":%" PRIu32 ",\"xccs\":%" PRIu32
	       ",\"max_waves_per_cu\":%" PRIu32 ",\"max_clock_mhz\":%" PRIu32
	       ",\"cache_kb\":[%" PRIu32 ",%" PRIu32 ",%" PRIu32 "],\"large_bar\":%s"
	       ",\"mec_fw\":%" PRIu32 ",\"sdma_fw\":%" PRIu32 ",\"emulated_by\":",
	       n->vendor_id, n->device_id, n->domain, n->location_id >> 8 & 0xff,
	       n->location_id >> 3 & 0x1f, n->location_id & 7, n->node_id, n->gpu_id,
	       n->drm_render_minor, n->simd_per_cu, n->ses, n->simd_arrays_per_engine, n->xccs,
	       n->waves_per_cu, n->max_engine_clk_fcompute, n->cache_kb[0], n->cache_kb[1],
	       n->cache_kb[2], n->vram_public ? "true" : "false", n->fw_version,
	       n->sdma_fw_version);
	if (strcmp(p->sys->name, "linux"))
		json_string(p->sys->name);
	else
		printf("null");
	print_amd_drm_json(n);
	putchar('}');
}

static void print_full(uint32_t ordinal, const aql_agent_info *in)
{
	char b[64];

	printf("Agent %" PRIu32 "\n", ordinal);
	printf("  %-28s %s%s\n", "Name:", in->name, emulated(in, b, sizeof(b)));
	printf("  %-28s %s %" PRIu32 "\n", "Kind:", aql_agent_kind_name(in->kind),
	       in->device_index);
	printf("  %-28s %s\n", "ISA:", in->isa[0] ? in->isa : "(not reported)");
	printf("  %-28s %" PRIu32 "\n", "Compute units:", in->compute_units);
	printf("  %-28s %" PRIu32 "\n", "Wavefront size:", in->wavefront_size);
	printf("  %-28s %" PRIu32 "\n", "Max work-group size:", in->max_workgroup_size);
	printf("  %-28s %u x %u x %u\n", "Max work-group dims:", in->max_workgroup_dim[0],
	       in->max_workgroup_dim[1], in->max_workgroup_dim[2]);
	printf("  %-28s %" PRIu32 " x %" PRIu32 " x %" PRIu32 "\n", "Max grid (work-items):",
	       in->max_grid_dim[0], in->max_grid_dim[1], in->max_grid_dim[2]);
	printf("  %-28s %" PRIu32 " bytes\n", "LDS per work-group, default:",
	       in->default_group_segment_size);
	printf("  %-28s %" PRIu32 " bytes\n", "LDS per work-group, max:",
	       in->max_group_segment_size);
	printf("  %-28s %" PRIu32 " bytes\n", "Private per work-item, max:",
	       in->max_private_segment_size);
	printf("  %-28s %s\n", "Memory:", memory_size(in->memory_size, b, sizeof(b)));
	printf("  %-28s %s\n", "Unified memory:", in->unified_memory ? "yes" : "no");
	printf("  %-28s %" PRIu32 " packets\n", "Max queue size:", in->max_queue_size);
	printf("  %-28s%s%s\n", "Queue features:",
	       in->queue_features & 1 ? " kernel-dispatch" : "",
	       in->queue_features & 2 ? " agent-dispatch" : "");
	printf("  %-28s %s\n", "Signal path:", signal_path_name(in));
	printf("  %-28s %s\n", "Kernels wake the host:", in->wakes_host ? "yes" : "no (host waits poll)");
	if (in->numa_node < 0)
		printf("  %-28s all\n", "NUMA node:");
	else
		printf("  %-28s %" PRId32 "\n", "NUMA node:", in->numa_node);
	printf("  %-28s %s\n", "Driver version:", driver_version(in->driver_version, b,
								   sizeof(b)));
	print_amd(in);
}

/* One line, as nvidia-smi -L: "GPU 0: NVIDIA H100 80GB HBM3 (sm_90)". */
static void print_line(const aql_agent_info *in)
{
	char b[64];

	printf("%s %" PRIu32 ": %s", in->kind == AQL_AGENT_CPU ? "CPU" : "GPU",
	       in->device_index, in->name);
	if (in->isa[0])
		printf(" (%s)", in->isa);
	printf("%s\n", emulated(in, b, sizeof(b)));
}

static void print_json_agent(const aql_agent_info *in)
{
	char b[64];

	printf("{\"kind\":\"%s\",\"index\":%" PRIu32 ",\"name\":", aql_agent_kind_name(in->kind),
	       in->device_index);
	json_string(in->name);
	printf(",\"isa\":");
	json_string(in->isa);
	printf(",\"compute_units\":%" PRIu32 ",\"wavefront_size\":%" PRIu32
	       ",\"max_workgroup_size\":%" PRIu32 ",\"max_workgroup_dim\":[%u,%u,%u]"
	       ",\"max_grid_dim\":[%" PRIu32 ",%" PRIu32 ",%" PRIu32 "]"
	       ",\"default_group_segment_size\":%" PRIu32
	       ",\"max_group_segment_size\":%" PRIu32
	       ",\"max_private_segment_size\":%" PRIu32 ",\"memory_size\":%" PRIu64
	       ",\"unified_memory\":%s,\"max_queue_size\":%" PRIu32 ",\"queue_features\":%" PRIu32
	       ",\"numa_node\":%" PRId32 ",\"signal_path\":\"%s\",\"wakes_host\":%s,\"driver_version\":",
	       in->compute_units, in->wavefront_size, in->max_workgroup_size,
	       in->max_workgroup_dim[0], in->max_workgroup_dim[1], in->max_workgroup_dim[2],
	       in->max_grid_dim[0], in->max_grid_dim[1], in->max_grid_dim[2],
	       in->default_group_segment_size, in->max_group_segment_size,
	       in->max_private_segment_size, in->memory_size,
	       in->unified_memory ? "true" : "false", in->max_queue_size, in->queue_features,
	       in->numa_node, signal_path_name(in), in->wakes_host ? "true" : "false");
	if (in->driver_version)
		printf("\"%s\"", driver_version(in->driver_version, b, sizeof(b)));
	else
		printf("null");
	print_amd_json(in);
	putchar('}');
}

struct unavailable {
	enum aql_agent_kind kind;
	aql_status status;
	char reason[512];
};

/* GPU nodes the AMD agent cannot run, each with its reason. */
static uint32_t unusable_amd(struct unavailable *u, uint32_t room)
{
	const struct kfd_process *p;
	uint32_t n = 0;

	if (kfd_process_get(&p) != AQL_OK || !p->usable)
		return 0;	/* aql_agent_count() said why */
	for (uint32_t i = 0; i < p->topo.count && n < room; i++) {
		if (p->topo.nodes[i].usable == AQL_OK)
			continue;
		u[n].kind = AQL_AGENT_AMD;
		u[n].status = p->topo.nodes[i].usable;
		snprintf(u[n].reason, sizeof(u[n].reason), "%s", p->topo.nodes[i].reason);
		n++;
	}
	return n;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: aql-info [-L | --list] [--json] [--help]\n"
		"\n"
		"List every agent libaql can open on this machine (CPU, NVIDIA,\n"
		"AMD) with its limits, and for each kind it cannot offer, why.\n"
		"\n"
		"  -L, --list  one line per agent, as nvidia-smi -L\n"
		"  --json      one JSON document: {\"agents\":[...],\n"
		"              \"unavailable\":[{\"kind\",\"status\",\"reason\"}]}\n"
		"  --help      show this text\n"
		"\n"
		"Exit status 0 when at least one agent is listed.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "list", no_argument, NULL, 'L' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct unavailable missing[MAX_UNAVAILABLE];
	enum format fmt = FMT_FULL;
	uint32_t listed = 0, nmissing = 0;
	char b[64];
	int c;

	while ((c = getopt_long(argc, argv, "L", longopts, NULL)) != -1) {
		switch (c) {
		case 'L':
			fmt = FMT_LIST;
			break;
		case 'j':
			fmt = FMT_JSON;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "aql-info: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}

	if (fmt == FMT_JSON)
		printf("{\"agents\":[");
	for (int k = AQL_AGENT_CPU; k < AQL_AGENT_KIND_COUNT; k++) {
		struct unavailable *u = &missing[nmissing];
		uint32_t count = 0;
		aql_status st;

		u->kind = (enum aql_agent_kind)k;
		st = aql_agent_count(u->kind, &count);
		if (st != AQL_OK) {
			u->status = st;
			snprintf(u->reason, sizeof(u->reason), "%s", aql_error_message());
			nmissing++;
			continue;
		}
		for (uint32_t i = 0; i < count; i++) {
			aql_agent_info info;
			aql_agent *agent;

			st = aql_agent_open(u->kind, i, &agent);
			if (st == AQL_OK) {
				st = aql_agent_get_info(agent, &info);
				aql_agent_destroy(agent);
			}
			if (st != AQL_OK) {
				/* One device failing is reported; its siblings are still listed. */
				if (nmissing >= MAX_UNAVAILABLE - AQL_AGENT_KIND_COUNT)
					continue;
				u = &missing[nmissing++];
				u->kind = (enum aql_agent_kind)k;
				u->status = st;
				snprintf(u->reason, sizeof(u->reason), "%s agent %" PRIu32 ": %s",
					 aql_agent_kind_name(u->kind), i, aql_error_message());
				continue;
			}
			/* What aql_agent_open() takes; the CPU agent leaves it 0. */
			info.device_index = i;
			if (fmt == FMT_FULL)
				print_full(listed, &info);
			else if (fmt == FMT_LIST)
				print_line(&info);
			else {
				if (listed)
					putchar(',');
				print_json_agent(&info);
			}
			listed++;
		}
		if (k == AQL_AGENT_AMD)
			nmissing += unusable_amd(&missing[nmissing], MAX_UNAVAILABLE - nmissing);
	}

	if (fmt == FMT_JSON) {
		printf("],\"unavailable\":[");
		for (uint32_t i = 0; i < nmissing; i++) {
			printf("%s{\"kind\":\"%s\",\"status\":\"%s\",\"reason\":", i ? "," : "",
			       aql_agent_kind_name(missing[i].kind),
			       status_name(missing[i].status, b, sizeof(b)));
			json_string(missing[i].reason);
			putchar('}');
		}
		printf("]}\n");
	} else {
		if (nmissing)
			printf("%sUnavailable:\n", fmt == FMT_FULL && listed ? "\n" : "");
		for (uint32_t i = 0; i < nmissing; i++)
			printf("  %s: %s: %s\n", aql_agent_kind_name(missing[i].kind),
			       status_name(missing[i].status, b, sizeof(b)), missing[i].reason);
	}
	return listed ? 0 : 1;
}
