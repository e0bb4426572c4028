/* SPDX-License-Identifier: MIT */
/*
 * Interrupted ioctls (issue 22, item 3) on the KFD emulation: with
 * AQL_KFD_EMU_FAIL=ioctl_eintr:... and ioctl_eagain:... some ioctls fail
 * with EINTR or EAGAIN before any work, as a signal or a USERPTR race
 * makes them, and the agent (aql_kfd_ioctl) calls them again. Its whole
 * path runs: open (GET_VERSION, XNACK, ACQUIRE_VM, RUNTIME_ENABLE,
 * apertures, the event page and events), agent memory (ALLOC, MAP, the
 * clearing dispatch), registered host memory (USERPTR), a queue, a saxpy
 * dispatch where a clang built it, copies, a signal wait asleep in
 * WAIT_EVENTS until its timeout, and teardown (DESTROY_QUEUE, UNMAP,
 * FREE); every result is checked, and kfdemu_stats() must have counted
 * the failures it injected. Not run on hardware.
 *
 *   test_kfd_interrupted [--eintr] [--eagain] [--hsaco PATH]
 *	--eintr, --eagain: the kinds the run's setting injects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "aql/kfd/kfd_abi.h"
#include "kfd_emu/kfdemu.h"

static struct kfdemu_stats stats(void)
{
	struct kfdemu_stats s;

	CHECK(((kfdemu_stats_fn)th_kfdemu_sym("kfdemu_stats"))(&s) == 0, "kfdemu_stats");
	return s;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131 + seed * 7 + (i >> 9));
}

/* A pool listing the agent (USERPTR registrations) and a queue copy. */
static void check_pool(aql_agent *agent)
{
	aql_mem_pool_config pc = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
				   .agents = &agent, .agent_count = 1 };
	aql_queue_config qc = { .size = 64, .full_timeout_ns = TH_TIMEOUT_NS };
	unsigned char *in = NULL, *out = NULL;
	aql_mem_pool *pool = NULL;
	aql_queue *q = NULL;
	aql_completion c1, c2;
	void *v = NULL;

	CHECK_OK(aql_mem_pool_create(&pc, &pool));
	CHECK_OK(aql_mem_alloc(pool, 1 << 20, 64, (void **)&in));
	CHECK_OK(aql_mem_alloc(pool, 1 << 20, 64, (void **)&out));
	CHECK_OK(aql_agent_mem_alloc(agent, 1 << 20, &v));
	CHECK_OK(aql_queue_create(agent, &qc, &q));
	if (!in || !out || !v || !q)
		th_stop("no pool, queue or memory");
	fill(in, 1 << 20, 2);
	memset(out, 0, 1 << 20);
	CHECK_OK(aql_queue_copy(q, v, in, 1 << 20, NULL, 0, &c1));
	CHECK_OK(aql_queue_copy(q, out, v, 1 << 20, &c1, 1, &c2));
	CHECK_OK(th_done(aql_completion_wait(c2, TH_TIMEOUT_NS)));
	CHECK(!memcmp(in, out, 1 << 20), "a MiB through VRAM by queue copies");
	CHECK_OK(aql_queue_destroy(q));
	aql_agent_mem_free(agent, v);
	aql_mem_free(in);
	aql_mem_free(out);
	CHECK_OK(aql_mem_pool_destroy(pool));
}

/* A wait asleep in WAIT_EVENTS times out: not early, and not forever. */
static void check_wait_timeout(void)
{
	const uint64_t timeout = 200000000;	/* 200 ms */
	uint64_t waits = stats().ioctls[_IOC_NR(AMDKFD_IOC_WAIT_EVENTS)], t0, took;
	aql_signal *sig = NULL;
	aql_status st;

	CHECK_OK(aql_signal_create(1, &sig));
	if (!sig)
		return;
	t0 = th_now_ns();
	st = aql_signal_wait(sig, AQL_COND_EQ, 0, timeout, AQL_WAIT_BLOCKED, NULL);
	took = th_now_ns() - t0;
	CHECK(st == AQL_ERR_TIMEOUT && took >= timeout, "a wait of 200 ms: %s after %llu ms",
	      aql_status_str(st), (unsigned long long)(took / 1000000));
	CHECK(stats().ioctls[_IOC_NR(AMDKFD_IOC_WAIT_EVENTS)] > waits,
	      "the wait slept in WAIT_EVENTS");
	CHECK_OK(aql_signal_destroy(sig));
}

int main(int argc, char **argv)
{
	const char *hsaco = NULL;
	int eintr = 0, eagain = 0;
	aql_agent *agent = NULL;
	struct kfdemu_stats s;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--eintr"))
			eintr = 1;
		else if (!strcmp(argv[i], "--eagain"))
			eagain = 1;
		else if (!strcmp(argv[i], "--hsaco") && i + 1 < argc)
			hsaco = argv[++i];
		else
			th_stop("usage: test_kfd_interrupted [--eintr] [--eagain] [--hsaco PATH]");
	}
	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	th_check_agent_copies(agent, "with interrupted ioctls");
	check_pool(agent);
	if (hsaco)
		th_check_saxpy(agent, hsaco, "with interrupted ioctls");
	else
		th_skip("saxpy", "no clang here built it for the model");
	check_wait_timeout();
	CHECK_OK(aql_agent_destroy(agent));
	s = stats();
	fprintf(stderr, "%llu ioctls failed with EINTR, %llu with EAGAIN, all retried\n",
		(unsigned long long)s.ioctls_eintr, (unsigned long long)s.ioctls_eagain);
	CHECK(!eintr || s.ioctls_eintr > 0, "no ioctl was interrupted");
	CHECK(!eagain || s.ioctls_eagain > 0, "no ioctl failed with EAGAIN");
	CHECK(s.ioctls_failed == s.ioctls_eintr + s.ioctls_eagain,
	      "%llu ioctls failed, %llu of them injected", (unsigned long long)s.ioctls_failed,
	      (unsigned long long)(s.ioctls_eintr + s.ioctls_eagain));
	return th_finish();
}
