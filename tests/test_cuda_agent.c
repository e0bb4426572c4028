/* SPDX-License-Identifier: MIT */
/*
 * The CUDA agent (nv/agent.c, nv/driver.c) against the emulated driver
 * (tests/cuda_emu/), and the reasons why there is no CUDA agent.
 *
 *   test_cuda_agent [--devices N] [--no-memops] [--ptx saxpy.ptx] [--nv DIR]
 *	the agent: count, open, info, a fresh thread, memory, copies, host
 *	registration, modules (saxpy's PTX when given; bad PTX always);
 *	with DIR (tests/co/nv), saxpy's cubins and fatbins loaded with
 *	aql_code_object_load and run with AQL_LAUNCH, those built for
 *	another SM refused;
 *	with AQL_HIL=1 (tests/hil/run, the real driver) N is the number of
 *	devices the driver reports;
 *   test_cuda_agent --expect REASON
 *	aql_agent_count(NVIDIA) fails for REASON (nolib, stub, old,
 *	nodevice, hidden), every later call the same way, and the CPU agent
 *	works all the same;
 *   test_cuda_agent --isolated TARGET REASON
 *	as --expect, in a child whose LD_LIBRARY_PATH is a fresh directory
 *	holding libcuda.so.1 -> TARGET, or nothing for TARGET "-".
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <aql/aql.h>

#include "helpers.h"
#include "cuda_emu/aqlemu.h"
#include "nv/nv.h"

static aql_agent *open_nv(uint32_t index)
{
	aql_agent *agent = NULL;
	aql_status st = aql_agent_open(AQL_AGENT_NVIDIA, index, &agent);

	if (st != AQL_OK) {
		fprintf(stderr, "aql_agent_open(NVIDIA, %u): %s: %s\n", index, aql_status_str(st),
			aql_error_message());
		exit(1);
	}
	return agent;
}

static void test_info(uint32_t devices, int memops)
{
	aql_agent_info info;
	uint32_t count = 0;
	aql_agent *agent, *none = NULL;

	CHECK_OK(aql_agent_count(AQL_AGENT_NVIDIA, &count));
	CHECK(count == devices, "%u devices, expected %u", count, devices);
	CHECK(aql_agent_open(AQL_AGENT_NVIDIA, devices, &none) == AQL_ERR_INVALID_ARG && !none,
	      "agent %u of %u opened", devices, devices);
	CHECK(th_error_has("does not exist"), "out-of-range index message");
	for (uint32_t i = 0; i < devices; i++) {
		agent = open_nv(i);
		CHECK_OK(aql_agent_get_info(agent, &info));
		CHECK(info.kind == AQL_AGENT_NVIDIA, "kind %d", info.kind);
		CHECK(info.device_index == i, "device_index %u, expected %u", info.device_index, i);
		CHECK(info.name[0] != 0, "empty name");
		CHECK(strncmp(info.isa, "sm_", 3) == 0 && info.isa[3] >= '1' && info.isa[3] <= '9',
		      "isa \"%s\"", info.isa);
		CHECK(info.compute_units > 0, "%u SMs", info.compute_units);
		CHECK(info.wavefront_size == 32, "warp of %u", info.wavefront_size);
		CHECK(info.max_workgroup_size >= 64 && info.max_workgroup_size <= 1024 &&
		      info.max_workgroup_dim[0] == info.max_workgroup_size &&
		      info.max_workgroup_dim[2] > 0 && info.max_workgroup_dim[2] <= info.max_workgroup_size,
		      "work-group %u (%u, %u, %u)", info.max_workgroup_size,
		      info.max_workgroup_dim[0], info.max_workgroup_dim[1], info.max_workgroup_dim[2]);
		/* Grid limits are in work-items: blocks times the block limit. */
		CHECK(info.max_grid_dim[0] == UINT32_MAX &&
		      info.max_grid_dim[1] % info.max_workgroup_dim[1] == 0 &&
		      info.max_grid_dim[1] / info.max_workgroup_dim[1] >= 65535 &&
		      info.max_grid_dim[2] % info.max_workgroup_dim[2] == 0,
		      "grid (%u, %u, %u)", info.max_grid_dim[0], info.max_grid_dim[1],
		      info.max_grid_dim[2]);
		CHECK(info.default_group_segment_size == 48u << 10 &&
		      info.max_group_segment_size >= info.default_group_segment_size,
		      "LDS %u by default, %u at most", info.default_group_segment_size,
		      info.max_group_segment_size);
		CHECK(info.max_private_segment_size == 512u << 10, "private %u",
		      info.max_private_segment_size);
		CHECK(info.memory_size > 0 && !info.unified_memory, "memory %llu, unified %u",
		      (unsigned long long)info.memory_size, info.unified_memory);
		CHECK(info.numa_node >= -1, "NUMA node %d", info.numa_node);
		CHECK(info.signal_path == (memops ? AQL_SIGNAL_PATH_DEVICE :
						    AQL_SIGNAL_PATH_HOST_CALLBACK),
		      "signal path %u with memory operations %s", info.signal_path,
		      memops ? "on" : "off");
		CHECK(info.driver_version >= NV_MIN_DRIVER_VERSION, "driver %u",
		      info.driver_version);
		CHECK(info.max_queue_size > 0 && info.queue_features != 0, "queues");
		CHECK(nv_agent_of(agent)->mem_ops == memops, "mem_ops %d", nv_agent_of(agent)->mem_ops);
		CHECK_OK(aql_agent_destroy(agent));
	}
	/* The default agent stays the CPU agent with a GPU present. */
	agent = NULL;
	CHECK_OK(aql_agent_default(&agent));
	CHECK(agent && aql_agent_get_info(agent, &info) == AQL_OK && info.kind == AQL_AGENT_CPU,
	      "the default agent is kind %d", info.kind);
}

