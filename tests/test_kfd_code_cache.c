/* SPDX-License-Identifier: MIT */
/*
 * The GPU's code caches after loading (issue 22, aql/kfd/README.md "Code
 * caches"). The emulated CP (tests/kfd_emu/cache.c) runs what the
 * instruction, scalar and L2 caches held at the last PM4 ACQUIRE_MEM that
 * invalidated them, as a GPU may: code written since runs stale. So the
 * test loads saxpy, runs it, unloads it, loads transpose at the same
 * address (the code allocator hands the range back: checked), and runs
 * transpose: right only if the load invalidated the caches after writing.
 *
 * --expect fail, with AQL_KFD_EMU_FAIL=create_queue: the agent's own
 * queue cannot be made, so the invalidation fails; the load fails naming
 * the agent and why, and leaves no BO behind. Not run on hardware; on
 * it (AQL_HIL=1) the reload is the check that the invalidation packet
 * runs and the new code is seen.
 */
#include <stdio.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "kfd_emu/kfdemu.h"

enum { N = 1000, W = 37, H = 23 };

static aql_agent *agent;
static kfdemu_stats_fn stats_fn;

static struct kfdemu_stats stats(void)
{
	struct kfdemu_stats s;

	CHECK(stats_fn(&s) == 0, "kfdemu_stats");
	return s;
}

static aql_code_object *load(const char *path, const char *name, const aql_kernel **k)
{
	aql_code_object *co = NULL;

	CHECK_OK(aql_code_object_load_file(agent, path, NULL, &co));
	if (co)
		CHECK_OK(aql_code_object_kernel(co, name, k));
	if (!co || !*k)
		th_stop("a kernel of the code objects named");
	return co;
}

static void check_reload(const char *saxpy, const char *transpose)
{
	aql_queue_config qc = { .size = 64, .full_timeout_ns = TH_TIMEOUT_NS };
	aql_launch_config cs = { .grid = { N } }, ct = { .grid = { W, H } };
	const aql_kernel *k = NULL;
	aql_code_object *co;
	aql_completion done;
	aql_queue *q = NULL;
	aql_buf_f32 x, y;
	aql_buf_u32 in;
	aql_buf_u64 out;
	float *hx, *hy;
	uint32_t *hin;
	uint64_t *hout;
	void *base;
	int bad = 0;

	CHECK_OK(aql_queue_create(agent, &qc, &q));
	CHECK_OK(aql_buf_f32_create(N, AQL_IN, NULL, &x));
	CHECK_OK(aql_buf_f32_create(N, AQL_INOUT, NULL, &y));
	CHECK_OK(aql_buf_u32_create(W * H, AQL_IN, NULL, &in));
	CHECK_OK(aql_buf_u64_create(W * H, AQL_OUT, NULL, &out));
	hx = aql_buf_f32_data(x);
	hy = aql_buf_f32_data(y);
	hin = aql_buf_u32_data(in);
	if (!q || !hx || !hy || !hin)
		th_stop("the queue or the buffers");
	for (int i = 0; i < N; i++) {
		hx[i] = (float)i;
		hy[i] = 1.0f;
	}
	for (int i = 0; i < W * H; i++)
		hin[i] = (uint32_t)i * 3u;

	/* A: saxpy, run, unloaded */
	co = load(saxpy, "saxpy", &k);
	base = aql_code_object_get_info(co)->base;
	CHECK_OK(AQL_LAUNCH(q, k, &cs, &done, AQL_ARG(2.0f), AQL_ARG(x.raw), AQL_ARG(y.raw),
			    AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_DONE(aql_buf_wait(y.raw, TH_TIMEOUT_NS));
	hy = aql_buf_f32_data(y);
	for (int i = 0; hy && i < N; i++)
		bad += hy[i] != 2.0f * (float)i + 1.0f;
	CHECK(hy && !bad, "saxpy: %d of %d wrong", bad, N);
	CHECK_OK(aql_code_object_destroy(co));

	/* B: transpose, at the address saxpy's code had */
	k = NULL;
	co = load(transpose, "transpose", &k);
	CHECK(aql_code_object_get_info(co)->base == base,
	      "transpose loaded at %p, saxpy was at %p: the test needs the range reused",
	      aql_code_object_get_info(co)->base, base);
	CHECK_OK(AQL_LAUNCH(q, k, &ct, &done, AQL_ARG((uint8_t)2), AQL_ARG(in.raw),
			    AQL_ARG((uint16_t)W), AQL_ARG((uint64_t)5), AQL_ARG((uint32_t)H),
			    AQL_ARG(0.5), AQL_ARG(out.raw)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_DONE(aql_buf_wait(out.raw, TH_TIMEOUT_NS));
	hout = aql_buf_u64_data(out);
	bad = 0;
	for (int yy = 0; hout && yy < H; yy++)
		for (int xx = 0; xx < W; xx++)
			bad += hout[xx * H + yy] !=
			       ((uint64_t)((double)hin[yy * W + xx] * 0.5) << 2) + 5;
	CHECK(hout && !bad, "transpose after saxpy at the same address: %d of %d wrong "
	      "(out[1] = %llu)", bad, W * H, hout ? (unsigned long long)hout[1] : 0ull);
	CHECK_OK(aql_code_object_destroy(co));
	CHECK_OK(aql_buf_destroy(x.raw));
	CHECK_OK(aql_buf_destroy(y.raw));
	CHECK_OK(aql_buf_destroy(in.raw));
	CHECK_OK(aql_buf_destroy(out.raw));
	CHECK_OK(aql_queue_destroy(q));
}

/* The invalidation cannot run: the load fails, names why, frees its BO. */
static void expect_fail(const char *saxpy)
{
	struct kfdemu_stats before;
	aql_code_object *co = NULL;
	aql_status st;

	/* The signal pool's first block (registered with the GPU), which a
	 * queue's making takes, before the counts start. */
	aql_signal_destroy(th_signal(0));
	before = stats();
	st = aql_code_object_load_file(agent, saxpy, NULL, &co);

	CHECK(st != AQL_OK && !co, "load without an invalidation: status %d", st);
	CHECK(th_error_has("invalidating the code caches after loading") &&
	      th_error_has("AMD agent 0") && th_error_has("AMDKFD_IOC_CREATE_QUEUE"),
	      "the message: %s", aql_error_message());
	CHECK(stats().bos == before.bos && stats().queues == 0, "left behind: %u BOs (before %u), "
	      "%u queues", stats().bos, before.bos, stats().queues);
}

int main(int argc, char **argv)
{
	const char *saxpy = NULL, *transpose = NULL;
	int fail = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--saxpy") && i + 1 < argc)
			saxpy = argv[++i];
		else if (!strcmp(argv[i], "--transpose") && i + 1 < argc)
			transpose = argv[++i];
		else if (!strcmp(argv[i], "--expect-fail"))
			fail = 1;
		else
			th_stop("usage: test_kfd_code_cache --saxpy PATH [--transpose PATH] "
				"[--expect-fail]");
	}
	if (!saxpy || (!fail && !transpose))
		th_stop("no code objects named");
	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	/* On hardware (AQL_HIL=1, tests/hil/run-amd) the reload runs alone:
	 * the failure needs the emulation's knob. */
	if (fail)
		*(void **)&stats_fn = th_kfdemu_sym("kfdemu_stats");
	if (fail)
		expect_fail(saxpy);
	else
		check_reload(saxpy, transpose);
	CHECK_OK(aql_agent_destroy(agent));
	return th_finish();
}
