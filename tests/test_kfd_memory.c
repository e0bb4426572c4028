/* SPDX-License-Identifier: MIT */
/*
 * Memory of the AMD agent (aql/kfd/memory.c) on the KFD emulation
 * (AQL_KFD_SYS): the emulation's BO table shows what the agent asked of
 * amdkfd. Not run on hardware.
 *
 *   test_kfd_memory [--hsaco PATH] [--small-bar]
 *	agent memory of several sizes is a VRAM BO, not host-visible, at
 *	the address aql returns; a pool listing the agent registers its
 *	pages as USERPTR BOs; a code object loads into host-visible code
 *	memory (VRAM on a large BAR, GTT on a small one); no BO is left.
 *   test_kfd_memory --expect enomem
 *	VRAM refused (AQL_KFD_EMU_FAIL=alloc_enomem:1, past the event page):
 *	AQL_ERR_NOMEM naming the agent and the free bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "aql/agent_impl.h"
#include "aql/kfd/kfd_abi.h"
#include "kfd_emu/kfdemu.h"

static uint32_t live_bos(void)
{
	struct kfdemu_stats s;

	CHECK(((kfdemu_stats_fn)th_kfdemu_sym("kfdemu_stats"))(&s) == 0, "kfdemu_stats");
	return s.bos;
}

static int bo_at(const void *p, struct kfdemu_bo *out)
{
	return ((kfdemu_bo_at_fn)th_kfdemu_sym("kfdemu_bo_at"))((uintptr_t)p, out);
}

static void check_agent_memory(aql_agent *agent)
{
	static const size_t sizes[] = { 1, 4096, 65536, 3u << 20 };
	void *p[4] = { 0 };
	struct kfdemu_bo b;
	uint32_t before;

	/* The first allocation makes the agent's copy queue too, which clears
	 * agent memory (aql/kfd/copy.c) and stays until the agent goes. */
	CHECK(aql_agent_mem_alloc(agent, 1, &p[0]) == AQL_OK, "a first allocation: %s",
	      aql_error_message());
	aql_agent_mem_free(agent, p[0]);
	before = live_bos();

	for (int i = 0; i < 4; i++) {
		CHECK(aql_agent_mem_alloc(agent, sizes[i], &p[i]) == AQL_OK && p[i],
		      "%zu bytes of agent memory: %s", sizes[i], aql_error_message());
		if (!p[i])
			continue;
		CHECK(bo_at(p[i], &b) == 0 && b.va == (uintptr_t)p[i],
		      "%zu bytes: a BO at %p", sizes[i], p[i]);
		CHECK(b.domain == KFDEMU_VRAM && !(b.flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC) &&
		      (b.flags & KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE),
		      "%zu bytes: domain %u, flags %#x", sizes[i], b.domain, b.flags);
		CHECK(b.size >= sizes[i] && b.size % 4096 == 0 && b.mapped,
		      "%zu bytes: BO of %llu bytes, mapped %#x", sizes[i],
		      (unsigned long long)b.size, b.mapped);
	}
	CHECK(live_bos() == before + 4, "%u BOs after 4 allocations", live_bos());
	for (int i = 0; i < 4; i++)
		aql_agent_mem_free(agent, p[i]);
	CHECK(live_bos() == before, "%u BOs left of %u", live_bos(), before);
}

static void check_pool(aql_agent *agent)
{
	aql_mem_pool_config cfg = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
				    .agents = &agent, .agent_count = 1 };
	aql_mem_pool *pool = NULL;
	struct kfdemu_bo b;
	uint32_t before = live_bos();
	char *p = NULL;

	CHECK(aql_mem_pool_create(&cfg, &pool) == AQL_OK, "pool: %s", aql_error_message());
	CHECK(aql_mem_alloc(pool, 10000, 64, (void **)&p) == AQL_OK && p, "pool allocation: %s",
	      aql_error_message());
	if (p) {
		CHECK(bo_at(p, &b) == 0 && b.domain == KFDEMU_USERPTR && b.mapped &&
		      b.userptr <= (uintptr_t)p && b.userptr + b.size >= (uintptr_t)p + 10000,
		      "pool memory %p is a USERPTR BO", (void *)p);
		memset(p, 0x5a, 10000);
		aql_mem_free(p);
	}
	CHECK(aql_mem_pool_destroy(pool) == AQL_OK, "pool destroy: %s", aql_error_message());
	CHECK(live_bos() == before, "%u BOs after the pool, %u before", live_bos(), before);
}

