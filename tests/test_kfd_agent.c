/* SPDX-License-Identifier: MIT */
/*
 * The AMD agent (aql/kfd/) on the KFD emulation (tests/kfd_emu/, named by
 * AQL_KFD_SYS), the reasons why there is no AMD agent, and the topology
 * parser on a small table of this file's own.
 *
 *   test_kfd_agent --agents MODELS [--version 1.N] [--xnack 0|1]
 *	MODELS (gfx90a,gfx942) are the emulated GPUs in order: count, open,
 *	every info value against the model's sysfs values, target IDs, the
 *	ioctls the agent made (the emulation's counters), agents opened
 *	from several threads, and the refusals of what is not built yet;
 *   test_kfd_agent --expect REASON
 *	aql_agent_count(AMD) fails for REASON (nokfd, perm, old, new,
 *	nogpu, nolib, abi1, render_perm), every later call the same way, and
 *	the CPU agent works all the same;
 *   test_kfd_agent --expect-open REASON
 *	the count works and opening agent 0 fails for REASON (vm_nomem,
 *	vm_inval, vm_busy, rt_exist), or works despite it (rt_busy);
 *   test_kfd_agent --topology
 *	kfd_topology_scan() on an in-memory sysfs: unknown and missing
 *	keys, unsupported nodes and their reasons, a changing generation;
 *   test_kfd_agent --drm-fault
 *	libdrm's query fails (AQL_KFD_EMU_FAIL=drm_query): the agent opens
 *	all the same, and the failure is kept with the call named;
 *   test_kfd_agent --drm-bad-fd
 *	the system table's gpu_query (the real one, or the emulation's) on
 *	an fd that is not open and on one that is no render node.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <aql/aql.h>

#include "helpers.h"
#include "aql/kfd/kfd.h"
#include "kfd_emu/kfdemu.h"

/* The emulation's models, as tests/kfd_emu publishes them in sysfs and
 * answers libdrm's queries. */
struct model {
	const char *gfx;
	uint32_t cus, ses, xccs, device_id, clock_mhz, mem_clock_mhz;
	uint64_t memory;
	const char *marketing_name;
};

static const struct model models[] = {
	{ "gfx90a", 110, 8, 1, 0x740c, 1700, 1600, 64ull << 30, "AMD Instinct MI250X / MI250" },
	{ "gfx942", 304, 32, 8, 0x74a1, 2100, 1300, 192ull << 30, "AMD Instinct MI300X" },
};

static const struct model *model(const char *gfx, size_t len)
{
	for (size_t i = 0; i < sizeof(models) / sizeof(*models); i++)
		if (strlen(models[i].gfx) == len && !strncmp(models[i].gfx, gfx, len))
			return &models[i];
	fprintf(stderr, "no model %.*s\n", (int)len, gfx);
	exit(1);
}

static int stats(struct kfdemu_stats *out)
{
	const char *path = getenv("AQL_KFD_SYS");
	void *lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
	kfdemu_stats_fn fn = lib ? (kfdemu_stats_fn)dlsym(lib, "kfdemu_stats") : NULL;
	int r = fn ? fn(out) : -1;

	if (lib)
		dlclose(lib);
	return r;
}

static void check_cpu_unaffected(void)
{
	aql_agent *agent = NULL;
	aql_agent_info info;
	uint32_t n = 0;

	CHECK_OK(aql_agent_default(&agent));
	CHECK_OK(aql_agent_get_info(agent, &info));
	CHECK(info.kind == AQL_AGENT_CPU, "the default agent is of kind %d", info.kind);
	CHECK_OK(aql_agent_count(AQL_AGENT_CPU, &n));
	CHECK(n == 1, "%u CPU agents", n);
}

/* libdrm's view, asked at the first open: the model's, agreeing with the
 * topology where both say a thing. */
