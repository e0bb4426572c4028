/* SPDX-License-Identifier: MIT */
/*
 * Typed launches (aql/launch.h) of the kernels in tests/launch/kernels.c,
 * loaded as a host code object on the CPU agent, or as PTX on the NVIDIA
 * agent (AQL_TEST_AGENT=nvidia, helpers.h): argument checks, data moved by direction
 * on a CPU agent with separate memory and none on the unified default,
 * dependencies across queues, partitions written concurrently, launch
 * geometry limits and kernarg pool recycling.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

struct particle {
	float pos[3];
	uint32_t id;
};

AQL_BUF_DECLARE(particle, struct particle)

static aql_code_object *co;
static const aql_kernel *k_axpy, *k_twice, *k_add, *k_move, *k_ids, *k_fill, *k_dyn;

static const aql_kernel *kernel(const char *name)
{
	const aql_kernel *k = NULL;

	CHECK_OK(aql_code_object_kernel(co, name, &k));
	if (!k)
		exit(1);
	return k;
}

static aql_launch_config grid1(uint32_t n)
{
	return (aql_launch_config){ .grid = { n } };
}

static aql_buf *new_buf(const aql_type *type, uint64_t n, enum aql_direction dir,
			const char *name)
{
	aql_buf_config c = { .name = name };
	aql_buf *b = NULL;

	CHECK_OK(aql_buf_create(type, n, dir, &c, &b));
	if (!b)
		exit(1);
	return b;
}

#define buf_f32(n, dir, name) new_buf(AQL_TYPE(float), (n), (dir), (name))
#define buf_i32(n, dir, name) new_buf(AQL_TYPE(int32_t), (n), (dir), (name))

static void expect_refused(aql_status st, aql_status want, const char *what, const char *needle)
{
	CHECK(st == want, "%s: got %s (%s)", what, aql_status_str(st), aql_error_message());
	CHECK(th_error_has(needle), "%s: message lacks \"%s\"", what, needle);
}

static void test_argument_checks(void)
{
	aql_queue *q = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	aql_buf *x = buf_f32(16, AQL_IN, "x"), *y = buf_f32(16, AQL_INOUT, "y");
	aql_buf *xin = buf_f32(16, AQL_IN, "yin"), *iy = buf_i32(16, AQL_INOUT, "iy");
	aql_launch_config c = grid1(16);
	uint64_t big = 16;
	float a = 2.0f;
	int32_t ia = 2;
	aql_launch_stats s;

	expect_refused(AQL_LAUNCH(q, k_axpy, &c, NULL, AQL_ARG(a), AQL_ARG(x), AQL_ARG(y)),
		       AQL_ERR_INVALID_ARG, "too few arguments", "takes 4 argument(s), 3 given");
	/* Types as the code object spells them ("float *" or "float*"; const
	 * is not in AMDGPU's type names): the needles leave them out. */
	expect_refused(AQL_LAUNCH(q, k_axpy, &c, NULL, AQL_ARG(a), AQL_ARG(x), AQL_ARG(iy),
				  AQL_ARG(16u)),
		       AQL_ERR_INVALID_ARG, "int32 buffer for float *",
		       "got buffer 'iy' of int32_t");
	expect_refused(AQL_LAUNCH(q, k_axpy, &c, NULL, AQL_ARG(a), AQL_ARG(x), AQL_ARG(xin),
				  AQL_ARG(16u)),
		       AQL_ERR_INVALID_ARG, "AQL_IN buffer to a written argument",
		       "may be written by the kernel, but buffer 'yin' is AQL_IN");
	expect_refused(AQL_LAUNCH(q, k_axpy, &c, NULL, AQL_ARG(x), AQL_ARG(x), AQL_ARG(y),
				  AQL_ARG(16u)),
		       AQL_ERR_INVALID_ARG, "buffer for a by-value float",
		       "argument 0 'a': expects a 4-byte value (float), got a buffer");
	expect_refused(AQL_LAUNCH(q, k_axpy, &c, NULL, AQL_ARG(a), AQL_ARG(a), AQL_ARG(y),
				  AQL_ARG(16u)),
		       AQL_ERR_INVALID_ARG, "scalar for a buffer",
		       "argument 1 'x': expects a buffer");
	expect_refused(AQL_LAUNCH(q, k_axpy, &c, NULL, AQL_ARG(a), AQL_ARG(x), AQL_ARG(y),
				  AQL_ARG(big)),
		       AQL_ERR_INVALID_ARG, "8-byte scalar for uint32_t",
		       "argument 3 'n': expects uint32_t (4 bytes), got uint64_t (8 bytes)");
	expect_refused(AQL_LAUNCH(q, k_axpy, &c, NULL, AQL_ARG(ia), AQL_ARG(x), AQL_ARG(y),
				  AQL_ARG(16u)),
		       AQL_ERR_INVALID_ARG, "int for float", "argument 0 'a': expects float, got int32_t");
	expect_refused(AQL_LAUNCH(q, k_axpy, &c, NULL, AQL_ARG(a), AQL_ARG((aql_buf *)NULL),
				  AQL_ARG(y), AQL_ARG(16u)),
		       AQL_ERR_INVALID_ARG, "NULL buffer", "got a NULL buffer");
	/* Signedness: a value that would change meaning is refused, with the cast. */
	expect_refused(AQL_LAUNCH(q, k_axpy, &c, NULL, AQL_ARG(a), AQL_ARG(x), AQL_ARG(y),
				  AQL_ARG(-1)),
		       AQL_ERR_INVALID_ARG, "-1 for uint32_t",
		       "argument 3 'n' is uint32_t; -1 is an int32_t: pass (uint32_t)x");
	expect_refused(AQL_LAUNCH(q, k_add, &c, NULL, AQL_ARG(iy), AQL_ARG(3000000000u),
				  AQL_ARG(16u)),
		       AQL_ERR_INVALID_ARG, "3000000000u for int32_t",
		       "argument 1 'add' is int32_t; 3000000000 is a uint32_t past its maximum: pass (int32_t)x");
	/* Nothing was submitted by any refused launch. */
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.launches == 0 && q->amd->write_dispatch_id == 0,
	      "refused launches submitted %llu launches, %llu packets",
	      (unsigned long long)s.launches, (unsigned long long)q->amd->write_dispatch_id);
	aql_buf_destroy(x);
	aql_buf_destroy(y);
	aql_buf_destroy(xin);
	aql_buf_destroy(iy);
	aql_queue_destroy(q);
}