#define ROUND_BYTES ((size_t)3 << 20)

/* Write, copy on the device, read back: every direction of copy(). */
static void round_trip(aql_agent *agent)
{
	uint32_t *host = malloc(ROUND_BYTES), *back = malloc(ROUND_BYTES);
	void *d0 = NULL, *d1 = NULL;
	size_t n = ROUND_BYTES / sizeof(*host), bad = n;

	if (!host || !back)
		th_stop("no memory");
	CHECK_OK(aql_agent_mem_alloc(agent, ROUND_BYTES, &d0));
	CHECK_OK(aql_agent_mem_alloc(agent, ROUND_BYTES, &d1));
	if (!d0 || !d1)
		th_stop("no agent memory");
	CHECK(d0 != d1, "two allocations at %p", d0);
	/* Agent memory starts zeroed. */
	memset(back, 0xab, ROUND_BYTES);
	CHECK_OK(aql_agent_copy(agent, back, d1, ROUND_BYTES));
	for (size_t i = 0; i < n && bad == n; i++)
		if (back[i])
			bad = i;
	CHECK(bad == n, "fresh agent memory holds 0x%x at word %zu", back[bad], bad);
	for (size_t i = 0; i < n; i++)
		host[i] = (uint32_t)(i * 2654435761u);
	CHECK_OK(aql_agent_copy(agent, d0, host, ROUND_BYTES));
	CHECK_OK(aql_agent_copy(agent, d1, d0, ROUND_BYTES));
	memset(back, 0, ROUND_BYTES);
	CHECK_OK(aql_agent_copy(agent, back, d1, ROUND_BYTES));
	CHECK(memcmp(host, back, ROUND_BYTES) == 0, "device round trip changed the bytes");
	/* An unaligned part, and host to host. */
	CHECK_OK(aql_agent_copy(agent, (char *)d0 + 3, (char *)host + 1001, 4097));
	CHECK_OK(aql_agent_copy(agent, (char *)back + 5, (char *)d0 + 3, 4097));
	CHECK(memcmp((char *)back + 5, (char *)host + 1001, 4097) == 0, "unaligned copy");
	CHECK_OK(aql_agent_copy(agent, back, host + 1, 64));
	CHECK(memcmp(back, host + 1, 64) == 0, "host-to-host copy");
	aql_agent_mem_free(agent, d0);
	aql_agent_mem_free(agent, d1);
	free(host);
	free(back);
}

static void *thread_main(void *arg)
{
	round_trip(arg);
	return NULL;
}

/* A thread that never touched the driver has no current context: the
 * agent must make its own current (the emulation, as the driver, fails
 * with INVALID_CONTEXT otherwise). */