static void check_drm(const struct kfd_node *n, const struct model *m)
{
	struct aql_kfd_gpu_query q;
	int r = kfd_gpu_query(n, &q);

	CHECK(r == 0, "kfd_gpu_query: %d (%s)", r, q.failed);
	if (r)
		return;
	CHECK(!strcmp(q.marketing_name, m->marketing_name), "marketing name \"%s\", expected %s",
	      q.marketing_name, m->marketing_name);
	CHECK(q.asic_id == n->device_id && q.family_id == 141, "asic %#x family %u", q.asic_id,
	      q.family_id);
	CHECK(q.max_engine_clock_mhz == m->clock_mhz && q.max_memory_clock_mhz == m->mem_clock_mhz,
	      "clocks %u/%u MHz", q.max_engine_clock_mhz, q.max_memory_clock_mhz);
	CHECK(q.max_memory_clock_mhz == n->mem_clk_max, "memory clock %u, topology %u",
	      q.max_memory_clock_mhz, n->mem_clk_max);
	CHECK(q.vram.total == m->memory && q.vram.usable == m->memory - (8ull << 20) &&
	      q.vram.max_allocation == q.vram.usable * 3 / 4,
	      "VRAM heap %llu usable %llu max %llu", (unsigned long long)q.vram.total,
	      (unsigned long long)q.vram.usable, (unsigned long long)q.vram.max_allocation);
	CHECK(q.visible_vram.total == m->memory && q.visible_vram.usable == q.vram.usable,
	      "visible VRAM %llu on a large BAR", (unsigned long long)q.visible_vram.total);
	CHECK(q.gtt.total > 0 && q.gtt.usable <= q.gtt.total, "GTT %llu",
	      (unsigned long long)q.gtt.total);
	CHECK(q.fw_mec == n->fw_version && q.fw_sdma == n->sdma_fw_version && q.fw_rlc &&
	      q.fw_smc && q.fw_sos, "firmware MEC %u (topology %u), SDMA %u (%u), RLC %u",
	      q.fw_mec, n->fw_version, q.fw_sdma, n->sdma_fw_version, q.fw_rlc);
	CHECK(!q.failed[0], "failed names %s on success", q.failed);
}

static void check_agent(aql_agent *agent, uint32_t index, const struct model *m,
			uint32_t minor, int xnack)
{
	const struct kfd_process *p = NULL;
	const struct kfd_node *n;
	aql_agent_info in;
	char isa[32];

	CHECK_OK(aql_agent_get_info(agent, &in));
	snprintf(isa, sizeof(isa), "%s:sramecc+:xnack%c", m->gfx, xnack ? '+' : '-');
	CHECK(in.kind == AQL_AGENT_AMD, "kind %d", in.kind);
	CHECK(!strcmp(in.name, m->gfx), "name %s, expected %s", in.name, m->gfx);
	CHECK(!strcmp(in.isa, isa), "isa %s, expected %s", in.isa, isa);
	CHECK(in.device_index == index, "device_index %u, expected %u", in.device_index, index);
	CHECK(in.compute_units == m->cus, "%u CUs, expected %u", in.compute_units, m->cus);
	CHECK(in.wavefront_size == 64, "wavefront %u", in.wavefront_size);
	CHECK(in.max_group_segment_size == 65536 && in.default_group_segment_size == 65536,
	      "LDS %u/%u", in.default_group_segment_size, in.max_group_segment_size);
	CHECK(in.max_workgroup_size == 1024 && in.max_workgroup_dim[0] == 1024 &&
	      in.max_workgroup_dim[2] == 1024, "work-group %u", in.max_workgroup_size);
	CHECK(in.max_grid_dim[0] == UINT32_MAX && in.max_grid_dim[2] == UINT32_MAX,
	      "grid %u", in.max_grid_dim[0]);
	CHECK(in.max_private_segment_size == 8191 * 1024 / 64, "private %u",
	      in.max_private_segment_size);
	CHECK(in.memory_size == m->memory, "memory %llu, expected %llu",
	      (unsigned long long)in.memory_size, (unsigned long long)m->memory);
	CHECK(!in.unified_memory && in.signal_path == AQL_SIGNAL_PATH_DEVICE,
	      "unified %u, signal path %u", in.unified_memory, in.signal_path);
	CHECK(in.driver_version == 1000 + minor * 10, "driver version %u for KFD 1.%u",
	      in.driver_version, minor);
	CHECK(in.queue_features == 1 && in.max_queue_size == 131072, "queues %u, %u",
	      in.queue_features, in.max_queue_size);
	CHECK(in.numa_node == 0, "NUMA node %d", in.numa_node);

	CHECK_OK(kfd_process_get(&p));
	n = p ? kfd_agent_node(p, index) : NULL;
	CHECK(n != NULL, "no node for agent %u", index);
	if (!n)
		return;
	CHECK(n->gpu_id != 0 && n->drm_render_minor >= 128, "gpu_id %u, render minor %u",
	      n->gpu_id, n->drm_render_minor);
	CHECK(n->device_id == m->device_id && n->vendor_id == 0x1002, "chip %#x vendor %#x",
	      n->device_id, n->vendor_id);
	CHECK(n->ses == m->ses && n->xccs == m->xccs, "%u SEs, %u XCCs", n->ses, n->xccs);
	CHECK(n->waves_per_cu == 32 && n->simd_per_cu == 4, "%u waves/CU", n->waves_per_cu);
	CHECK(n->max_engine_clk_fcompute == m->clock_mhz, "%u MHz", n->max_engine_clk_fcompute);
	CHECK(n->cache_kb[0] > 0 && n->cache_kb[1] > n->cache_kb[0], "caches %u, %u KiB",
	      n->cache_kb[0], n->cache_kb[1]);
	CHECK(strcmp(p->sys->name, "linux") != 0, "the real table under the emulation's test");
	check_drm(n, m);
}

