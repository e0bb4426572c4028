/* SPDX-License-Identifier: MIT */
/*
 * Recorded graphs (aql/graph.h) of the kernels in tests/launch/kernels.c,
 * on th_test_agent(): the CPU agent, or an emulated AMD GPU
 * (AQL_TEST_AGENT=amd). A time step recorded once and replayed, with
 * arguments changed and buffers rebound between replays; stale buffers
 * moved by a replay (a CPU agent with separate memory, or the GPU);
 * copies, raw packets and recording across queues; every bad input with
 * its message; replays and changes from several threads.
 */
#include <pthread.h>
#include <string.h>

#include "helpers.h"

static const char *host_path, *gpu_path;
static aql_code_object *co;
static const aql_kernel *k_add, *k_twice;

static const aql_kernel *kernel_of(aql_code_object *c, const char *name)
{
	const aql_kernel *k = NULL;

	CHECK_OK(aql_code_object_kernel(c, name, &k));
	if (!k)
		exit(1);
	return k;
}

static aql_buf *buf_i32(uint64_t n, enum aql_direction dir, const char *name)
{
	aql_buf_config c = { .name = name };
	aql_buf *b = NULL;

	CHECK_OK(aql_buf_create(AQL_TYPE(int32_t), n, dir, &c, &b));
	if (!b)
		exit(1);
	return b;
}

static void expect_refused(aql_status st, aql_status want, const char *what, const char *needle)
{
	CHECK(st == want, "%s: got %s (%s)", what, aql_status_str(st), aql_error_message());
	CHECK(th_error_has(needle), "%s: message lacks \"%s\"", what, needle);
}

static void fill(aql_buf *b, int32_t v, uint32_t n)
{
	int32_t *h = aql_buf_data(b, int32_t);

	for (uint32_t i = 0; i < n; i++)
		h[i] = v + (int32_t)i;
}

/* Elements of b that differ from base + i + add. */
static int wrong(aql_buf *b, int32_t base, int32_t add, uint32_t n)
{
	const int32_t *h = aql_buf_data_const(b, int32_t);
	int bad = 0;

	for (uint32_t i = 0; h && i < n; i++)
		bad += h[i] != base + (int32_t)i + add;
	return h ? bad : -1;
}

/* b[0] for a message, or the reason host access failed. */
static int first(aql_buf *b)
{
	const int32_t *h = aql_buf_data_const(b, int32_t);

	if (!h)
		fprintf(stderr, "host access: %s\n", aql_error_message());
	return h ? h[0] : -1;
}

enum { N = 256, STEPS = 32 };

/*
 * A time step of STEPS launches of add_i32 recorded, nothing run while
 * recording; replays add what was recorded; a changed scalar and a
 * rebound buffer reach later replays only.
 */
