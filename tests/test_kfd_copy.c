/* SPDX-License-Identifier: MIT */
/*
 * Copies of the AMD agent (aql/kfd/copy.c) on the KFD emulation: the copy
 * kernel's GPU build dispatched by the agent, its host build
 * (AQL_KFD_EMU_KERNELS) run by the emulated command processor over VRAM
 * that the host cannot touch outside kernels. Not run on hardware.
 *
 * - agent memory comes zeroed (the emulation's fresh VRAM is not);
 * - aql_agent_copy() host to VRAM, VRAM to VRAM, VRAM to host, from and to
 *   host memory the GPU does not reach (staged) and from a pool that lists
 *   the agent; sizes and alignments that take each path of the kernel
 *   (16-byte body, unaligned head and tail, byte by byte), and nothing
 *   written outside the range; a copy larger than the staging buffer;
 * - VRAM stays PROT_NONE for the host after the copies;
 * - aql_queue_copy() chained by completions, a copy of 0 bytes, and the
 *   refusal of host memory the GPU does not reach, by name;
 * - two threads copying at once (TSan);
 * - with --hsaco (saxpy's build for the model): a typed launch of saxpy on
 *   typed buffers, which moves x and y to VRAM and y back by copy packets
 *   ordered with the dispatch in the queue.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <aql/aql.h>

#include "helpers.h"

#define BIG ((9u << 20) + 123)	/* over two staging buffers */

static aql_agent *agent;

/* Whether the host has [p, p + n) as one PROT_NONE mapping. */
static int host_sees_none(const void *p, size_t n)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long long lo, hi, a = (uintptr_t)p;
	char perms[8], line[512];
	int none = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) == 3 && lo <= a && a < hi) {
			none = a + n <= hi && !strcmp(perms, "---p");
			break;
		}
	if (f)
		fclose(f);
	return none;
}

/* host_sees_none(), within the test's timeout: the emulated CP lets go of
 * VRAM once it has run out of packets, just after their completions. */
static int eventually_none(const void *p, size_t n)
{
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	while (!host_sees_none(p, n)) {
		if (th_now_ns() > end)
			return 0;
		usleep(1000);
	}
	return 1;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131 + seed * 7 + (i >> 9));
}

/* Round trips host -> VRAM -> VRAM -> host for each size and alignment:
 * the bytes arrive, and the bytes around them stay. */
static void check_round_trips(void)
{
	static const size_t sizes[] = { 1, 15, 16, 17, 64, 4095, 65536 + 9 };
	static const size_t offsets[][2] = { { 0, 0 }, { 5, 5 }, { 3, 7 }, { 16, 1 } };
	size_t cap = 65536 + 64;
	unsigned char *src = malloc(cap), *dst = malloc(cap);
	void *v1 = NULL, *v2 = NULL;

	CHECK_OK(aql_agent_mem_alloc(agent, cap, &v1));
	CHECK_OK(aql_agent_mem_alloc(agent, cap, &v2));
	if (!src || !dst || !v1 || !v2)
		th_stop("no memory for the round trips");
	/* The emulation's fresh VRAM holds old bytes; the agent clears it. */
	memset(dst, 0xee, cap);
	CHECK_OK(aql_agent_copy(agent, dst, v2, cap));
	CHECK(dst[0] == 0 && !memcmp(dst, dst + 1, cap - 1), "fresh agent memory reads %#x",
	      dst[0]);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++) {
			size_t n = sizes[s], so = offsets[o][0], doff = offsets[o][1];
			unsigned char *v1b = (unsigned char *)v1 + doff;
			unsigned char *v2b = (unsigned char *)v2 + so;
			int bad_in = 0, bad_out = 0;

			fill(src, cap, (unsigned)(s * 8 + o));
			memset(dst, 0xee, cap);
			CHECK_OK(aql_agent_copy(agent, v1b, src + so, n));
			CHECK_OK(aql_agent_copy(agent, v2b, v1b, n));
			CHECK_OK(aql_agent_copy(agent, dst + doff, v2b, n));
			bad_in = memcmp(dst + doff, src + so, n) != 0;
			for (size_t i = 0; i < cap; i++)
				bad_out |= (i < doff || i >= doff + n) && dst[i] != 0xee;
			CHECK(!bad_in && !bad_out, "%zu bytes, source +%zu, destination +%zu: %s",
			      n, so, doff, bad_in ? "wrong bytes" : bad_out ? "bytes outside" : "ok");
		}
	CHECK(eventually_none(v1, cap) && eventually_none(v2, cap),
	      "VRAM is PROT_NONE for the host once the copies are done");
	aql_agent_mem_free(agent, v1);
	aql_agent_mem_free(agent, v2);
	free(src);
	free(dst);
}