static void check_code(aql_agent *agent, const char *path, int small_bar)
{
	aql_code_object *co = NULL;
	const aql_code_object_info *in;
	struct kfdemu_bo b;
	uint32_t before = live_bos(), want;

	CHECK(aql_code_object_load_file(agent, path, NULL, &co) == AQL_OK && co, "loading %s: %s",
	      path, aql_error_message());
	if (!co)
		return;
	in = aql_code_object_get_info(co);
	CHECK(in->kernel_count > 0 && in->kernels[0].kernel_object >= (uintptr_t)in->base &&
	      in->kernels[0].kernel_object < (uintptr_t)in->base + in->size,
	      "%u kernels inside the code at %p", in->kernel_count, in->base);
	want = small_bar ? KFDEMU_GTT : KFDEMU_VRAM;
	CHECK(bo_at(in->base, &b) == 0 && b.va == (uintptr_t)in->base && b.domain == want &&
	      (b.flags & KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE) && b.mapped,
	      "code in a BO of domain %u (want %u), flags %#x", b.domain, want, b.flags);
	CHECK(small_bar || (b.flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC), "large-BAR code is PUBLIC");
	CHECK(aql_code_object_destroy(co) == AQL_OK, "destroy: %s", aql_error_message());
	CHECK(live_bos() == before, "%u BOs after unloading, %u before", live_bos(), before);
}

/* What the process keeps until exit: the event page, the signals' pages;
 * own: what of it goes with the agent (with --expect: its copy kernel). */
static uint32_t kept, own;

/* kept, after an agent came and went that made everything the process
 * keeps (its copy queue's signal too). */
static uint32_t kept_by_process(void)
{
	aql_agent *a = NULL;
	void *p = NULL;

	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &a) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	CHECK(a && aql_agent_mem_alloc(a, 1, &p) == AQL_OK, "a first allocation: %s",
	      aql_error_message());
	aql_agent_mem_free(a, p);
	CHECK(aql_agent_destroy(a) == AQL_OK, "destroy: %s", aql_error_message());
	return live_bos();
}

static void check_enomem(aql_agent *agent)
{
	void *p = NULL;

	CHECK(aql_agent_mem_alloc(agent, 1 << 20, &p) == AQL_ERR_NOMEM && !p, "refused VRAM");
	CHECK(th_error_has("VRAM exhausted on gfx") && th_error_has("agent 0") &&
	      th_error_has("bytes free"), "message: %s", aql_error_message());
	CHECK(live_bos() == kept, "%u BOs after a refusal, %u kept", live_bos(), kept);
}

int main(int argc, char **argv)
{
	const char *hsaco = NULL, *expect = NULL;
	aql_agent *agent = NULL;
	int small_bar = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--hsaco") && i + 1 < argc)
			hsaco = argv[++i];
		else if (!strcmp(argv[i], "--expect") && i + 1 < argc)
			expect = argv[++i];
		else if (!strcmp(argv[i], "--small-bar"))
			small_bar = 1;
		else
			th_stop("usage: test_kfd_memory [--hsaco PATH] [--small-bar] [--expect enomem]");
	}
	if (!expect)
		kept = kept_by_process();
	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	/* A refused allocation makes no copy queue. */
	if (expect) {
		kept = live_bos();
		own = agent->copy_args ? 1 : 0;
	}
	if (expect && !strcmp(expect, "enomem")) {
		check_enomem(agent);
	} else {
		check_agent_memory(agent);
		check_pool(agent);
		if (hsaco)
			check_code(agent, hsaco, small_bar);
		else
			th_skip("code objects", "no clang targeting amdgcn built a gfx90a kernel");
	}
	CHECK(aql_agent_destroy(agent) == AQL_OK, "destroy: %s", aql_error_message());
	CHECK(live_bos() == kept - own, "%u BOs left at exit, %u kept", live_bos(), kept - own);
	return th_finish();
}