static void test_fresh_thread(aql_agent *agent)
{
	pthread_t t;
	int err;

	round_trip(agent);
	/* The checks' tally is not atomic: nothing else checks meanwhile. */
	err = pthread_create(&t, NULL, thread_main, agent);
	if (!err)
		pthread_join(t, NULL);
	CHECK(err == 0, "pthread_create: %s", strerror(err));
}

static int registered(struct nv_agent *a, const void *p, size_t size)
{
	unsigned int type = 0;

	return nv_enter(a) == AQL_OK &&
	       a->cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					    (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
	       type == CU_MEMORYTYPE_HOST && nv_host_reachable(a, p, size);
}

/* aql's own memory becomes reachable on first use; other memory does not. */
static void test_registration(aql_agent *agent)
{
	struct nv_agent *a = nv_agent_of(agent);
	aql_mem_pool *pool = NULL;
	aql_signal *signal = th_signal(1);
	char *small = NULL, *big = NULL, *heap = malloc(1 << 16);
	uint32_t ranges;

	CHECK_OK(aql_mem_pool_data(AQL_MEM_COARSE_GRAINED, &pool));
	CHECK_OK(aql_mem_alloc(pool, 256, 0, (void **)&small));
	CHECK_OK(aql_mem_alloc(pool, 300000, 0, (void **)&big));
	if (!small || !big || !heap)
		th_stop("no memory");
	CHECK(!nv_host_reachable(a, heap, 4096), "malloc'd memory counts as reachable");
	CHECK(nv_host_reachable(a, small + 16, 64), "a pool block is not made reachable");
	CHECK(registered(a, small, 256), "the pool block is not registered with the driver");
	ranges = a->range_count;
	CHECK(nv_host_reachable(a, small, 256) && a->range_count == ranges,
	      "a second use registered again (%u ranges, then %u)", ranges, a->range_count);
	CHECK(nv_host_reachable(a, big, 300000) && registered(a, big + 299999, 1),
	      "a large block is not registered to its end");
	CHECK(!nv_host_reachable(a, big + 299000, 100000), "a range past its block counts");
	/* A pool of the caller's may be destroyed under a registration. */
	{
		aql_mem_pool_config c = { .kind = AQL_MEM_COARSE_GRAINED,
					  .numa_node = AQL_NUMA_ANY, .max_size = 8 << 20 };
		aql_mem_pool *mine = NULL;
		void *q = NULL;

		CHECK_OK(aql_mem_pool_create(&c, &mine));
		CHECK_OK(aql_mem_alloc(mine, 4096, 0, &q));
		CHECK(q && !nv_host_reachable(a, q, 4096),
		      "a block of a pool without an agent list was registered");
		aql_mem_free(q);
		CHECK_OK(aql_mem_pool_destroy(mine));
	}
	for (uint32_t i = 1; i < a->range_count; i++)
		CHECK(a->ranges[i - 1].end <= a->ranges[i].start, "ranges %u and %u overlap",
		      i - 1, i);
	CHECK_OK(nv_signal_reach(a, signal));
	CHECK(registered(a, signal, sizeof(*signal)), "the signal's page is not registered");
	/* Explicit registration, as pools with an agent list do, and its undo. */
	CHECK_OK(agent->ops->mem_register(agent, heap, 1 << 16));
	CHECK(registered(a, heap + 4096, 4096), "mem_register did not register");
	ranges = a->range_count;
	agent->ops->mem_unregister(agent, (void *)((uintptr_t)heap & ~(uintptr_t)4095),
				   (1 << 16) + 4096);
	CHECK(a->range_count < ranges && !nv_host_reachable(a, heap + 4096, 4096),
	      "mem_unregister left the range registered");
	aql_mem_free(small);
	aql_mem_free(big);
	aql_signal_destroy(signal);
	free(heap);
}

/* A pool open to the agent registers what it commits, and gives it back
 * when destroyed. */
static void test_pool_agents(aql_agent *agent)
{
	aql_mem_pool_config c = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
				  .agents = &agent, .agent_count = 1, .max_size = 64 << 20 };
	aql_mem_pool *pool = NULL;
	void *p = NULL;

	CHECK_OK(aql_mem_pool_create(&c, &pool));
	CHECK_OK(aql_mem_alloc(pool, 4096, 0, &p));
	CHECK(p && registered(nv_agent_of(agent), p, 4096), "pool memory is not registered");
	aql_mem_free(p);
	CHECK_OK(aql_mem_pool_destroy(pool));
	CHECK(!p || !nv_host_reachable(nv_agent_of(agent), p, 4096),
	      "a destroyed pool's memory stays registered");
}