/* Agent dispatch is refused by name; a copy between host memory needs no
 * GPU (copies with it: test_kfd_copy.c). */
static void check_refusals(aql_agent *agent)
{
	char a[64], b[64] = { 0 };

	memset(a, 0x5a, sizeof(a));
	CHECK(aql_agent_copy(agent, b, a, sizeof(a)) == AQL_OK && !memcmp(a, b, sizeof(a)),
	      "a host-to-host copy on the AMD agent: %s", aql_error_message());
	CHECK(aql_agent_register_function(agent, 1, NULL, NULL) == AQL_ERR_UNSUPPORTED,
	      "agent dispatch on the AMD agent");
}

struct opener {
	uint32_t index;
	aql_status st;
	char isa[32];
};

static void *open_in_thread(void *arg)
{
	struct opener *o = arg;
	aql_agent *agent = NULL;
	aql_agent_info info;

	o->st = aql_agent_open(AQL_AGENT_AMD, o->index, &agent);
	if (o->st == AQL_OK) {
		aql_agent_get_info(agent, &info);
		snprintf(o->isa, sizeof(o->isa), "%s", info.isa);
		o->st = aql_agent_destroy(agent);
	}
	return NULL;
}

static int agents(const char *list, uint32_t minor, int xnack)
{
	const struct model *want[8];
	uint32_t count = 0, n = 0;
	struct kfdemu_stats s;
	aql_agent *agent, *again, *none = NULL;

	for (const char *c = list; *c && n < 8; ) {
		size_t len = strcspn(c, ",");

		want[n++] = model(c, len);
		c += len + (c[len] == ',');
	}
	CHECK_OK(aql_agent_count(AQL_AGENT_AMD, &count));
	CHECK(count == n, "%u AMD agents, expected %u", count, n);
	CHECK(aql_agent_open(AQL_AGENT_AMD, n, &none) == AQL_ERR_INVALID_ARG && !none,
	      "agent %u of %u opened", n, n);
	CHECK(th_error_has("does not exist"), "out-of-range message: %s", aql_error_message());
	{
		const struct kfd_process *p = NULL;
		struct aql_kfd_gpu_query q;

		CHECK_OK(kfd_process_get(&p));
		CHECK(p && kfd_gpu_query(kfd_agent_node(p, 0), &q) == -ENODATA,
		      "libdrm's view before the GPU was opened");
	}
	for (uint32_t i = 0; i < n && count == n; i++) {
		CHECK_OK(aql_agent_open(AQL_AGENT_AMD, i, &agent));
		if (th_failed)
			break;
		check_agent(agent, i, want[i], minor, xnack);
		check_refusals(agent);
		/* A second agent on the GPU shares its render node and VM. */
		CHECK_OK(aql_agent_open(AQL_AGENT_AMD, i, &again));
		CHECK_OK(aql_agent_destroy(again));
		CHECK_OK(aql_agent_destroy(agent));
		CHECK_OK(aql_agent_open(AQL_AGENT_AMD, i, &agent));
		CHECK_OK(aql_agent_destroy(agent));
	}

	pthread_t t[4];
	struct opener o[4];

	for (uint32_t i = 0; i < 4; i++) {
		o[i] = (struct opener){ .index = i % n };
		CHECK(pthread_create(&t[i], NULL, open_in_thread, &o[i]) == 0, "pthread_create");
	}
	for (uint32_t i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK(o[i].st == AQL_OK && !strncmp(o[i].isa, want[i % n]->gfx,
						    strlen(want[i % n]->gfx)),
		      "thread %u: %s, isa %s", i, aql_status_str(o[i].st), o[i].isa);
	}

	CHECK(stats(&s) == 0, "no kfdemu_stats in AQL_KFD_SYS");
	CHECK(s.kfd_opens == 1, "/dev/kfd opened %llu times", (unsigned long long)s.kfd_opens);
	CHECK(s.render_opens == n, "%llu render nodes opened for %u GPUs",
	      (unsigned long long)s.render_opens, n);
	CHECK(s.vm_acquired == (1u << n) - 1, "VMs acquired %#x", s.vm_acquired);
	CHECK(s.runtime_enabled == (minor >= 13), "RUNTIME_ENABLE state %u on KFD 1.%u",
	      s.runtime_enabled, minor);
	/* Once per process, however many agents were opened. */
	CHECK(s.ioctls[0x01] == 1 && s.ioctls[0x25] == (minor >= 13),
	      "GET_VERSION %llu times, RUNTIME_ENABLE %llu times",
	      (unsigned long long)s.ioctls[0x01], (unsigned long long)s.ioctls[0x25]);
	CHECK(s.drm_queries == n, "libdrm asked %llu times for %u GPUs",
	      (unsigned long long)s.drm_queries, n);
	CHECK(s.ioctls[0x15] == n && s.ioctls[0x14] == 2 * n && !s.ioctls_failed,
	      "ACQUIRE_VM %llu, GET_PROCESS_APERTURES_NEW %llu, %llu failed",
	      (unsigned long long)s.ioctls[0x15], (unsigned long long)s.ioctls[0x14],
	      (unsigned long long)s.ioctls_failed);
	check_cpu_unaffected();
	return th_finish();
}