static void test_time_step(void)
{
	aql_queue *q = th_test_queue(1024, AQL_QUEUE_MULTI, 0);
	aql_buf *a = buf_i32(N, AQL_INOUT, "a"), *b = buf_i32(N, AQL_INOUT, "b");
	aql_launch_config c = { .grid = { N } };
	aql_completion rec, done, done2;
	aql_graph *g = NULL;
	aql_graph_exec *e = NULL;
	aql_launch_stats s0, s1;
	aql_signal *gate;

	fill(a, 0, N);
	fill(b, 1000, N);
	CHECK_OK(aql_launch_get_stats(q, &s0));
	CHECK_OK(aql_graph_begin(q, &g));
	for (int i = 0; i < STEPS; i++)
		CHECK_OK(AQL_LAUNCH(q, k_add, &c, &rec, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_OK(aql_graph_end(g));
	CHECK(wrong(a, 0, 0, N) == 0, "recording ran launches");
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	CHECK(aql_graph_exec_launches(e) == STEPS && aql_graph_exec_packets(e) == STEPS,
	      "%u launches, %u packets", aql_graph_exec_launches(e), aql_graph_exec_packets(e));

	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_OK(aql_graph_exec_replay(e, q, &done2));
	CHECK_DONE(aql_completion_wait(done2, TH_TIMEOUT_NS));
	CHECK(aql_completion_done(done), "the first replay is not done after the second");
	CHECK(wrong(a, 0, 2 * STEPS, N) == 0, "two replays did not add %d", 2 * STEPS);
	CHECK_OK(aql_launch_get_stats(q, &s1));
	CHECK(s1.launches - s0.launches == 2 * STEPS, "stats count %llu launches",
	      (unsigned long long)(s1.launches - s0.launches));

	/* Launch 5 adds 10 from now on; the replay submitted before the
	 * change, held behind a gate until after it, keeps what it was given. */
	gate = th_gate_close(q);
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_OK(aql_graph_exec_set_arg(e, 5, 1, AQL_ARG(10)));
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	aql_signal_destroy(gate);
	CHECK(wrong(a, 0, 3 * STEPS + STEPS + 9, N) == 0, "set_arg: a[0] = %d",
	      first(a));

	/* Rebind launches 0..STEPS-1 to b: a is left alone. */
	for (uint32_t l = 0; l < STEPS; l++)
		CHECK_OK(aql_graph_exec_set_arg(e, l, 0, AQL_ARG(b)));
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(wrong(b, 1000, STEPS + 9, N) == 0, "rebound: b[0] = %d",
	      first(b));
	CHECK(wrong(a, 0, 4 * STEPS + 9, N) == 0, "rebound away, a changed: a[0] = %d",
	      first(a));
	CHECK_OK(aql_graph_exec_destroy(e));
	aql_buf_destroy(a);
	aql_buf_destroy(b);
	aql_queue_destroy(q);
}

/*
 * Stale buffers: the host changes in between replays and the replay
 * copies it in, as a launch would; unchanged, nothing moves. agent has
 * separate memory, kernels are loaded on it.
 */
static void test_moves(aql_agent *agent, const aql_kernel *twice)
{
	aql_queue *q = NULL;
	aql_buf *in = buf_i32(N, AQL_IN, "in"), *out = buf_i32(N, AQL_OUT, "out");
	aql_launch_config c = { .grid = { N } };
	aql_completion done;
	aql_graph *g = NULL;
	aql_graph_exec *e = NULL;
	aql_launch_stats s0, s1, s2;
	aql_buf_info bi;

	CHECK_OK(aql_queue_create(agent, NULL, &q));
	if (!q)
		return;
	fill(in, 1, N);
	CHECK_OK(aql_graph_begin(q, &g));
	CHECK_OK(AQL_LAUNCH(q, twice, &c, NULL, AQL_ARG(in), AQL_ARG(out), AQL_ARG((uint32_t)N)));
	CHECK_OK(aql_graph_end(g));
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	CHECK_OK(aql_launch_get_stats(q, &s0));
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_launch_get_stats(q, &s1));
	CHECK(s1.copies_in - s0.copies_in == 1 && s1.bytes_in - s0.bytes_in == N * 4,
	      "first replay: %llu copies in (%llu bytes)",
	      (unsigned long long)(s1.copies_in - s0.copies_in),
	      (unsigned long long)(s1.bytes_in - s0.bytes_in));
	const int32_t *h = aql_buf_data_const(out, int32_t);

	CHECK(h && h[0] == 2 && h[N - 1] == 2 * N, "out = %d .. %d", h ? h[0] : -1,
	      h ? h[N - 1] : -1);
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_launch_get_stats(q, &s2));
	CHECK(s2.copies_in == s1.copies_in, "a replay with nothing stale copied %llu in",
	      (unsigned long long)(s2.copies_in - s1.copies_in));
	fill(in, 100, N);
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_launch_get_stats(q, &s1));
	CHECK(s1.copies_in - s2.copies_in == 1, "the host's change: %llu copies in",
	      (unsigned long long)(s1.copies_in - s2.copies_in));
	h = aql_buf_data_const(out, int32_t);
	CHECK(h && h[0] == 200 && h[N - 1] == 2 * (100 + N - 1),
	      "after the host's change out = %d .. %d", h ? h[0] : -1, h ? h[N - 1] : -1);
	CHECK_OK(aql_buf_get_info(in, &bi));
	CHECK(bi.moves_to_agent == 2, "in moved to the agent %llu times",
	      (unsigned long long)bi.moves_to_agent);
	CHECK_OK(aql_graph_exec_destroy(e));
	aql_buf_destroy(in);
	aql_buf_destroy(out);
	aql_queue_destroy(q);
}

/*
 * A copy and a raw barrier packet with a signal of its own: the replay
 * writes the copy, decrements the packet's signal, and its completion
 * covers the packet (a barrier is added after it).
 */