/* A header any PTX reader refuses: the parameter list never closes. */
static const char bad_header_ptx[] =
	".version 7.8\n"
	".target sm_75\n"
	".address_size 64\n"
	".visible .entry saxpy(.param .u64 p\n"
	"{\n"
	"\tret;\n"
	"}\n";

/* A good header over a body only a PTX assembler reads: the driver's JIT
 * (the emulation: the toolkit's nvJitLink, when installed). */
static const char bad_body_ptx[] =
	".version 7.8\n"
	".target sm_75\n"
	".address_size 64\n"
	".visible .entry saxpy(.param .u64 p)\n"
	"{\n"
	"\tnot_an_instruction %r1;\n"
	"\tret;\n"
	"}\n";

/* PTX modules the emulation checked with nvJitLink so far, or -1 if
 * libcuda.so.1 is a real driver, whose JIT reads every body. */
static int64_t emu_jit_links(void)
{
	struct aqlemu_stats s = { 0 };
	void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
	aqlemu_stats_fn fn = NULL;

	if (h)
		*(void **)&fn = dlsym(h, "aqlemu_stats");
	if (fn)
		fn(&s);
	if (h)
		dlclose(h);
	return fn ? (int64_t)s.ptx_jit_links : -1;
}

static aql_status load_module(aql_agent *agent, const void *image, size_t size,
			      struct aql_module_load *load, const char *const *names,
			      const uint32_t *kernarg, uint64_t *objects, uint32_t *lds,
			      uint32_t *wg)
{
	*load = (struct aql_module_load){
		.image = image, .size = size, .kernel_count = 1, .kernel_names = names,
		.kernarg_sizes = kernarg, .kernel_objects = objects,
		.group_segment_sizes = lds, .max_workgroup_sizes = wg,
	};
	return agent->ops->module_load(agent, AQL_CODE_OBJECT_PTX, load);
}