static const struct {
	const char *reason;
	aql_status st;
	const char *says;
} count_reasons[] = {
	{ "nokfd", AQL_ERR_NOT_FOUND, "no /dev/kfd" },
	{ "perm", AQL_ERR_SYSTEM, "permission denied on /dev/kfd" },
	{ "old", AQL_ERR_UNSUPPORTED, "KFD 1.10 is older" },
	{ "new", AQL_ERR_UNSUPPORTED, "KFD 2.0 is newer" },
	{ "nogpu", AQL_ERR_NOT_FOUND, "lists no GPU" },
	{ "nolib", AQL_ERR_NOT_FOUND, "does not load" },
	{ "abi1", AQL_ERR_UNSUPPORTED, "has table ABI 1, and this libaql needs 2" },
	{ "render_perm", AQL_ERR_SYSTEM, "render group" },
}, open_reasons[] = {
	{ "vm_nomem", AQL_ERR_NOMEM, "AMDKFD_IOC_ACQUIRE_VM" },
	{ "vm_inval", AQL_ERR_DEVICE, "not this GPU's" },
	{ "vm_busy", AQL_ERR_BUSY, "already holds the GPU's VM" },
	{ "rt_exist", AQL_ERR_BUSY, "already created KFD queues" },
	{ "rt_busy", AQL_OK, NULL },
};