static void test_copies_and_packets(void)
{
	aql_agent *agent = th_test_agent();
	aql_queue *q = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	aql_signal *sig = th_signal(2);
	enum { BYTES = 4096 };
	unsigned char *src = NULL, *dst = NULL, host[BYTES], back[BYTES];
	aql_completion done;
	aql_graph *g = NULL;
	aql_graph_exec *e = NULL;
	aql_packet bar;

	CHECK_OK(aql_agent_mem_alloc(agent, BYTES, (void **)&src));
	CHECK_OK(aql_agent_mem_alloc(agent, BYTES, (void **)&dst));
	if (!src || !dst)
		exit(1);
	for (int i = 0; i < BYTES; i++)
		host[i] = (unsigned char)(i * 7);
	CHECK_OK(aql_agent_copy(agent, src, host, BYTES));
	memset(&bar, 0, sizeof(bar));
	bar.barrier.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					       AQL_FENCE_SYSTEM);
	bar.barrier.completion_signal = aql_signal_handle(sig);
	CHECK_OK(aql_graph_begin(q, &g));
	CHECK_OK(aql_queue_copy(q, dst, src, BYTES, NULL, 0, NULL));
	CHECK_OK(aql_graph_record_packet(q, &bar));
	CHECK_OK(aql_graph_end(g));
	CHECK(aql_signal_load(sig, AQL_ACQUIRE) == 2, "recording ran the packet");
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	CHECK(aql_graph_exec_packets(e) == 3, "%u packets, not copy, barrier and the end",
	      aql_graph_exec_packets(e));
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(aql_signal_load(sig, AQL_ACQUIRE) == 1, "the packet's own signal is %lld",
	      (long long)aql_signal_load(sig, AQL_ACQUIRE));
	CHECK_OK(aql_agent_copy(agent, back, dst, BYTES));
	CHECK(memcmp(host, back, BYTES) == 0, "the recorded copy moved other bytes");
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(aql_signal_load(sig, AQL_ACQUIRE) == 0, "after two replays the signal is %lld",
	      (long long)aql_signal_load(sig, AQL_ACQUIRE));
	CHECK_OK(aql_graph_exec_destroy(e));
	aql_agent_mem_free(agent, src);
	aql_agent_mem_free(agent, dst);
	aql_signal_destroy(sig);
	aql_queue_destroy(q);
}

struct hook_count {
	unsigned replayed, released;
	aql_queue *queue;	/* the last replay's */
};

static void count_replayed(void *user, aql_queue *queue)
{
	struct hook_count *c = user;

	c->replayed++;
	c->queue = queue;
}

static void count_released(void *user)
{
	((struct hook_count *)user)->released++;
}

/*
 * Graph hooks (aql_graph_record_hook()): replayed runs after each replay,
 * with the replaying queue; release once the recording and every
 * executable made from it are gone, not before.
 */