static void test_modules(aql_agent *agent, const char *ptx_path)
{
	static const char *const names[] = { "saxpy" };
	static const uint32_t kernarg[] = { 32 };
	struct aql_module_load load;
	uint64_t objects[1] = { 0 };
	uint32_t lds[1] = { 0 }, wg[1] = { 0 };
	const struct nv_kernel *k;
	int64_t links;
	aql_status st;
	size_t size;
	char *ptx;
	void *mem = NULL;

	st = load_module(agent, bad_header_ptx, sizeof(bad_header_ptx) - 1, &load, names, kernarg,
			 objects, lds, wg);
	CHECK(st == AQL_ERR_INVALID_CODE_OBJECT, "bad PTX header: %s: %s", aql_status_str(st),
	      aql_error_message());
	CHECK(th_error_has("CUDA_ERROR_INVALID_PTX") && th_error_has("JIT log: ") &&
	      th_error_has("cuModuleLoadDataEx"), "bad PTX header message");
	printf("bad header: %s\n", aql_error_message());
	links = emu_jit_links();
	st = load_module(agent, bad_body_ptx, sizeof(bad_body_ptx) - 1, &load, names, kernarg,
			 objects, lds, wg);
	if (links >= 0 && emu_jit_links() == links) {
		printf("note: no nvJitLink here, so the emulation reads no PTX bodies; the JIT log of a bad body is not checked\n");
		if (st == AQL_OK)
			agent->ops->module_unload(agent, load.base);
	} else {
		CHECK(st == AQL_ERR_INVALID_CODE_OBJECT, "bad PTX body: %s: %s",
		      aql_status_str(st), aql_error_message());
		CHECK(th_error_has("JIT log: ") && th_error_has("not_an_instruction"),
		      "the JIT log of a bad body is not in the message");
		printf("bad body: %s\n", aql_error_message());
	}
	CHECK(agent->ops->code_alloc(agent, AQL_CODE_OBJECT_HOST, 4096, &mem) ==
	      AQL_ERR_UNSUPPORTED && th_error_has("not host"), "code_alloc for a host object");

	if (!ptx_path) {
		printf("note: no PTX of saxpy was built (no clang targets nvptx64); module loads of valid PTX not checked\n");
		return;
	}
	ptx = th_read_file(ptx_path, &size);
	/* Without its NUL: the agent must terminate the text itself. */
	CHECK_OK(load_module(agent, ptx, size, &load, names, kernarg, objects, lds, wg));
	if (load.base) {
		k = (const struct nv_kernel *)(uintptr_t)objects[0];
		CHECK((uintptr_t)k >= (uintptr_t)load.base &&
		      (uintptr_t)(k + 1) <= (uintptr_t)load.base + load.base_size,
		      "kernel_object outside base");
		CHECK(k->fn && strcmp(k->name, "saxpy") == 0 && k->kernarg_size == 32,
		      "kernel %s, %u kernarg bytes", k->name, k->kernarg_size);
		CHECK(k->max_threads > 0 && wg[0] == k->max_threads && lds[0] == k->static_lds,
		      "outputs: work-group %u, LDS %u", wg[0], lds[0]);
		CHECK(nv_agent_of(agent)->modules == 1, "%u modules", nv_agent_of(agent)->modules);
		agent->ops->module_unload(agent, load.base);
		CHECK(nv_agent_of(agent)->modules == 0, "%u modules after unload",
		      nv_agent_of(agent)->modules);
	}
	/* A kernel the module lacks. */
	st = load_module(agent, ptx, size, &load, (const char *const[]){ "no_such_kernel" },
			 kernarg, objects, lds, wg);
	CHECK(st == AQL_ERR_NOT_FOUND && th_error_has("no_such_kernel"), "missing kernel: %s: %s",
	      aql_status_str(st), aql_error_message());
	CHECK(nv_agent_of(agent)->modules == 0, "a failed load left a module");
	/* A leaked module is freed with the agent (ASan checks). */
	CHECK_OK(load_module(agent, ptx, size, &load, (const char *const[]){ "saxpy" }, kernarg,
			     objects, lds, wg));
	free(ptx);
}

/* ---- cubins and fatbins ---- */

/* Whether code for sm runs on a device of sm dev: same major, minor no newer. */
static int runs_on(uint32_t sm, uint32_t dev)
{
	return sm / 10 == dev / 10 && sm % 10 <= dev % 10;
}