static int expect(const char *reason)
{
	aql_agent *agent = NULL;
	uint32_t count = 0;
	char first[512];
	aql_status st;
	size_t i;

	for (i = 0; i < sizeof(count_reasons) / sizeof(*count_reasons); i++)
		if (!strcmp(count_reasons[i].reason, reason))
			break;
	if (i == sizeof(count_reasons) / sizeof(*count_reasons)) {
		fprintf(stderr, "no reason %s\n", reason);
		return 1;
	}
	st = aql_agent_count(AQL_AGENT_AMD, &count);
	CHECK(st == count_reasons[i].st, "%s: %s, expected %s", reason, aql_status_str(st),
	      aql_status_str(count_reasons[i].st));
	CHECK(th_error_has(count_reasons[i].says) && th_error_has("no AMD agent"),
	      "%s: message \"%s\"", reason, aql_error_message());
	snprintf(first, sizeof(first), "%s", aql_error_message());
	fprintf(stderr, "%s: %s\n", reason, first);
	/* Found once per process: the same answer every time. */
	CHECK(aql_agent_count(AQL_AGENT_AMD, &count) == st && !strcmp(first, aql_error_message()),
	      "a second count: %s", aql_error_message());
	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == st && !agent, "open after %s", reason);
	check_cpu_unaffected();
	return th_finish();
}

static int expect_open(const char *reason)
{
	aql_agent *agent = NULL;
	uint32_t count = 0;
	aql_status st;
	size_t i;

	for (i = 0; i < sizeof(open_reasons) / sizeof(*open_reasons); i++)
		if (!strcmp(open_reasons[i].reason, reason))
			break;
	if (i == sizeof(open_reasons) / sizeof(*open_reasons)) {
		fprintf(stderr, "no reason %s\n", reason);
		return 1;
	}
	CHECK_OK(aql_agent_count(AQL_AGENT_AMD, &count));
	st = aql_agent_open(AQL_AGENT_AMD, 0, &agent);
	CHECK(st == open_reasons[i].st, "%s: %s (%s), expected %s", reason, aql_status_str(st),
	      aql_error_message(), aql_status_str(open_reasons[i].st));
	if (open_reasons[i].says) {
		CHECK(!agent && th_error_has(open_reasons[i].says), "%s: message \"%s\"", reason,
		      aql_error_message());
		fprintf(stderr, "%s: %s\n", reason, aql_error_message());
		/* Still refused on a second try, and nothing half-made kept. */
		CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == st && !agent,
		      "second open: %s", aql_error_message());
	}
	CHECK_OK(aql_agent_destroy(agent));
	check_cpu_unaffected();
	return th_finish();
}

/* libdrm's query failing: not fatal, kept, asked once. */
static int drm_fault(void)
{
	const struct kfd_process *p = NULL;
	struct aql_kfd_gpu_query q;
	aql_agent *agent = NULL;
	struct kfdemu_stats s;
	int r;

	for (int i = 0; i < 2; i++) {
		CHECK_OK(aql_agent_open(AQL_AGENT_AMD, 0, &agent));
		CHECK_OK(aql_agent_destroy(agent));
	}
	CHECK_OK(kfd_process_get(&p));
	r = p ? kfd_gpu_query(kfd_agent_node(p, 0), &q) : 0;
	CHECK(r == -EBADF && !strcmp(q.failed, "amdgpu_device_initialize") &&
	      !q.marketing_name[0] && !q.vram.total,
	      "the fault: %d, failed \"%s\", name \"%s\"", r, q.failed, q.marketing_name);
	CHECK(stats(&s) == 0 && s.drm_queries == 1, "libdrm asked %llu times",
	      (unsigned long long)s.drm_queries);
	CHECK(p && kfd_gpu_query(NULL, &q) == -EINVAL, "a node not of the topology");
	return th_finish();
}