/* More than the staging buffer holds, both ways. */
static void check_big(void)
{
	unsigned char *src = malloc(BIG), *dst = calloc(1, BIG);
	void *v = NULL;

	CHECK_OK(aql_agent_mem_alloc(agent, BIG, &v));
	if (!src || !dst || !v)
		th_stop("no memory for the big copy");
	fill(src, BIG, 3);
	CHECK_OK(aql_agent_copy(agent, v, src, BIG));
	CHECK_OK(aql_agent_copy(agent, dst, v, BIG));
	CHECK(!memcmp(src, dst, BIG), "%u bytes through the staging buffer", BIG);
	aql_agent_mem_free(agent, v);
	free(src);
	free(dst);
}

/* Queue copies from a pool the agent reaches, chained across two queues,
 * a copy of nothing, and host memory the GPU does not reach refused. */
static void check_queue_copies(void)
{
	aql_mem_pool_config pc = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
				   .agents = &agent, .agent_count = 1 };
	aql_queue_config qc = { .size = 64, .type = AQL_QUEUE_MULTI,
				.full_timeout_ns = TH_TIMEOUT_NS };
	aql_queue *q1 = NULL, *q2 = NULL;
	aql_mem_pool *pool = NULL;
	unsigned char *in = NULL, *out = NULL, *plain = malloc(4096);
	aql_completion c1, c2, c3, c0;
	void *v = NULL;

	CHECK_OK(aql_mem_pool_create(&pc, &pool));
	CHECK_OK(aql_mem_alloc(pool, 1 << 20, 64, (void **)&in));
	CHECK_OK(aql_mem_alloc(pool, 1 << 20, 64, (void **)&out));
	CHECK_OK(aql_agent_mem_alloc(agent, 1 << 20, &v));
	CHECK_OK(aql_queue_create(agent, &qc, &q1));
	CHECK_OK(aql_queue_create(agent, &qc, &q2));
	if (!in || !out || !v || !q1 || !q2 || !plain)
		th_stop("no queues or memory for the queue copies");
	fill(in, 1 << 20, 9);
	memset(out, 0, 1 << 20);
	CHECK_OK(aql_queue_copy(q1, v, in, 1 << 20, NULL, 0, &c1));
	CHECK_OK(aql_queue_copy(q2, out, v, 1 << 20, &c1, 1, &c2));
	CHECK_OK(aql_queue_copy(q2, out, in, 0, NULL, 0, &c3));
	CHECK_OK(th_done(aql_completion_wait(c3, TH_TIMEOUT_NS)));
	CHECK_OK(th_done(aql_completion_wait(c2, TH_TIMEOUT_NS)));
	CHECK(!memcmp(in, out, 1 << 20), "a MiB through VRAM on two queues");
	CHECK(aql_queue_copy(q1, v, plain, 4096, NULL, 0, &c0) == AQL_ERR_INVALID_ARG &&
	      th_error_has("source is host memory not registered") &&
	      th_error_has("aql_agent_copy() stages"),
	      "a queue copy from malloc memory: %s", aql_error_message());
	CHECK(aql_queue_copy(q1, plain, v, 4096, NULL, 0, &c0) == AQL_ERR_INVALID_ARG &&
	      th_error_has("destination is host memory"), "a queue copy to malloc memory: %s",
	      aql_error_message());
	CHECK_OK(aql_queue_destroy(q1));
	CHECK_OK(aql_queue_destroy(q2));
	aql_agent_mem_free(agent, v);
	aql_mem_free(in);
	aql_mem_free(out);
	CHECK_OK(aql_mem_pool_destroy(pool));
	free(plain);
}

struct copier {
	unsigned seed;
	int ok;
};