static void test_hooks(void)
{
	static const aql_graph_hook hook = { count_replayed, count_released };
	aql_queue *q = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	struct hook_count c = { 0 };
	aql_graph_exec *e1 = NULL, *e2 = NULL;
	aql_completion done;
	aql_graph *g = NULL;
	aql_buf *b = buf_i32(N, AQL_INOUT, "hooked");
	aql_launch_config cfg = { .grid = { N } };

	CHECK(aql_graph_record_hook(q, &hook, &c) == AQL_ERR_INVALID_ARG &&
	      th_error_has("records no graph"), "a hook on a queue that records nothing");
	CHECK(!aql_graph_is_recording(q) && !aql_graph_is_recording(NULL), "nothing records");
	CHECK_OK(aql_graph_begin(q, &g));
	CHECK(aql_graph_is_recording(q), "the queue records");
	CHECK(aql_graph_record_hook(q, NULL, &c) == AQL_ERR_INVALID_ARG, "a NULL hook");
	CHECK_OK(aql_graph_record_hook(q, &hook, &c));
	CHECK_OK(AQL_LAUNCH(q, k_add, &cfg, NULL, AQL_ARG(b), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_OK(aql_graph_end(g));
	CHECK_OK(aql_graph_instantiate(g, &e1));
	CHECK_OK(aql_graph_instantiate(g, &e2));
	aql_graph_destroy(g);
	CHECK_OK(aql_graph_exec_replay(e1, q, &done));
	CHECK_OK(aql_graph_exec_replay(e2, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(c.replayed == 2 && c.queue == q, "replayed ran %u times", c.replayed);
	CHECK_OK(aql_graph_exec_destroy(e1));
	CHECK(c.released == 0, "released while an executable lives");
	CHECK_OK(aql_graph_exec_destroy(e2));
	CHECK(c.released == 1, "released %u times after the last executable", c.released);
	CHECK_OK(aql_buf_destroy(b));
	aql_queue_destroy(q);
}

/*
 * cfg.after across queues: a launch on q2 after recorded work of q1 joins
 * q2 to the recording; the replay on one queue keeps the recorded order.
 * Work outside the graph, and a wait on recorded work, are refused.
 */
static void test_across_queues(void)
{
	aql_queue *q1 = th_test_queue(256, AQL_QUEUE_MULTI, 0);
	aql_queue *q2 = th_test_queue(256, AQL_QUEUE_MULTI, 0);
	aql_buf *a = buf_i32(N, AQL_INOUT, "a"), *out = buf_i32(N, AQL_OUT, "twice_out");
	aql_buf *other = buf_i32(N, AQL_INOUT, "other");
	aql_launch_config c = { .grid = { N } };
	aql_completion r1, r2, r3, outside, done;
	aql_graph *g = NULL;
	aql_graph_exec *e = NULL;

	fill(a, 0, N);
	fill(other, 0, N);
	/* Real work on q2 before the recording: outside the graph. */
	CHECK_OK(AQL_LAUNCH(q2, k_add, &c, &outside, AQL_ARG(other), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_OK(aql_graph_begin(q1, &g));
	CHECK_OK(AQL_LAUNCH(q1, k_add, &c, &r1, AQL_ARG(a), AQL_ARG(5), AQL_ARG((uint32_t)N)));
	c.after = &r1;
	c.after_count = 1;
	CHECK_OK(AQL_LAUNCH(q2, k_twice, &c, &r2, AQL_ARG(a), AQL_ARG(out), AQL_ARG((uint32_t)N)));
	c.after = &r2;
	CHECK_OK(AQL_LAUNCH(q1, k_add, &c, &r3, AQL_ARG(a), AQL_ARG(100), AQL_ARG((uint32_t)N)));
	c.after = &outside;
	expect_refused(AQL_LAUNCH(q1, k_add, &c, NULL, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)),
		       AQL_ERR_INVALID_ARG, "recorded launch after outside work",
		       "after[0] is work outside the graph");
	expect_refused(aql_completion_wait(r3, TH_TIMEOUT_NS), AQL_ERR_INVALID_ARG,
		       "wait on recorded work", "runs only when the graph is replayed");
	CHECK_OK(aql_graph_end(g));
	CHECK(wrong(a, 0, 0, N) == 0, "recording on two queues ran launches");
	c.after = &r2;
	expect_refused(AQL_LAUNCH(q2, k_add, &c, NULL, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)),
		       AQL_ERR_INVALID_ARG, "after recorded work once ended",
		       "whose recording has ended");
	/* Both queues run their work again. */
	c.after = NULL;
	c.after_count = 0;
	CHECK_OK(AQL_LAUNCH(q2, k_add, &c, &done, AQL_ARG(other), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(wrong(other, 0, 2, N) == 0, "q2 still records after the end");
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	CHECK(aql_graph_exec_launches(e) == 3, "%u launches recorded on two queues",
	      aql_graph_exec_launches(e));
	CHECK_OK(aql_graph_exec_replay(e, q2, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(wrong(a, 0, 105, N) == 0, "a after one replay: a[0] = %d",
	      first(a));
	const int32_t *h = aql_buf_data_const(out, int32_t);

	CHECK(h && h[0] == 10 && h[3] == 16, "twice ran out of order: out[0] = %d, out[3] = %d",
	      h ? h[0] : -1, h ? h[3] : -1);
	CHECK_OK(aql_graph_exec_destroy(e));
	aql_buf_destroy(a);
	aql_buf_destroy(out);
	aql_buf_destroy(other);
	aql_queue_destroy(q1);
	aql_queue_destroy(q2);
}

/* A graph of one add_i32 launch on a, recorded on q and instantiated. */
static aql_graph_exec *one_launch(aql_queue *q, aql_buf *a, int32_t add)
{
	aql_launch_config c = { .grid = { N } };
	aql_graph *g = NULL;
	aql_graph_exec *e = NULL;

	CHECK_OK(aql_graph_begin(q, &g));
	CHECK_OK(AQL_LAUNCH(q, k_add, &c, NULL, AQL_ARG(a), AQL_ARG(add), AQL_ARG((uint32_t)N)));
	CHECK_OK(aql_graph_end(g));
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	if (!e)
		exit(1);
	return e;
}

/* Changed arguments refused as AQL_LAUNCH refuses them; nothing changes. */
static void test_bad_arguments(void)
{
	aql_queue *q = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	aql_buf *a = buf_i32(N, AQL_INOUT, "a"), *small = buf_i32(N / 2, AQL_INOUT, "small");
	aql_buf *ro = buf_i32(N, AQL_IN, "read_only");
	aql_buf *f = NULL;
	aql_graph_exec *e = one_launch(q, a, 3);
	aql_completion done;

	CHECK_OK(aql_buf_create(AQL_TYPE(float), N, AQL_INOUT, NULL, &f));
	fill(a, 0, N);
	expect_refused(aql_graph_exec_set_arg(e, 0, 1, AQL_ARG(1.5f)), AQL_ERR_INVALID_ARG,
		       "float for int32_t", "kernel 'add_i32' argument 1 'add': expects int32_t, got float");
	expect_refused(aql_graph_exec_set_arg(e, 0, 2, AQL_ARG(-1)), AQL_ERR_INVALID_ARG,
		       "-1 for uint32_t", "argument 2 'n' is uint32_t; -1 is an int32_t");
	expect_refused(aql_graph_exec_set_arg(e, 0, 1, AQL_ARG((int64_t)1)), AQL_ERR_INVALID_ARG,
		       "int64_t for int32_t", "expects int32_t (4 bytes), got int64_t (8 bytes)");
	expect_refused(aql_graph_exec_set_arg(e, 0, 0, AQL_ARG(f)), AQL_ERR_INVALID_ARG,
		       "float buffer for int32_t *", "argument 0 'data': expects int32_t");
	expect_refused(aql_graph_exec_set_arg(e, 0, 0, AQL_ARG(small)), AQL_ERR_INVALID_ARG,
		       "smaller buffer", "a rebind keeps the size");
	expect_refused(aql_graph_exec_set_arg(e, 0, 0, AQL_ARG(ro)), AQL_ERR_INVALID_ARG,
		       "AQL_IN buffer written", "is AQL_IN");
	expect_refused(aql_graph_exec_set_arg(e, 0, 1, AQL_ARG(a)), AQL_ERR_INVALID_ARG,
		       "buffer for a scalar", "expects a 4-byte value");
	expect_refused(aql_graph_exec_set_arg(e, 1, 0, AQL_ARG(a)), AQL_ERR_INVALID_ARG,
		       "launch out of range", "launch 1 does not exist");
	expect_refused(aql_graph_exec_set_arg(e, 0, 3, AQL_ARG(1)), AQL_ERR_INVALID_ARG,
		       "argument out of range", "argument 3 does not exist");
	/* None of that changed the graph. */
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(wrong(a, 0, 3, N) == 0, "a refused change took effect: a[0] = %d",
	      first(a));
	CHECK_OK(aql_graph_exec_destroy(e));
	aql_buf_destroy(a);
	aql_buf_destroy(small);
	aql_buf_destroy(ro);
	aql_buf_destroy(f);
	aql_queue_destroy(q);
}

/* Put q in its error state with a dispatch of a zero grid. */
static void break_queue(aql_queue *q)
{
	aql_signal *sig = th_signal(1);
	static uint64_t kernarg[8] __attribute__((aligned(64)));
	aql_packet p;

	memset(&p, 0, sizeof(p));
	p.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
					      AQL_FENCE_SYSTEM);
	p.dispatch.setup = 1;
	p.dispatch.workgroup_size_x = p.dispatch.workgroup_size_y = p.dispatch.workgroup_size_z = 1;
	p.dispatch.grid_size_y = p.dispatch.grid_size_z = 1;
	p.dispatch.kernel_object = k_add->kernel_object;
	p.dispatch.kernarg_address = (uint64_t)(uintptr_t)kernarg;
	p.dispatch.completion_signal = aql_signal_handle(sig);
	CHECK_OK(aql_queue_submit(q, &p));
	CHECK(th_wait_done(sig) < 0, "a zero grid did not fail");
	aql_signal_destroy(sig);
}

/*
 * A replay gives its completion signal to its last packet only, which the
 * barrier bit starts after every other one has completed: the agent makes
 * one signal update per replay. A packet failing in the middle still ends
 * the replay's wait at once, with the queue's error: the agent fails the
 * signals of the packets behind the failed one.
 */
/*
 * Replay e on q held by a gate, and count the replay's packets (the last
 * aql_graph_exec_packets() written: copies may lead) that carry a
 * completion signal; *last_signed says whether the last one does.
 */
static uint32_t replay_signed(aql_queue *q, aql_graph_exec *e, aql_completion *done,
			      int *last_signed)
{
	uint32_t np = aql_graph_exec_packets(e), sign = 0;
	aql_signal *gate = th_gate_close(q);
	uint64_t end;

	CHECK_OK(aql_graph_exec_replay(e, q, done));
	end = __atomic_load_n(&q->amd->write_dispatch_id, __ATOMIC_ACQUIRE);
	for (uint64_t id = end - np; id < end; id++)
		sign += aql_queue_slot(q, id)->dispatch.completion_signal != 0;
	*last_signed = aql_queue_slot(q, end - 1)->dispatch.completion_signal != 0;
	th_gate_open(gate);
	aql_signal_destroy(gate);
	return sign;
}

static void test_one_signal(void)
{
	aql_queue *q = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	aql_buf *a = buf_i32(N, AQL_INOUT, "a");
	aql_launch_config c = { .grid = { N } };
	static uint64_t kernarg[8] __attribute__((aligned(64)));
	aql_graph *g = NULL;
	aql_graph_exec *e = NULL;
	aql_completion done;
	aql_packet bad;
	uint32_t np, sign;
	int last_signed;
	aql_status st;

	fill(a, 0, N);
	CHECK_OK(aql_graph_begin(q, &g));
	for (int i = 0; i < 4; i++)
		CHECK_OK(AQL_LAUNCH(q, k_add, &c, NULL, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_OK(aql_graph_end(g));
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	np = aql_graph_exec_packets(e);
	sign = replay_signed(q, e, &done, &last_signed);
	CHECK(np == 4 && sign == 1 && last_signed,
	      "%u of the replay's %u packets carry a completion signal; only the last should",
	      sign, np);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(wrong(a, 0, 4, N) == 0, "after one replay a[0] = %d", first(a));
	CHECK_OK(aql_graph_exec_destroy(e));

	/* A last packet without the barrier bit orders nothing: then every
	 * packet carries the signal, as typed launches do. */
	memset(&bad, 0, sizeof(bad));
	bad.barrier.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 0, AQL_FENCE_SYSTEM,
					       AQL_FENCE_SYSTEM);
	CHECK_OK(aql_graph_begin(q, &g));
	for (int i = 0; i < 2; i++)
		CHECK_OK(AQL_LAUNCH(q, k_add, &c, NULL, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_OK(aql_graph_record_packet(q, &bad));
	CHECK_OK(aql_graph_end(g));
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	np = aql_graph_exec_packets(e);
	sign = replay_signed(q, e, &done, &last_signed);
	CHECK(np == 3 && sign == 3, "%u of the replay's %u packets carry a completion signal; all should",
	      sign, np);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(wrong(a, 0, 6, N) == 0, "after two replays a[0] = %d", first(a));
	CHECK_OK(aql_graph_exec_destroy(e));

	/* A zero grid between two launches. */
	memset(&bad, 0, sizeof(bad));
	bad.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
						AQL_FENCE_SYSTEM);
	bad.dispatch.setup = 1;
	bad.dispatch.workgroup_size_x = bad.dispatch.workgroup_size_y = 1;
	bad.dispatch.workgroup_size_z = 1;
	bad.dispatch.grid_size_y = bad.dispatch.grid_size_z = 1;
	bad.dispatch.kernel_object = k_add->kernel_object;
	bad.dispatch.kernarg_address = (uint64_t)(uintptr_t)kernarg;
	CHECK_OK(aql_graph_begin(q, &g));
	CHECK_OK(AQL_LAUNCH(q, k_add, &c, NULL, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_OK(aql_graph_record_packet(q, &bad));
	CHECK_OK(AQL_LAUNCH(q, k_add, &c, NULL, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_OK(aql_graph_end(g));
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	st = aql_completion_wait(done, TH_TIMEOUT_NS);
	if (st == AQL_ERR_TIMEOUT)
		th_stop("a packet that failed in the middle of a replay left the replay's wait hanging");
	CHECK(st == AQL_ERR_QUEUE_ERROR && th_error_has("failed or was cancelled"),
	      "a replay with a failing packet: %s (%s)", aql_status_str(st), aql_error_message());
	CHECK_OK(aql_graph_exec_destroy(e));
	aql_queue_destroy(q);
	aql_buf_destroy(a);
}

/* Recording and replaying where the queue, the agent or the timing is wrong. */
static void test_bad_use(void)
{
	/* 64 packets: the smallest AMD queue. */
	aql_queue *q = th_test_queue(256, AQL_QUEUE_MULTI, 0);
	aql_queue *small = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	aql_queue *broken = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	aql_queue *gone = th_test_queue(64, AQL_QUEUE_MULTI, 0);
	aql_queue *other_q = NULL;
	aql_agent *other = NULL;
	aql_buf *a = buf_i32(N, AQL_INOUT, "a");
	aql_launch_config c = { .grid = { N } };
	aql_graph *g = NULL, *g2 = NULL;
	aql_graph_exec *e = one_launch(q, a, 1), *big = NULL;
	aql_completion done;
	aql_signal *gate;
	aql_packet inv;
	char want[160];

	fill(a, 0, N);
	/* On a queue in error. */
	break_queue(broken);
	expect_refused(aql_graph_begin(broken, &g), AQL_ERR_QUEUE_ERROR, "begin on a broken queue",
		       "stopped");
	CHECK(!g, "a graph was made on a broken queue");

	/* On another agent's queue. */
	CHECK_OK(aql_host_agent_create(NULL, &other));
	CHECK_OK(aql_queue_create(other, NULL, &other_q));
	expect_refused(aql_graph_exec_replay(e, other_q, &done), AQL_ERR_INVALID_ARG,
		       "replay on another agent", "recorded on another agent than queue");

	/* Destroyed while a replay is in flight. */
	gate = th_gate_close(q);
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	snprintf(want, sizeof(want), "replay 1 on queue %llu is in flight",
		 (unsigned long long)q->amd->hsa.id);
	expect_refused(aql_graph_exec_destroy(e), AQL_ERR_BUSY, "destroy in flight", want);
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(wrong(a, 0, 1, N) == 0, "the replay behind the gate: a[0] = %d",
	      first(a));
	aql_signal_destroy(gate);

	/* The same buffer written by a replay on another queue, unordered
	 * with the one in flight: refused as a launch is. */
	gate = th_gate_close(q);
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	expect_refused(aql_graph_exec_replay(e, small, NULL), AQL_ERR_BUSY,
		       "unordered replay on another queue", "'a'");
	/* Host access to what a replay in flight writes is refused, as for
	 * a launch, and aql_buf_wait() waits for the replay. */
	CHECK(!aql_buf_data_const(a, int32_t) && th_error_has("graph replay"),
	      "host access while a replay writes the buffer");
	th_gate_open(gate);
	CHECK_DONE(aql_buf_wait(a, TH_TIMEOUT_NS));
	CHECK(aql_completion_done(done), "aql_buf_wait returned before the replay ended");
	CHECK(wrong(a, 0, 2, N) == 0, "after aql_buf_wait: a[0] = %d", first(a));
	aql_signal_destroy(gate);
	CHECK_OK(aql_graph_exec_destroy(e));

	/* More packets than the queue holds. */
	CHECK_OK(aql_graph_begin(q, &g));
	for (int i = 0; i < 70; i++)
		CHECK_OK(AQL_LAUNCH(q, k_add, &c, NULL, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	/* A second begin: refused, the first recording goes on. */
	expect_refused(aql_graph_begin(q, &g2), AQL_ERR_BUSY, "second begin",
		       "aql_graph_begin without aql_graph_end");
	expect_refused(aql_graph_instantiate(g, &big), AQL_ERR_INVALID_ARG,
		       "instantiate while recording", "still recording");
	memset(&inv, 0, sizeof(inv));
	inv.header = AQL_PACKET_INVALID;
	expect_refused(aql_graph_record_packet(q, &inv), AQL_ERR_INVALID_ARG, "invalid packet",
		       "INVALID packet");
	inv.barrier.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					       AQL_FENCE_SYSTEM);
	expect_refused(aql_graph_record_packet(small, &inv), AQL_ERR_INVALID_ARG,
		       "packet on a queue that records nothing", "records no graph");
	CHECK_OK(aql_graph_end(g));
	expect_refused(aql_graph_end(g), AQL_ERR_INVALID_ARG, "second end", "ended already");
	CHECK_OK(aql_graph_instantiate(g, &big));
	aql_graph_destroy(g);
	expect_refused(aql_graph_exec_replay(big, small, &done), AQL_ERR_INVALID_ARG,
		       "replay larger than the queue", "a replay needs 70 packets");
	CHECK_OK(aql_graph_exec_destroy(big));

	/* A recording never ended: destroyed, the queue runs launches again. */
	CHECK_OK(aql_graph_begin(q, &g));
	CHECK_OK(AQL_LAUNCH(q, k_add, &c, NULL, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	aql_graph_destroy(g);
	CHECK_OK(AQL_LAUNCH(q, k_add, &c, &done, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(wrong(a, 0, 3, N) == 0, "after a recording never ended: a[0] = %d",
	      first(a));

	/* Its queue destroyed while recording: end and instantiate say so. */
	CHECK_OK(aql_graph_begin(gone, &g));
	CHECK_OK(AQL_LAUNCH(gone, k_add, &c, NULL, AQL_ARG(a), AQL_ARG(1), AQL_ARG((uint32_t)N)));
	snprintf(want, sizeof(want), "queue %llu was destroyed while it recorded",
		 (unsigned long long)gone->amd->hsa.id);
	CHECK_OK(aql_queue_destroy(gone));
	expect_refused(aql_graph_end(g), AQL_ERR_INVALID_ARG, "end after queue destroy", want);
	expect_refused(aql_graph_instantiate(g, &big), AQL_ERR_INVALID_ARG,
		       "instantiate after queue destroy", want);
	aql_graph_destroy(g);

	aql_queue_destroy(other_q);
	aql_agent_destroy(other);
	aql_queue_destroy(broken);
	aql_queue_destroy(small);
	aql_buf_destroy(a);
	aql_queue_destroy(q);
}

struct worker {
	aql_graph_exec *e;
	aql_queue *q;
	int setter;
	int failures;		/* counted here: CHECK is not thread safe */
};

enum { ROUNDS = 40 };

static void *worker(void *arg)
{
	struct worker *w = arg;
	aql_completion done = { 0 };

	for (int i = 0; i < ROUNDS; i++) {
		if (w->setter) {
			w->failures += aql_graph_exec_set_arg(w->e, 0, 1, AQL_ARG(2)) != AQL_OK;
			continue;
		}
		w->failures += aql_graph_exec_replay(w->e, w->q, &done) != AQL_OK;
		if (i % 8 == 7)
			w->failures += th_done(aql_completion_wait(done, TH_TIMEOUT_NS)) != AQL_OK;
	}
	w->failures += th_done(aql_completion_wait(done, TH_TIMEOUT_NS)) != AQL_OK;
	return NULL;
}

/* Two graphs replayed from two threads on two queues, while a third
 * thread sets an argument of the first (to the value it has). */
static void test_threads(void)
{
	aql_queue *q1 = th_test_queue(256, AQL_QUEUE_MULTI, 0);
	aql_queue *q2 = th_test_queue(256, AQL_QUEUE_MULTI, 0);
	aql_buf *a = buf_i32(N, AQL_INOUT, "a"), *b = buf_i32(N, AQL_INOUT, "b");
	struct worker w[3];
	pthread_t th[3];

	fill(a, 0, N);
	fill(b, 0, N);
	w[0] = (struct worker){ one_launch(q1, a, 2), q1, 0, 0 };
	w[1] = (struct worker){ one_launch(q2, b, 3), q2, 0, 0 };
	w[2] = (struct worker){ w[0].e, NULL, 1, 0 };
	for (int i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, worker, &w[i]);
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		CHECK(w[i].failures == 0, "thread %d: %d calls failed", i, w[i].failures);
	}
	CHECK(wrong(a, 0, 2 * ROUNDS, N) == 0, "a[0] = %d after %d replays",
	      first(a), ROUNDS);
	CHECK(wrong(b, 0, 3 * ROUNDS, N) == 0, "b[0] = %d after %d replays",
	      first(b), ROUNDS);
	CHECK_OK(aql_graph_exec_destroy(w[0].e));
	CHECK_OK(aql_graph_exec_destroy(w[1].e));
	aql_buf_destroy(a);
	aql_buf_destroy(b);
	aql_queue_destroy(q1);
	aql_queue_destroy(q2);
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: test_graph LAUNCH_KERNELS.host.so [LAUNCH_KERNELS.hsaco]\n");
		return 2;
	}
	host_path = argv[1];
	gpu_path = argc == 3 ? argv[2] : NULL;
	co = th_load_kernels(host_path, gpu_path);
	k_add = kernel_of(co, "add_i32");
	k_twice = kernel_of(co, "twice");
	test_time_step();
	test_copies_and_packets();
	test_hooks();
	test_one_signal();
	test_across_queues();
	test_bad_arguments();
	test_bad_use();
	test_threads();
	if (th_test_gpu()) {
		test_moves(th_test_agent(), k_twice);
	} else {
		aql_host_agent_config cfg = { .workers = 2, .separate_memory = 1 };
		aql_agent *sep = NULL;
		aql_code_object *sco = NULL;

		CHECK_OK(aql_host_agent_create(&cfg, &sep));
		CHECK_OK(aql_code_object_load_file(sep, host_path, NULL, &sco));
		if (sco)
			test_moves(sep, kernel_of(sco, "twice"));
		aql_code_object_destroy(sco);
		aql_agent_destroy(sep);
	}
	aql_code_object_destroy(co);
	return th_finish();
}