/* The table's query on fds it must refuse, as libdrm's amdgpu_get_auth
 * does: one not open, one that is no DRM device. */
static int drm_bad_fd(void)
{
	const struct aql_kfd_sys *sys = NULL;
	struct aql_kfd_gpu_query q;
	int fd, r;

	CHECK_OK(aql_kfd_sys_get(&sys));
	if (!sys)
		return th_finish();
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "open /dev/null");
	r = sys->gpu_query(fd, &q);
	CHECK(r == -ENOTTY && !strcmp(q.failed, "amdgpu_device_initialize"),
	      "%s table on /dev/null: %d, failed \"%s\"", sys->name, r, q.failed);
	close(fd);
	r = sys->gpu_query(fd, &q);
	CHECK(r == -EBADF && !strcmp(q.failed, "amdgpu_device_initialize"),
	      "%s table on a closed fd: %d, failed \"%s\"", sys->name, r, q.failed);
	fprintf(stderr, "%s table: refused as expected\n", sys->name);
	return th_finish();
}

/* An in-memory sysfs for kfd_topology_scan(): paths and their text. */
struct file {
	const char *path;
	const char *text;
};

static const struct file *fake;
static size_t fake_count;
/* generation_id reads 1, 2, 3, ... for this many reads, then stays. */
static unsigned generation_moves, generation_reads;

static long fake_read(const char *path, char *buf, size_t size)
{
	if (!strcmp(path, "/t/generation_id") && fake_count) {
		unsigned g = ++generation_reads;

		snprintf(buf, size, "%u\n", g < generation_moves ? g : generation_moves + 1);
		return (long)strlen(buf);
	}
	for (size_t i = 0; i < fake_count; i++) {
		if (!strcmp(fake[i].path, path)) {
			snprintf(buf, size, "%s", fake[i].text);
			return (long)strlen(buf);
		}
	}
	return -ENOENT;
}

static int fake_list(const char *path, int (*each)(const char *name, void *user), void *user)
{
	size_t len = strlen(path);
	char seen[64][16];
	int found = 0, nseen = 0;

	for (size_t i = 0; i < fake_count; i++) {
		const char *p = fake[i].path, *name;
		size_t n;
		int dup = 0, r;

		if (strncmp(p, path, len) || p[len] != '/')
			continue;
		found = 1;
		name = p + len + 1;
		n = strcspn(name, "/");
		if (name[n] != '/' || n >= sizeof(seen[0]))
			continue;
		for (int k = 0; k < nseen; k++)
			dup |= strlen(seen[k]) == n && !strncmp(seen[k], name, n);
		if (dup || nseen == 64)
			continue;
		memcpy(seen[nseen], name, n);
		seen[nseen][n] = '\0';
		if ((r = each(seen[nseen++], user)))
			return r;
	}
	return found ? 0 : -ENOENT;
}

static const struct aql_kfd_sys fake_sys = {
	.abi = AQL_KFD_SYS_ABI,
	.name = "test",
	.read_file = fake_read,
	.list_dir = fake_list,
};

#define GPU_PROPS(gfxv, cap)                                                              \
	"cpu_cores_count 0\nsimd_count 440\nmem_banks_count 1\ncaches_count 2\n"          \
	"some_future_key 77\nmax_waves_per_simd 8\nlds_size_in_kb 64\n"                   \
	"wave_front_size 64\narray_count 8\nsimd_arrays_per_engine 1\nsimd_per_cu 4\n"   \
	"gfx_target_version " gfxv "\nvendor_id 4098\ndevice_id 29708\n"                  \
	"location_id 10496\ndomain 0\ndrm_render_minor 128\ncapability " cap "\n"         \
	"local_mem_size 1024\nunique_id 18446744073709551615\n"