static void *copy_loop(void *arg)
{
	struct copier *c = arg;
	unsigned char src[3000], dst[3000];
	void *v = NULL;

	c->ok = aql_agent_mem_alloc(agent, sizeof(src), &v) == AQL_OK;
	for (int i = 0; i < 20 && c->ok; i++) {
		fill(src, sizeof(src), c->seed + (unsigned)i);
		c->ok = aql_agent_copy(agent, v, src, sizeof(src)) == AQL_OK &&
			aql_agent_copy(agent, dst, v, sizeof(dst)) == AQL_OK &&
			!memcmp(src, dst, sizeof(src));
	}
	aql_agent_mem_free(agent, v);
	return NULL;
}

static void check_threads(void)
{
	struct copier c[2] = { { 1, 0 }, { 2, 0 } };
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, copy_loop, &c[i]) == 0, "thread %d", i);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		CHECK(c[i].ok, "thread %d's copies: %s", i, aql_error_message());
	}
}

/* saxpy on typed buffers: x and y go to VRAM by copy packets before the
 * dispatch; y stays there until aql_buf_to_host() queues its copy back. */
static void check_typed_launch(const char *hsaco)
{
	enum { N = 1000 };
	aql_code_object *co = NULL;
	const aql_kernel *k = NULL;
	aql_queue_config qc = { .size = 64, .full_timeout_ns = TH_TIMEOUT_NS };
	aql_queue *q = NULL;
	aql_buf_f32 x, y;
	aql_completion done;
	aql_launch_stats stats;
	aql_launch_config c = { .grid = { N } };
	float *hx, *hy;
	int bad = 0;

	CHECK_OK(aql_queue_create(agent, &qc, &q));
	CHECK_OK(aql_code_object_load_file(agent, hsaco, NULL, &co));
	CHECK_OK(aql_code_object_kernel(co, "saxpy", &k));
	CHECK_OK(aql_buf_f32_create(N, AQL_IN, NULL, &x));
	CHECK_OK(aql_buf_f32_create(N, AQL_INOUT, NULL, &y));
	hx = aql_buf_f32_data(x);
	hy = aql_buf_f32_data(y);
	if (!q || !k || !hx || !hy)
		th_stop("saxpy or its buffers");
	for (int i = 0; i < N; i++) {
		hx[i] = (float)i;
		hy[i] = 1.0f;
	}
	CHECK_OK(AQL_LAUNCH(q, k, &c, &done, AQL_ARG(2.0f), AQL_ARG(x.raw), AQL_ARG(y.raw),
			    AQL_ARG((uint32_t)N)));
	CHECK_OK(aql_buf_to_host(y.raw, q, &done));
	CHECK_OK(th_done(aql_completion_wait(done, TH_TIMEOUT_NS)));
	CHECK_OK(aql_buf_wait(y.raw, TH_TIMEOUT_NS));
	hy = aql_buf_f32_data(y);
	for (int i = 0; hy && i < N; i++)
		bad += hy[i] != 2.0f * (float)i + 1.0f;
	CHECK(hy && !bad, "saxpy through VRAM: %d wrong", bad);
	CHECK_OK(aql_launch_get_stats(q, &stats));
	CHECK(stats.copies_in == 2 && stats.copies_out == 1 &&
	      stats.bytes_in == 2 * N * sizeof(float) && stats.bytes_out == N * sizeof(float),
	      "copies in %llu out %llu", (unsigned long long)stats.copies_in,
	      (unsigned long long)stats.copies_out);
	CHECK_OK(aql_buf_destroy(x.raw));
	CHECK_OK(aql_buf_destroy(y.raw));
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_code_object_destroy(co));
}

int main(int argc, char **argv)
{
	const char *hsaco = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--hsaco") && i + 1 < argc)
			hsaco = argv[++i];
		else
			th_stop("usage: test_kfd_copy [--hsaco PATH]");
	}
	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	check_round_trips();
	check_big();
	check_queue_copies();
	check_threads();
	if (hsaco)
		check_typed_launch(hsaco);
	else
		th_skip("a typed launch", "no clang here built saxpy for the model");
	CHECK_OK(aql_agent_destroy(agent));
	return th_finish();
}