/* saxpy from co on agent through a typed launch: y = a * x + y. */
static void run_saxpy(aql_agent *agent, aql_code_object *co, const char *what)
{
	enum { N = 1000 };
	aql_queue_config config = { .size = 64, .type = AQL_QUEUE_MULTI,
				    .full_timeout_ns = TH_TIMEOUT_NS };
	aql_launch_config cfg = { .grid = { N } };
	const aql_kernel *k = NULL;
	aql_completion done;
	aql_queue *q = NULL;
	aql_buf *x = NULL, *y = NULL;
	aql_status st;
	uint32_t bad = 0;

	CHECK_OK(aql_code_object_kernel(co, "saxpy", &k));
	CHECK_OK(aql_queue_create(agent, &config, &q));
	CHECK_OK(aql_buf_create(AQL_TYPE(float), N, AQL_IN, NULL, &x));
	CHECK_OK(aql_buf_create(AQL_TYPE(float), N, AQL_INOUT, NULL, &y));
	if (!k || !q || !x || !y)
		th_stop("saxpy: no kernel, queue or buffers");
	for (uint32_t i = 0; i < N; i++) {
		aql_buf_data(x, float)[i] = (float)i;
		aql_buf_data(y, float)[i] = 1.0f;
	}
	/* The description's types are checked: a double is not the float a. */
	st = AQL_LAUNCH(q, k, &cfg, &done, AQL_ARG(2.0), AQL_ARG(x), AQL_ARG(y), AQL_ARG((uint32_t)N));
	CHECK(st == AQL_ERR_INVALID_ARG && th_error_has("'a'"), "%s: a double for float a: %s: %s",
	      what, aql_status_str(st), aql_error_message());
	CHECK_OK(AQL_LAUNCH(q, k, &cfg, &done, AQL_ARG(2.0f), AQL_ARG(x), AQL_ARG(y),
			    AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	for (uint32_t i = 0; i < N; i++)
		bad += aql_buf_data(y, float)[i] != 2.0f * (float)i + 1.0f;
	CHECK(bad == 0, "%s: %u of %u results wrong", what, bad, N);
	CHECK_OK(aql_buf_destroy(x));
	CHECK_OK(aql_buf_destroy(y));
	CHECK_OK(aql_queue_destroy(q));
}

static void test_binaries(aql_agent *agent, const char *dir)
{
	static const struct { const char *file; uint32_t sm; } files[] = {
		{ "saxpy.sm_80.cubin", 80 }, { "saxpy.sm_90.cubin", 90 },
		{ "saxpy.sm_100.cubin", 100 }, { "saxpy.fatbin", 0 },
		{ "saxpy.zstd.fatbin", 0 }, { "saxpy.ptx.fatbin", 0 },
	};
	aql_agent_info info;
	uint32_t dev;

	aql_agent_get_info(agent, &info);
	dev = (uint32_t)atoi(info.isa + 3);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[4096];
		aql_code_object *co = NULL;
		aql_status st;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i].file);
		st = aql_code_object_load_file(agent, path, NULL, &co);
		/* Each fatbin holds PTX for sm_75, which any device here runs. */
		if (!files[i].sm || runs_on(files[i].sm, dev)) {
			CHECK(st == AQL_OK, "%s on %s: %s: %s", files[i].file, info.isa,
			      aql_status_str(st), aql_error_message());
			if (co) {
				CHECK(aql_code_object_get_info(co)->kind == AQL_CODE_OBJECT_CUBIN,
				      "%s: kind %d", files[i].file, aql_code_object_get_info(co)->kind);
				run_saxpy(agent, co, files[i].file);
			}
		} else {
			char want[128];

			snprintf(want, sizeof(want), "the device is %s, the image is a cubin for sm_%u",
				 info.isa, files[i].sm);
			CHECK(st == AQL_ERR_INVALID_CODE_OBJECT && !co &&
			      th_error_has("CUDA_ERROR_NO_BINARY_FOR_GPU") && th_error_has(want),
			      "%s on %s: %s: %s", files[i].file, info.isa, aql_status_str(st),
			      aql_error_message());
			printf("%s: %s\n", files[i].file, aql_error_message());
		}
		aql_code_object_destroy(co);
	}
}

/* ---- no agent ---- */

struct reason {
	const char *name;
	aql_status status;
	const char *needle[2];
};

static const struct reason reasons[] = {
	{ "nolib", AQL_ERR_NOT_FOUND, { "no NVIDIA driver is installed", "libcuda.so.1" } },
	{ "stub", AQL_ERR_UNSUPPORTED, { "stub library, not a driver", "libcuda.so.1 at /" } },
	{ "old", AQL_ERR_UNSUPPORTED, { "supports CUDA 11.8", "needs CUDA 12.0" } },
	{ "nodevice", AQL_ERR_NOT_FOUND, { "finds no GPU", "nvidia-smi" } },
	{ "hidden", AQL_ERR_NOT_FOUND, { "CUDA_VISIBLE_DEVICES=\"", "hides every NVIDIA device" } },
};