static const struct file topo_mixed[] = {
	{ "/t/nodes/0/gpu_id", "0\n" },
	{ "/t/nodes/0/properties", "cpu_cores_count 64\nsimd_count 0\n" },
	/* gfx90a with sramecc, an unknown key, no num_xcc: one XCC */
	{ "/t/nodes/1/gpu_id", "4660\n" },
	{ "/t/nodes/1/name", "aldebaran\n" },
	{ "/t/nodes/1/properties", GPU_PROPS("90010", "67117056") },
	{ "/t/nodes/1/mem_banks/0/properties",
	  "heap_type 2\nsize_in_bytes 68719476736\nflags 0\nwidth 4096\nmem_clk_max 1600\n" },
	{ "/t/nodes/1/caches/0/properties", "processor_id_low 1\nlevel 1\nsize 16\n" },
	{ "/t/nodes/1/caches/1/properties", "level 2\nsize 8192\n" },
	{ "/t/nodes/1/io_links/0/properties", "type 2\nnode_from 1\nnode_to 0\n" },
	/* gfx803: 32-bit doorbells (type 1), kept with its reason */
	{ "/t/nodes/2/gpu_id", "22136\n" },
	{ "/t/nodes/2/properties", GPU_PROPS("80003", "4096") },
	/* gfx1100 has no sramecc and no xnack; a stray file is ignored */
	{ "/t/nodes/10/gpu_id", "39612\n" },
	{ "/t/nodes/10/properties", GPU_PROPS("110000", "8192") },
	{ "/t/nodes/10/README", "not a node\n" },
	/* gfx_target_version 0 on a GPU node */
	{ "/t/nodes/11/gpu_id", "111\n" },
	{ "/t/nodes/11/properties", GPU_PROPS("0", "8192") },
	/* gfx90a without sramecc */
	{ "/t/nodes/12/gpu_id", "112\n" },
	{ "/t/nodes/12/properties", GPU_PROPS("90010", "8192") },
};

static const struct file topo_cpu_only[] = {
	{ "/t/nodes/0/gpu_id", "0\n" },
	{ "/t/nodes/0/properties", "cpu_cores_count 64\n" },
};

static void use(const struct file *files, size_t n, unsigned moves)
{
	fake = files;
	fake_count = n;
	generation_moves = moves;
	generation_reads = 0;
}