/* Copies back of buf so far: host access and aql_buf_wait make them. */
static uint64_t moves_to_host(aql_buf *b)
{
	aql_buf_info info = { 0 };

	CHECK_OK(aql_buf_get_info(b, &info));
	return info.moves_to_host;
}

/* axpy on an agent: x copied in once, y in, and back when the host asks;
 * results exact. */
static void run_axpy(aql_agent *agent, int separate)
{
	aql_queue *q = NULL;
	enum { N = 1000 };
	aql_buf *x = buf_f32(N, AQL_IN, "x"), *y = buf_f32(N, AQL_INOUT, "y");
	float *hx = aql_buf_data(x, float), *hy = aql_buf_data(y, float);
	aql_launch_config c = grid1(N);
	aql_completion done;
	aql_launch_stats s;
	int bad = 0;

	CHECK_OK(aql_queue_create(agent, NULL, &q));
	for (int i = 0; i < N; i++) {
		hx[i] = (float)i;
		hy[i] = 1.0f;
	}
	CHECK_OK(AQL_LAUNCH(q, k_axpy, &c, &done, AQL_ARG(2.0f), AQL_ARG(x), AQL_ARG(y),
			    AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(moves_to_host(y) == 0, "y came back before the host asked for it");
	hy = aql_buf_data(y, float);
	CHECK(moves_to_host(y) == (separate ? 1u : 0u), "host access brought y back %llu times",
	      (unsigned long long)moves_to_host(y));
	for (int i = 0; i < N; i++)
		bad += hy[i] != 2.0f * (float)i + 1.0f;
	CHECK(bad == 0, "%d wrong results after one launch (separate %d)", bad, separate);
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.copies_in == (separate ? 2u : 0u) && s.copies_out == 0 &&
		      s.bytes_in == (separate ? 2u * N * 4 : 0u),
	      "first launch: %llu copies in (%llu bytes), %llu out; separate %d",
	      (unsigned long long)s.copies_in, (unsigned long long)s.bytes_in,
	      (unsigned long long)s.copies_out, separate);

	/* x unchanged on the host: only y (written through aql_buf_data) moves in. */
	CHECK_OK(AQL_LAUNCH(q, k_axpy, &c, &done, AQL_ARG(1.0f), AQL_ARG(x), AQL_ARG(y),
			    AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.copies_in == (separate ? 3u : 0u),
	      "second launch copied x again: %llu copies in", (unsigned long long)s.copies_in);
	/* Read y without marking it changed: the third launch copies nothing in. */
	const float *cy = aql_buf_data_const(y, float);

	CHECK(cy && cy[10] == 3.0f * 10 + 1.0f, "y[10] = %g after two launches", cy ? cy[10] : -1);
	CHECK_OK(AQL_LAUNCH(q, k_axpy, &c, &done, AQL_ARG(1.0f), AQL_ARG(x), AQL_ARG(y),
			    AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.copies_in == (separate ? 3u : 0u) && s.copies_out == 0 &&
		      moves_to_host(y) == (separate ? 2u : 0u),
	      "third launch: %llu copies in, %llu out; y back %llu times",
	      (unsigned long long)s.copies_in, (unsigned long long)s.copies_out,
	      (unsigned long long)moves_to_host(y));
	cy = aql_buf_data_const(y, float);
	CHECK(cy && cy[999] == 4.0f * 999 + 1.0f, "y[999] = %g after three launches",
	      cy ? cy[999] : -1);
	CHECK(moves_to_host(y) == (separate ? 3u : 0u) && moves_to_host(x) == 0,
	      "y back %llu times, x (never written) %llu", (unsigned long long)moves_to_host(y),
	      (unsigned long long)moves_to_host(x));
	aql_buf_destroy(x);
	aql_buf_destroy(y);
	aql_queue_destroy(q);
}

/* An AQL_OUT buffer is never copied in: what the agent had stays unseen. */
static void test_out_direction(aql_agent *agent)
{
	aql_queue *q = NULL;
	enum { N = 300 };
	aql_buf *in = buf_i32(N, AQL_IN, "in"), *out = buf_i32(N, AQL_OUT, "out");
	int32_t *hin = aql_buf_data(in, int32_t), *hout = aql_buf_data(out, int32_t);
	aql_launch_config c = grid1(N);
	aql_completion done;
	aql_launch_stats s;
	int bad = 0;

	CHECK_OK(aql_queue_create(agent, NULL, &q));
	for (int i = 0; i < N; i++) {
		hin[i] = i;
		hout[i] = -5;
	}
	CHECK_OK(AQL_LAUNCH(q, k_twice, &c, &done, AQL_ARG(in), AQL_ARG(out), AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.copies_in == 1 && s.bytes_in == N * 4 && s.copies_out == 0 && s.bytes_out == 0,
	      "out buffer: %llu copies in (%llu bytes), %llu out (%llu bytes)",
	      (unsigned long long)s.copies_in, (unsigned long long)s.bytes_in,
	      (unsigned long long)s.copies_out, (unsigned long long)s.bytes_out);
	hout = aql_buf_data(out, int32_t);
	CHECK(moves_to_host(out) == 1, "out came back %llu times on host access",
	      (unsigned long long)moves_to_host(out));
	for (int i = 0; i < N; i++)
		bad += hout[i] != 2 * i;
	CHECK(bad == 0, "%d wrong results of twice", bad);
	aql_buf_destroy(in);
	aql_buf_destroy(out);
	aql_queue_destroy(q);
}

/* Constants of the other signedness that fit are taken: AQL_ARG(16) for a uint32_t. */
static void test_sign_fits(aql_agent *agent)
{
	enum { N = 16 };
	aql_queue *q = NULL;
	aql_buf *b = buf_i32(N, AQL_INOUT, "fits");
	aql_launch_config c = grid1(N);
	aql_completion done;
	int bad = 0;

	CHECK_OK(aql_queue_create(agent, NULL, &q));
	CHECK_OK(AQL_LAUNCH(q, k_add, &c, &done, AQL_ARG(b), AQL_ARG(5u), AQL_ARG(N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(AQL_LAUNCH(q, k_add, &c, &done, AQL_ARG(b), AQL_ARG((uint32_t)INT32_MAX - 5),
			    AQL_ARG(N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	const int32_t *h = aql_buf_data_const(b, int32_t);

	for (int i = 0; i < N && h; i++)
		bad += h[i] != INT32_MAX;
	CHECK(h && !bad, "unsigned constants for int32_t add: %d wrong", bad);
	aql_buf_destroy(b);
	aql_queue_destroy(q);
}

/* Host writes to more separate pieces than a launch copies one by one. */
static void test_many_pieces(aql_agent *agent)
{
	enum { N = 100, PIECES = 7 };
	aql_queue *q = NULL;
	aql_buf *b = buf_i32(N, AQL_INOUT, "pieces"), *one;
	aql_launch_config c = grid1(N);
	aql_completion done;
	int bad = 0;

	CHECK_OK(aql_queue_create(agent, NULL, &q));
	CHECK_OK(AQL_LAUNCH(q, k_add, &c, &done, AQL_ARG(b), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	for (int i = 0; i < PIECES; i++) {
		CHECK_OK(aql_buf_slice(b, 10 + 2 * (uint64_t)i, 1, &one));
		int32_t *h = aql_buf_data(one, int32_t);

		if (h)
			*h = 1000 + i;
		aql_buf_destroy(one);
	}
	CHECK_OK(AQL_LAUNCH(q, k_add, &c, &done, AQL_ARG(b), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	const int32_t *h = aql_buf_data_const(b, int32_t);

	for (int i = 0; i < N && h; i++) {
		int piece = i >= 10 && i < 10 + 2 * PIECES && (i - 10) % 2 == 0;

		bad += h[i] != (piece ? 1000 + (i - 10) / 2 + 1 : 2);
	}
	CHECK(h && bad == 0, "%d elements lost among %d host-written pieces", bad, PIECES);
	aql_buf_destroy(b);
	aql_queue_destroy(q);
}

/* A copy to the agent on one queue is a write: another queue that reads
 * the buffer must be ordered after it, not see the agent's copy early. */
static void test_fill_across_queues(aql_agent *agent)
{
	enum { N = 64 };
	aql_queue *q1 = NULL, *q2 = NULL;
	aql_buf *x = buf_i32(N, AQL_IN, "shared input"), *o1 = buf_i32(N, AQL_OUT, "o1"),
		*o2 = buf_i32(N, AQL_OUT, "o2");
	int32_t *hx = aql_buf_data(x, int32_t);
	aql_launch_config c = grid1(N);
	aql_completion first, second;
	aql_signal *gate;
	int bad = 0;

	CHECK_OK(aql_queue_create(agent, NULL, &q1));
	CHECK_OK(aql_queue_create(agent, NULL, &q2));
	for (int i = 0; i < N && hx; i++)
		hx[i] = i;
	gate = th_gate_close(q1);
	CHECK_OK(AQL_LAUNCH(q1, k_twice, &c, &first, AQL_ARG(x), AQL_ARG(o1), AQL_ARG((uint32_t)N)));
	expect_refused(AQL_LAUNCH(q2, k_twice, &c, NULL, AQL_ARG(x), AQL_ARG(o2), AQL_ARG((uint32_t)N)),
		       AQL_ERR_BUSY, "read while another queue fills the agent's copy",
		       "written by twice");
	c.after = &first;
	c.after_count = 1;
	CHECK_OK(AQL_LAUNCH(q2, k_twice, &c, &second, AQL_ARG(x), AQL_ARG(o2), AQL_ARG((uint32_t)N)));
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(second, TH_TIMEOUT_NS));
	const int32_t *h = aql_buf_data_const(o2, int32_t);

	for (int i = 0; i < N && h; i++)
		bad += h[i] != 2 * i;
	CHECK(h && bad == 0, "%d wrong elements read after another queue's fill", bad);
	CHECK(aql_agent_destroy(agent) == AQL_ERR_INVALID_ARG, "an agent with queues destroyed");
	aql_buf_destroy(x);
	aql_buf_destroy(o1);
	aql_buf_destroy(o2);
	aql_signal_destroy(gate);
	aql_queue_destroy(q1);
	aql_queue_destroy(q2);
}

static void test_directions(void)
{
	aql_host_agent_config cfg = { .workers = 2, .separate_memory = 1 };
	aql_agent *separate = NULL;
	aql_agent_info info;

	if (th_test_gpu()) {
		CHECK_OK(aql_agent_get_info(th_test_agent(), &info));
		run_axpy(th_test_agent(), !info.unified_memory);
		if (info.unified_memory)
			return;
		test_out_direction(th_test_agent());
		test_many_pieces(th_test_agent());
		test_fill_across_queues(th_test_agent());
		th_skip("directions on a CPU agent with separate memory", "a CPU-agent feature");
		return;
	}
	CHECK_OK(aql_host_agent_create(&cfg, &separate));
	CHECK_OK(aql_agent_get_info(separate, &info));
	CHECK(!info.unified_memory, "separate_memory agent reports unified memory");
	CHECK_OK(aql_agent_get_info(th_agent(), &info));
	CHECK(info.unified_memory, "the default agent reports separate memory");
	run_axpy(th_agent(), 0);
	run_axpy(separate, 1);
	test_out_direction(separate);
	test_many_pieces(separate);
	test_fill_across_queues(separate);
	/* A buffer with storage on the agent keeps it alive. */
	aql_buf *bound = buf_i32(4, AQL_IN, "bound");
	aql_queue *q = NULL;

	CHECK_OK(aql_queue_create(separate, NULL, &q));
	CHECK_OK(aql_buf_to_agent(bound, q, NULL));
	aql_queue_destroy(q);
	CHECK(aql_agent_destroy(separate) == AQL_ERR_INVALID_ARG &&
		      th_error_has("storage of 1 typed buffer"), "an agent holding a buffer destroyed");
	aql_buf_destroy(bound);
	CHECK_OK(aql_agent_destroy(separate));
}

/* y written on q1 (held by a gate), read on q2: refused unless ordered. */
static void test_dependencies(void)
{
	aql_queue *q1 = th_test_queue(64, AQL_QUEUE_MULTI, 0), *q2 = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	enum { N = 64 };
	aql_buf *a = buf_i32(N, AQL_INOUT, "a"), *b = buf_i32(N, AQL_OUT, "b");
	aql_launch_config c = grid1(N);
	aql_completion first, second;
	aql_signal *gate = th_gate_close(q1);
	int bad = 0;

	CHECK_OK(AQL_LAUNCH(q1, k_add, &c, &first, AQL_ARG(a), AQL_ARG(5), AQL_ARG((uint32_t)N)));
	CHECK(!aql_completion_done(first), "a launch behind a closed gate completed");
	expect_refused(AQL_LAUNCH(q2, k_twice, &c, NULL, AQL_ARG(a), AQL_ARG(b),
				  AQL_ARG((uint32_t)N)),
		       AQL_ERR_BUSY, "read of a buffer written on another queue",
		       "buffer 'a': elements [0, 64) are written by add_i32 on another queue");
	CHECK(aql_buf_data(a, int32_t) == NULL && aql_error_message()[0],
	      "host write access to a buffer in flight was allowed");
	c.after = &first;
	c.after_count = 1;
	CHECK_OK(AQL_LAUNCH(q2, k_twice, &c, &second, AQL_ARG(a), AQL_ARG(b),
			    AQL_ARG((uint32_t)N)));
	th_sleep_ms(5);
	CHECK(!aql_completion_done(second), "the dependent launch ran before its dependency");
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(second, TH_TIMEOUT_NS));
	CHECK(aql_completion_done(first), "dependency not done after the dependent launch");
	const int32_t *hb = aql_buf_data_const(b, int32_t);

	for (int i = 0; i < N && hb; i++)
		bad += hb[i] != 10;
	CHECK(hb && bad == 0, "%d wrong results after a chained launch", bad);
	CHECK_DONE(aql_buf_wait(a, TH_TIMEOUT_NS));
	aql_buf_destroy(a);
	aql_buf_destroy(b);
	aql_signal_destroy(gate);
	aql_queue_destroy(q1);
	aql_queue_destroy(q2);
}

/* Four partitions written at once on four queues; overlaps refused. */
static void test_partitions(void)
{
	enum { N = 1000, P = 4 };
	aql_queue *q[P + 1];
	aql_signal *gate[P];
	aql_buf *data = buf_i32(N, AQL_INOUT, "data"), *part[P], *overlap = NULL;
	aql_completion done[P];
	int bad = 0;

	CHECK_OK(aql_buf_partition(data, P, part));
	for (int i = 0; i <= P; i++)
		q[i] = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	for (int i = 0; i < P; i++) {
		aql_buf_info info;
		aql_launch_config c = grid1(N / P);

		CHECK_OK(aql_buf_get_info(part[i], &info));
		CHECK(info.first == (uint64_t)i * N / P && info.count == N / P && info.is_view,
		      "part %d: first %llu count %llu", i, (unsigned long long)info.first,
		      (unsigned long long)info.count);
		gate[i] = th_gate_close(q[i]);
		CHECK_OK(AQL_LAUNCH(q[i], k_add, &c, &done[i], AQL_ARG(part[i]), AQL_ARG(i + 1),
				    AQL_ARG((uint32_t)(N / P))));
	}
	/* A slice across parts 1 and 2, and the whole buffer: both overlap. */
	CHECK_OK(aql_buf_slice(data, N / P + 10, N / P, &overlap));
	aql_launch_config c = grid1(N / P);

	expect_refused(AQL_LAUNCH(q[P], k_add, &c, NULL, AQL_ARG(overlap), AQL_ARG(1),
				  AQL_ARG((uint32_t)(N / P))),
		       AQL_ERR_BUSY, "write overlapping a part in flight", "data[260:510]");
	c.grid[0] = N;
	expect_refused(AQL_LAUNCH(q[P], k_add, &c, NULL, AQL_ARG(data), AQL_ARG(1),
				  AQL_ARG((uint32_t)N)),
		       AQL_ERR_BUSY, "write of the parent of parts in flight", "written by add_i32");
	CHECK(aql_buf_data(part[0], int32_t) == NULL, "host access to a part in flight allowed");
	for (int i = 0; i < P; i++)
		th_gate_open(gate[i]);
	for (int i = 0; i < P; i++)
		CHECK_DONE(aql_completion_wait(done[i], TH_TIMEOUT_NS));
	CHECK(aql_buf_destroy(data) == AQL_ERR_BUSY, "a root with live views was destroyed");
	const int32_t *h = aql_buf_data_const(data, int32_t);

	for (int i = 0; i < N && h; i++)
		bad += h[i] != i / (N / P) + 1;
	CHECK(h && bad == 0, "%d wrong elements after partitioned launches", bad);
	/* Done now: the overlapping slice may be written. */
	c.grid[0] = N / P;
	CHECK_OK(AQL_LAUNCH(q[P], k_add, &c, &done[0], AQL_ARG(overlap), AQL_ARG(100),
			    AQL_ARG((uint32_t)(N / P))));
	CHECK_DONE(aql_completion_wait(done[0], TH_TIMEOUT_NS));
	h = aql_buf_data_const(data, int32_t);
	CHECK(h && h[N / P + 9] == 2 && h[N / P + 10] == 102 && h[2 * N / P + 9] == 103 &&
		      h[2 * N / P + 10] == 3,
	      "slice write: %d %d %d %d", h ? h[N / P + 9] : 0, h ? h[N / P + 10] : 0,
	      h ? h[2 * N / P + 9] : 0, h ? h[2 * N / P + 10] : 0);
	aql_buf_destroy(overlap);
	for (int i = 0; i < P; i++) {
		aql_buf_destroy(part[i]);
		aql_signal_destroy(gate[i]);
	}
	CHECK_OK(aql_buf_destroy(data));
	for (int i = 0; i <= P; i++)
		aql_queue_destroy(q[i]);
}

static void test_geometry(void)
{
	aql_queue *q = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	enum { N = 1000 };
	aql_buf *ids = NULL;
	aql_launch_config c = grid1(N);
	aql_kernel_metadata md = *k_ids->metadata;
	aql_kernel small = *k_ids;
	aql_completion done;
	aql_agent_info info;
	int bad = 0;

	CHECK_OK(aql_buf_create(AQL_TYPE(uint32_t), N, AQL_OUT, NULL, &ids));
	CHECK_OK(AQL_LAUNCH(q, k_ids, &c, &done, AQL_ARG(ids), AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	const uint32_t *h = aql_buf_data_const(ids, uint32_t);

	/* The default work-group: 256, with a partial last group; on a CPU
	 * agent split so that each worker gets a group. group_ids has fibers
	 * (not a work-group function): never the largest allowed. */
	CHECK_OK(aql_agent_get_info(th_test_agent(), &info));
	uint32_t wg = 256;

	if (info.kind == AQL_AGENT_CPU && info.compute_units > 1 &&
	    (N + info.compute_units - 1) / info.compute_units < wg)
		wg = (N + info.compute_units - 1) / info.compute_units;
	for (uint32_t i = 0; i < N && h; i++)
		bad += h[i] != (i / wg) * 1000 + i % wg;
	CHECK(h && bad == 0, "%d work-items saw another work-group size than %u", bad, wg);

	c.workgroup[0] = 100;
	CHECK_OK(AQL_LAUNCH(q, k_ids, &c, &done, AQL_ARG(ids), AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	h = aql_buf_data_const(ids, uint32_t);
	CHECK(h && h[999] == 9 * 1000 + 99 && h[150] == 1050, "work-group 100: %u %u",
	      h ? h[999] : 0, h ? h[150] : 0);

	CHECK_OK(aql_agent_get_info(th_test_agent(), &info));
	c.workgroup[0] = 0;
	c.grid[0] = 0;
	expect_refused(AQL_LAUNCH(q, k_ids, &c, NULL, AQL_ARG(ids), AQL_ARG((uint32_t)N)),
		       AQL_ERR_INVALID_ARG, "empty grid", "grid x is 0");
	c.grid[0] = N;
	c.workgroup[0] = 64;
	c.workgroup[1] = 32;
	expect_refused(AQL_LAUNCH(q, k_ids, &c, NULL, AQL_ARG(ids), AQL_ARG((uint32_t)N)),
		       AQL_ERR_INVALID_ARG, "2048 work-items", "has 2048 work-items; the limit is 1024");
	md.max_flat_workgroup_size = 128;
	small.metadata = &md;
	c.workgroup[1] = 0;
	c.workgroup[0] = 0;
	CHECK_OK(AQL_LAUNCH(q, &small, &c, &done, AQL_ARG(ids), AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	h = aql_buf_data_const(ids, uint32_t);
	CHECK(h && h[999] == 7 * 1000 + 103, "max_flat 128: default group gave %u", h ? h[999] : 0);
	c.workgroup[0] = 256;
	expect_refused(AQL_LAUNCH(q, &small, &c, NULL, AQL_ARG(ids), AQL_ARG((uint32_t)N)),
		       AQL_ERR_INVALID_ARG, "beyond max_flat_workgroup_size",
		       "the limit is 128 (the kernel's max_flat_workgroup_size)");
	md.reqd_workgroup_size[0] = 32;
	md.reqd_workgroup_size[1] = md.reqd_workgroup_size[2] = 1;
	c.workgroup[0] = 64;
	expect_refused(AQL_LAUNCH(q, &small, &c, NULL, AQL_ARG(ids), AQL_ARG((uint32_t)N)),
		       AQL_ERR_INVALID_ARG, "not the required size", "reqd_work_group_size 32x1x1");
	/* Dynamic LDS starts 16-aligned after the static: the kernel sees all of it. */
	aql_launch_config one = grid1(1);

	one.dynamic_lds = 100;
	CHECK_OK(AQL_LAUNCH(q, k_dyn, &one, &done, AQL_ARG(ids)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	h = aql_buf_data_const(ids, uint32_t);
	CHECK(h && h[0] == 100, "kernel with 20 bytes of static LDS saw %u dynamic bytes, not 100",
	      h ? h[0] : 0);
	c.workgroup[0] = 0;
	c.dynamic_lds = info.max_group_segment_size + 1;
	expect_refused(AQL_LAUNCH(q, k_ids, &c, NULL, AQL_ARG(ids), AQL_ARG((uint32_t)N)),
		       AQL_ERR_INVALID_ARG, "too much LDS", "exceeds the agent's");
	aql_buf_destroy(ids);
	aql_queue_destroy(q);
}

/* Struct elements (a registered type) through a typed handle, a double by value. */
static void test_struct_elements(void)
{
	aql_queue *q = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	enum { N = 33 };
	aql_buf_particle p;
	aql_launch_config c = grid1(N);
	aql_completion done;
	struct particle *h;
	const aql_type *t = NULL;
	int bad = 0;

	CHECK_OK(aql_buf_particle_create(N, AQL_INOUT, NULL, &p));
	h = aql_buf_particle_data(p);
	CHECK(h != NULL, "typed handle access: %s", aql_error_message());
	for (int i = 0; i < N && h; i++)
		h[i] = (struct particle){ { 1, 2, 3 }, (uint32_t)i };
	CHECK_OK(AQL_LAUNCH(q, k_move, &c, &done, AQL_ARG(p.raw), AQL_ARG(0.5), AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	const struct particle *r = aql_buf_particle_data_const(p);

	for (int i = 0; i < N && r; i++)
		bad += r[i].pos[0] != 1.5f || r[i].pos[1] != 3.0f || r[i].pos[2] != 4.5f ||
		       r[i].id != (uint32_t)i;
	CHECK(r && bad == 0, "%d particles moved wrongly", bad);
	CHECK(aql_buf_data(p.raw, float) == NULL && th_error_has("holds struct particle, not float"),
	      "struct buffer read as float");
	CHECK_OK(AQL_TYPE_REGISTER(struct particle, &t));
	CHECK(t == aql_type_find("struct particle"), "registration is not idempotent");
	aql_buf_destroy(p.raw);
	aql_queue_destroy(q);
}

/* 100 000 launches on one queue reuse the kernarg pool; nothing grows. */
static void test_kernarg_recycling(void)
{
	aql_queue *q = th_test_queue(256, AQL_QUEUE_SINGLE, 0);
	enum { LAUNCHES = 100000, N = 4 };
	aql_buf *acc = buf_i32(N, AQL_INOUT, "acc");
	aql_launch_config c = grid1(N);
	aql_mem_pool *pool = NULL;
	aql_mem_pool_stats before, after;
	aql_launch_stats s0, s;
	aql_completion done = { 0 };
	int64_t want = 0;

	/* The kernarg ring lives in the pinned default pool. */
	CHECK_OK(aql_mem_pool_default(AQL_MEM_FINE_GRAINED, &pool));
	for (int i = 0; i < 1000; i++)
		CHECK_OK(AQL_LAUNCH(q, k_add, &c, &done, AQL_ARG(acc), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_mem_pool_get_stats(pool, &before));
	CHECK_OK(aql_launch_get_stats(q, &s0));
	for (int i = 0; i < LAUNCHES; i++) {
		aql_status st = AQL_LAUNCH(q, k_add, &c, &done, AQL_ARG(acc), AQL_ARG(i % 7),
					   AQL_ARG((uint32_t)N));

		if (st != AQL_OK) {
			CHECK_OK(st);
			break;
		}
		want += i % 7;
	}
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_mem_pool_get_stats(pool, &after));
	CHECK_OK(aql_launch_get_stats(q, &s));
	const int32_t *h = aql_buf_data_const(acc, int32_t);

	CHECK(h && h[0] == 1000 + want && h[3] == 1000 + want, "accumulated %d, want %lld",
	      h ? h[0] : -1, (long long)(1000 + want));
	CHECK(after.bytes_in_use == before.bytes_in_use && after.committed == before.committed,
	      "pool grew under sustained launches: %zu -> %zu bytes in use, %zu -> %zu committed",
	      before.bytes_in_use, after.bytes_in_use, before.committed, after.committed);
	/* The pool holds about 4096 segments: it went round many times. */
	CHECK(s.launches == LAUNCHES + 1000 && s.kernarg_bytes == s0.kernarg_bytes &&
		      s.kernarg_bytes * 10 < (uint64_t)LAUNCHES * 64,
	      "%llu launches, kernarg pool %llu bytes, was %llu", (unsigned long long)s.launches,
	      (unsigned long long)s.kernarg_bytes, (unsigned long long)s0.kernarg_bytes);
	aql_buf_destroy(acc);
	aql_queue_destroy(q);
}

struct gate_opener {
	aql_signal *gate;
	int launched;			/* atomic: launches made so far */
	int finished;			/* atomic: the launching loop ended */
};

/*
 * Open the gate once the launching thread has stopped making progress for
 * 300 ms (it waits for a kernarg segment), or has finished: a fixed delay
 * would open it before a slow (sanitizer) build filled the pool.
 */
static void *open_gate_when_stalled(void *arg)
{
	struct gate_opener *o = arg;
	int seen = -1;
	uint64_t since = th_now_ns();

	while (!__atomic_load_n(&o->finished, __ATOMIC_ACQUIRE)) {
		int n = __atomic_load_n(&o->launched, __ATOMIC_RELAXED);

		if (n != seen) {
			seen = n;
			since = th_now_ns();
		} else if (th_now_ns() - since > 300000000ull) {
			break;
		}
		th_sleep_ms(10);
	}
	th_gate_open(o->gate);
	return NULL;
}

/* More launches held back than the kernarg pool has segments: the launch
 * that finds it full waits for the oldest to complete, then goes on. */
static void test_kernarg_wait(void)
{
	enum { LAUNCHES = 5000 };
	aql_queue *q = th_test_queue(8192, AQL_QUEUE_SINGLE, 0);
	aql_buf *acc = buf_i32(1, AQL_INOUT, "held");
	aql_launch_config c = grid1(1);
	aql_completion done = { 0 };
	struct gate_opener o = { th_gate_close(q), 0, 0 };
	aql_launch_stats s;
	pthread_t opener;
	int failures = 0, want = 0;

	/* Each segment holds its own value: one reused too early would show. */
	pthread_create(&opener, NULL, open_gate_when_stalled, &o);
	for (int i = 0; i < LAUNCHES; i++) {
		failures += AQL_LAUNCH(q, k_add, &c, &done, AQL_ARG(acc), AQL_ARG(i % 7 + 1),
				       AQL_ARG(1u)) != AQL_OK;
		want += i % 7 + 1;
		__atomic_store_n(&o.launched, i + 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&o.finished, 1, __ATOMIC_RELEASE);
	pthread_join(opener, NULL);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_launch_get_stats(q, &s));
	/* The CUDA queue frees a segment once the driver copied it at the
	 * launch, maybe before the gate opens: waits are then not certain. */
	CHECK(failures == 0 && (s.kernarg_waits > 0 || th_test_gpu()) &&
	      s.kernarg_bytes < (uint64_t)LAUNCHES * 64,
	      "%d failed launches; %llu waits for a %llu-byte pool", failures,
	      (unsigned long long)s.kernarg_waits, (unsigned long long)s.kernarg_bytes);
	const int32_t *h = aql_buf_data_const(acc, int32_t);

	CHECK(h && h[0] == want, "accumulated %d of %d", h ? h[0] : -1, want);
	aql_buf_destroy(acc);
	aql_signal_destroy(o.gate);
	aql_queue_destroy(q);
}

/* Threads launch on one queue, each on its own partition. */
struct worker {
	aql_queue *q;
	aql_buf *part;
	int failures;
};

static void *launch_worker(void *arg)
{
	struct worker *w = arg;
	aql_launch_config c = grid1(16);
	aql_completion done = { 0 };

	for (int i = 0; i < 2000; i++)
		if (AQL_LAUNCH(w->q, k_add, &c, &done, AQL_ARG(w->part), AQL_ARG(1),
			       AQL_ARG(16u)) != AQL_OK)
			w->failures++;
	if (th_done(aql_completion_wait(done, TH_TIMEOUT_NS)) != AQL_OK)
		w->failures++;
	return NULL;
}

static void test_threads(void)
{
	enum { T = 4 };
	aql_queue *q = th_test_queue(1024, AQL_QUEUE_MULTI, 0);
	aql_buf *data = buf_i32(16 * T, AQL_INOUT, "shared"), *parts[T];
	struct worker w[T];
	pthread_t tid[T];
	int bad = 0, failures = 0;

	CHECK_OK(aql_buf_partition(data, T, parts));
	for (int i = 0; i < T; i++) {
		w[i] = (struct worker){ q, parts[i], 0 };
		pthread_create(&tid[i], NULL, launch_worker, &w[i]);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(tid[i], NULL);
		failures += w[i].failures;
	}
	CHECK_DONE(aql_buf_wait(data, TH_TIMEOUT_NS));
	const int32_t *h = aql_buf_data_const(data, int32_t);

	for (int i = 0; i < 16 * T && h; i++)
		bad += h[i] != 2000;
	CHECK(failures == 0 && h && bad == 0, "%d failed launches, %d wrong elements", failures, bad);
	for (int i = 0; i < T; i++)
		aql_buf_destroy(parts[i]);
	aql_buf_destroy(data);
	aql_queue_destroy(q);
}

/* A progress callback that holds the read in flight until released. */
static int held_read(uint64_t done, uint64_t total, void *user)
{
	int *release = user;

	(void)done;
	(void)total;
	while (!__atomic_load_n(release, __ATOMIC_ACQUIRE))
		th_sleep_ms(1);
	return 0;
}

/* A file read into a buffer chains into a launch with no host round trip. */
static void test_file_chain(void)
{
	aql_host_agent_config cfg = { .workers = 1, .separate_memory = 1 };
	enum { N = 4096 };
	char path[] = "/var/tmp/aql-test-launch-XXXXXX";
	int fd = mkstemp(path), release = 0, bad = 0;
	int32_t *data = malloc(N * sizeof(*data));
	aql_agent *agent = NULL;
	aql_queue *q = NULL;
	aql_buf *in = buf_i32(N, AQL_IN, "from file"), *out = buf_i32(N, AQL_OUT, "doubled");
	aql_signal *read_done = th_signal(1);
	aql_file_read_options o = { .progress = held_read, .progress_user = &release };
	aql_file_read_op *op = NULL;
	aql_launch_config c = grid1(N);
	aql_completion after, done;

	CHECK(fd >= 0 && data, "temporary file %s", path);
	for (int i = 0; i < N; i++)
		data[i] = 3 * i - 7;
	CHECK(write(fd, data, N * sizeof(*data)) == (ssize_t)(N * sizeof(*data)), "write %s", path);
	close(fd);
	if (th_test_gpu())
		agent = th_test_agent();
	else
		CHECK_OK(aql_host_agent_create(&cfg, &agent));
	CHECK_OK(aql_queue_create(agent, NULL, &q));
	CHECK(aql_buf_read_file(in, path, 4, NULL, NULL, NULL) == AQL_ERR_INVALID_ARG,
	      "a read past the end of the file was accepted: %s", aql_error_message());
	CHECK_OK(aql_buf_read_file(in, path, 0, &o, read_done, &op));
	expect_refused(AQL_LAUNCH(q, k_twice, &c, NULL, AQL_ARG(in), AQL_ARG(out), AQL_ARG((uint32_t)N)),
		       AQL_ERR_BUSY, "launch on a buffer still being read", "written by a file read");
	after = aql_completion_of_signal(read_done);
	c.after = &after;
	c.after_count = 1;
	CHECK_OK(AQL_LAUNCH(q, k_twice, &c, &done, AQL_ARG(in), AQL_ARG(out), AQL_ARG((uint32_t)N)));
	th_sleep_ms(5);
	CHECK(!aql_completion_done(done), "the launch ran before the file was read");
	__atomic_store_n(&release, 1, __ATOMIC_RELEASE);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_DONE(aql_file_read_wait(op, TH_TIMEOUT_NS, NULL));
	const int32_t *h = aql_buf_data_const(out, int32_t);

	for (int i = 0; i < N && h; i++)
		bad += h[i] != 2 * (3 * i - 7);
	CHECK(h && bad == 0, "%d wrong elements computed from the file", bad);
	aql_file_read_free(op);
	unlink(path);
	free(data);
	aql_signal_destroy(read_done);
	aql_buf_destroy(in);
	aql_buf_destroy(out);
	aql_queue_destroy(q);
	if (!th_test_gpu())
		CHECK_OK(aql_agent_destroy(agent));
}

/* Destroying a queue cancels launches behind a gate: their completions fail. */
static void test_cancelled(void)
{
	if (th_test_kind() == AQL_AGENT_NVIDIA) {
		th_skip("cancelling launches behind a gate",
			"a CUDA stream blocked on a dependency cannot be cancelled; the queue's destroy waits 60 s for it");
		return;
	}

	aql_queue *q = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	aql_buf *a = buf_i32(8, AQL_INOUT, "cancelled");
	aql_launch_config c = grid1(8);
	aql_completion done;
	aql_signal *gate = th_gate_close(q);

	CHECK_OK(AQL_LAUNCH(q, k_add, &c, &done, AQL_ARG(a), AQL_ARG(1), AQL_ARG(8u)));
	CHECK(aql_completion_wait(done, 1000000) == AQL_ERR_TIMEOUT, "a gated launch completed");
	aql_queue_destroy(q);
	expect_refused(th_done(aql_completion_wait(done, TH_TIMEOUT_NS)), AQL_ERR_QUEUE_ERROR,
		       "cancelled launch", "failed or was cancelled");
	CHECK(th_done(aql_buf_wait(a, TH_TIMEOUT_NS)) == AQL_ERR_QUEUE_ERROR,
	      "aql_buf_wait on a cancelled launch's buffer: %s", aql_error_message());
	CHECK_OK(aql_buf_destroy(a));
	aql_signal_destroy(gate);
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: test_launch LAUNCH_KERNELS.host.so [LAUNCH_KERNELS.{ptx,hsaco}]\n");
		return 2;
	}
	co = th_load_kernels(argv[1], argc == 3 ? argv[2] : NULL);
	k_axpy = kernel("axpy");
	k_twice = kernel("twice");
	k_add = kernel("add_i32");
	k_move = kernel("move");
	k_ids = kernel("group_ids");
	k_fill = kernel("fill_u64");
	k_dyn = kernel("dynamic_size");
	test_argument_checks();
	test_sign_fits(th_test_agent());
	test_directions();
	test_dependencies();
	test_partitions();
	test_geometry();
	test_struct_elements();
	test_kernarg_recycling();
	test_kernarg_wait();
	test_threads();
	test_file_chain();
	test_cancelled();
	aql_code_object_destroy(co);
	return th_finish();
}