static int expect(const char *name)
{
	const struct reason *r = NULL;
	char first[512];
	uint32_t count = 7;
	aql_agent *agent = NULL, *cpu = NULL;
	aql_agent_info info;
	aql_status st;
	void *lib;

	for (size_t i = 0; i < sizeof(reasons) / sizeof(*reasons); i++)
		if (strcmp(reasons[i].name, name) == 0)
			r = &reasons[i];
	if (!r) {
		fprintf(stderr, "unknown reason %s\n", name);
		return 1;
	}
	st = aql_agent_count(AQL_AGENT_NVIDIA, &count);
	if (!strcmp(name, "nolib") && st != AQL_ERR_NOT_FOUND &&
	    (lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) {
		dlclose(lib);
		printf("SKIP: a libcuda.so.1 outside LD_LIBRARY_PATH is installed here, so the no-driver case cannot be made\n");
		return 77;
	}
	CHECK(st == r->status, "%s: %s: %s", name, aql_status_str(st), aql_error_message());
	CHECK(count == 7, "count written on failure");
	for (int i = 0; i < 2; i++)
		CHECK(th_error_has(r->needle[i]), "%s message", name);
	CHECK(th_error_has("no NVIDIA agent: "), "prefix");
	snprintf(first, sizeof(first), "%s", aql_error_message());
	printf("%s: %s\n", name, first);
	/* The reason is kept: opening fails the same way. */
	st = aql_agent_open(AQL_AGENT_NVIDIA, 0, &agent);
	CHECK(st == r->status && !agent && strcmp(aql_error_message(), first) == 0,
	      "open: %s: %s", aql_status_str(st), aql_error_message());
	/* Other agents work. */
	CHECK_OK(aql_agent_count(AQL_AGENT_CPU, &count));
	CHECK_OK(aql_agent_open(AQL_AGENT_CPU, 0, &cpu));
	CHECK(cpu && aql_agent_get_info(cpu, &info) == AQL_OK && info.kind == AQL_AGENT_CPU,
	      "CPU agent");
	if (cpu) {
		aql_queue *q = th_queue(64, AQL_QUEUE_SINGLE, 0);
		aql_signal *done = th_signal(1);
		static uint64_t counter;
		static struct th_count_args args __attribute__((aligned(16))) = { &counter };
		aql_dispatch_packet p = th_dispatch1(&th_count_kd, &args, done);

		CHECK_OK(th_submit(q, &p));
		CHECK(th_wait_done(done) == 0 && counter == 1, "dispatch on the CPU agent: %s",
		      th_last_error);
		aql_signal_destroy(done);
		CHECK_OK(aql_queue_destroy(q));
		CHECK_OK(aql_agent_destroy(cpu));
	}
	return th_finish();
}

/* Run ourselves with LD_LIBRARY_PATH a directory of our making. */
static int isolated(const char *self, const char *target, const char *reason)
{
	char dir[] = "/tmp/aql-cuda-XXXXXX", link[PATH_MAX];
	int status = 0, ok;
	pid_t pid;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(link, sizeof(link), "%s/libcuda.so.1", dir);
	ok = strcmp(target, "-") == 0 || symlink(target, link) == 0;
	if (ok && (pid = fork()) == 0) {
		setenv("LD_LIBRARY_PATH", dir, 1);
		execl(self, self, "--expect", reason, (char *)NULL);
		_exit(127);
	}
	if (ok && waitpid(pid, &status, 0) != pid)
		ok = 0;
	if (strcmp(target, "-") != 0)
		unlink(link);
	rmdir(dir);
	if (!ok) {
		fprintf(stderr, "isolated run for %s failed: %s\n", reason, strerror(errno));
		return 1;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv)
{
	uint32_t devices = 1;
	int memops = 1;
	const char *ptx = NULL, *nv = NULL;
	aql_agent *agent;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect") && i + 1 < argc)
			return expect(argv[i + 1]);
		if (!strcmp(argv[i], "--isolated") && i + 2 < argc)
			return isolated(argv[0], argv[i + 1], argv[i + 2]);
		if (!strcmp(argv[i], "--devices") && i + 1 < argc)
			devices = (uint32_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-memops"))
			memops = 0;
		else if (!strcmp(argv[i], "--ptx") && i + 1 < argc)
			ptx = argv[++i];
		else if (!strcmp(argv[i], "--nv") && i + 1 < argc)
			nv = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--devices N] [--no-memops] [--ptx FILE] [--nv DIR] | --expect REASON | --isolated TARGET REASON\n",
				argv[0]);
			return 1;
		}
	}
	if (getenv("AQL_HIL") && !strcmp(getenv("AQL_HIL"), "1")) {
		/* The device count is the machine's; at least one, or tests/hil
		 * would not have run this. */
		CHECK_OK(aql_agent_count(AQL_AGENT_NVIDIA, &devices));
		if (!devices)
			th_stop("AQL_HIL=1 and no NVIDIA device");
		printf("note: AQL_HIL=1: %u devices, as the driver reports\n", devices);
	}
	test_info(devices, memops);
	agent = open_nv(devices - 1);
	test_fresh_thread(agent);
	test_registration(agent);
	test_pool_agents(agent);
	test_modules(agent, ptx);
	if (nv)
		test_binaries(agent, nv);
	CHECK_OK(aql_agent_destroy(agent));
	return th_finish();
}