static int topology(void)
{
	struct kfd_topology t;
	const struct kfd_node *n;

	use(topo_mixed, sizeof(topo_mixed) / sizeof(*topo_mixed), 0);
	CHECK_OK(kfd_topology_scan(&fake_sys, "/t", &t));
	CHECK(t.count == 5, "%u GPU nodes, expected 5", t.count);
	if (t.count == 5) {
		n = &t.nodes[0];
		CHECK(n->node_id == 1 && n->gpu_id == 4660 && !strcmp(n->name, "aldebaran"),
		      "node %u gpu_id %u name %s", n->node_id, n->gpu_id, n->name);
		CHECK(n->usable == AQL_OK, "gfx90a: %s", n->reason);
		CHECK(!strcmp(n->gfx, "gfx90a") && !strcmp(n->target_id, "gfx90a:sramecc+"),
		      "%s / %s", n->gfx, n->target_id);
		CHECK(n->cus == 110 && n->ses == 8 && n->xccs == 1 && n->waves_per_cu == 32,
		      "%u CUs %u SEs %u XCCs %u waves", n->cus, n->ses, n->xccs, n->waves_per_cu);
		CHECK(n->vram_size == 68719476736ull && !n->vram_public && n->mem_clk_max == 1600,
		      "VRAM %llu public %u", (unsigned long long)n->vram_size, n->vram_public);
		CHECK(n->cache_kb[0] == 16 && n->cache_kb[1] == 8192 && n->cache_kb[2] == 0,
		      "caches %u %u %u", n->cache_kb[0], n->cache_kb[1], n->cache_kb[2]);
		CHECK(n->cpu_node == 0 && n->io_links == 1, "CPU node %d", n->cpu_node);
		CHECK(n->location_id == 10496 && n->device_id == 29708, "location %u",
		      n->location_id);

		n = &t.nodes[1];
		CHECK(n->node_id == 2 && n->usable == AQL_ERR_UNSUPPORTED &&
		      strstr(n->reason, "gfx803") && strstr(n->reason, "doorbell type 1"),
		      "gfx803: %s", n->reason);
		CHECK(n->cpu_node == -1 && n->vram_size == 1024, "no io_link: %d; VRAM %llu",
		      n->cpu_node, (unsigned long long)n->vram_size);

		n = &t.nodes[2];
		CHECK(n->node_id == 10 && n->usable == AQL_OK && !strcmp(n->target_id, "gfx1100"),
		      "node %u: %s %s", n->node_id, n->target_id, n->reason);
		n = &t.nodes[3];
		CHECK(n->node_id == 11 && n->usable == AQL_ERR_UNSUPPORTED &&
		      strstr(n->reason, "names no gfx processor"), "node 11: %s", n->reason);
		n = &t.nodes[4];
		CHECK(n->usable == AQL_OK && !strcmp(n->target_id, "gfx90a:sramecc-"),
		      "node 12: %s", n->target_id);
	}
	kfd_topology_free(&t);

	/* A GPU coming or going under the scan: scanned again. */
	use(topo_mixed, sizeof(topo_mixed) / sizeof(*topo_mixed), 2);
	CHECK_OK(kfd_topology_scan(&fake_sys, "/t", &t));
	CHECK(t.count == 5 && generation_reads > 2, "%u nodes after %u generation reads",
	      t.count, generation_reads);
	kfd_topology_free(&t);
	use(topo_mixed, sizeof(topo_mixed) / sizeof(*topo_mixed), 1000);
	CHECK(kfd_topology_scan(&fake_sys, "/t", &t) == AQL_ERR_DEVICE && !t.nodes,
	      "a topology that never settles");
	CHECK(th_error_has("changed under"), "%s", aql_error_message());

	use(topo_cpu_only, sizeof(topo_cpu_only) / sizeof(*topo_cpu_only), 0);
	CHECK(kfd_topology_scan(&fake_sys, "/t", &t) == AQL_ERR_NOT_FOUND,
	      "CPU nodes only");
	CHECK(th_error_has("lists no GPU"), "%s", aql_error_message());
	use(NULL, 0, 0);
	CHECK(kfd_topology_scan(&fake_sys, "/t", &t) == AQL_ERR_NOT_FOUND, "no topology");
	CHECK(th_error_has("no KFD topology at /t"), "%s", aql_error_message());
	return th_finish();
}

int main(int argc, char **argv)
{
	const char *list = NULL;
	uint32_t minor = 18;
	int xnack = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect") && i + 1 < argc)
			return expect(argv[i + 1]);
		if (!strcmp(argv[i], "--expect-open") && i + 1 < argc)
			return expect_open(argv[i + 1]);
		if (!strcmp(argv[i], "--topology"))
			return topology();
		if (!strcmp(argv[i], "--drm-fault"))
			return drm_fault();
		if (!strcmp(argv[i], "--drm-bad-fd"))
			return drm_bad_fd();
		if (!strcmp(argv[i], "--agents") && i + 1 < argc)
			list = argv[++i];
		else if (!strcmp(argv[i], "--version") && i + 1 < argc)
			minor = (uint32_t)strtoul(strchr(argv[++i], '.') ? strchr(argv[i], '.') + 1 :
						  argv[i], NULL, 10);
		else if (!strcmp(argv[i], "--xnack") && i + 1 < argc)
			xnack = atoi(argv[++i]);
		else
			list = NULL, i = argc;
	}
	if (!list) {
		fprintf(stderr, "usage: %s --agents MODELS [--version 1.N] [--xnack 0|1] | "
			"--expect REASON | --expect-open REASON | --topology | --drm-fault | "
			"--drm-bad-fd\n", argv[0]);
		return 1;
	}
	return agents(list, minor, xnack);
}
