/* SPDX-License-Identifier: MIT */
/*
 * Data stays where it was last written (docs/memory.md): a 1-D heat
 * stencil ping-pongs two buffers over STEPS launches chained by their
 * completions on an agent with memory of its own (a CPU agent with
 * separate_memory, or the test agent: the emulated CUDA or KFD agent),
 * and each buffer moves to the agent once and back at most once, with
 * the results bitwise those of plain C. Host access while a launch writes
 * is refused, a host write (or a file read) makes the agent's copy stale,
 * aql_buf_to_host() brings a result back at a chosen point, and a launch
 * on another agent takes the data with it.
 */
#include <string.h>
#include <unistd.h>

#include "helpers.h"

enum { N = 4099, STEPS = 20 };
static const float K = 0.25f;

static aql_code_object *co, *host_co;
static const aql_kernel *k_heat;

static aql_buf *new_buf(const char *name)
{
	aql_buf_config c = { .name = name };
	aql_buf *b = NULL;

	CHECK_OK(aql_buf_create(AQL_TYPE(float), N, AQL_INOUT, &c, &b));
	if (!b)
		exit(1);
	return b;
}

static aql_buf_info info_of(aql_buf *b)
{
	aql_buf_info i = { 0 };

	CHECK_OK(aql_buf_get_info(b, &i));
	return i;
}

static void expect_moves(aql_buf *b, uint64_t to_agent, uint64_t to_host, const char *when)
{
	aql_buf_info i = info_of(b);

	CHECK(i.moves_to_agent == to_agent && i.moves_to_host == to_host &&
		      i.bytes_to_agent == to_agent * N * sizeof(float) &&
		      i.bytes_to_host == to_host * N * sizeof(float),
	      "%s: buffer '%s' moved %llu times to the agent (%llu bytes) and %llu back (%llu bytes); want %llu and %llu",
	      when, i.name, (unsigned long long)i.moves_to_agent,
	      (unsigned long long)i.bytes_to_agent, (unsigned long long)i.moves_to_host,
	      (unsigned long long)i.bytes_to_host, (unsigned long long)to_agent,
	      (unsigned long long)to_host);
}

/* The same arithmetic as heat_step, in plain C. */
static void heat_ref(const float *in, float *out)
{
	out[0] = in[0];
	out[N - 1] = in[N - 1];
	for (int i = 1; i < N - 1; i++)
		out[i] = in[i] + K * ((in[i - 1] - 2.0f * in[i]) + in[i + 1]);
}

static void init(float *h)
{
	for (int i = 0; i < N; i++)
		h[i] = (float)((i * 7919) % 1000) / 10.0f;
}

static int count_bad(const float *got, const float *want)
{
	int bad = 0;

	for (int i = 0; i < N; i++)
		bad += memcmp(&got[i], &want[i], sizeof(float)) != 0;
	return bad;
}

/* steps launches from src into dst and back, each after the one before. */
static aql_completion heat(aql_queue *q, aql_buf *src, aql_buf *dst, int steps,
			   const aql_completion *after)
{
	aql_launch_config c = { .grid = { N } };
	aql_completion done = after ? *after : (aql_completion){ 0 };

	for (int s = 0; s < steps; s++) {
		aql_buf *in = s % 2 ? dst : src, *out = s % 2 ? src : dst;

		c.after = s || after ? &done : NULL;
		c.after_count = s || after ? 1 : 0;
		CHECK_OK(AQL_LAUNCH(q, k_heat, &c, &done, AQL_ARG(in), AQL_ARG(out), AQL_ARG(K),
				    AQL_ARG((uint32_t)N)));
	}
	return done;
}

/* The goal: STEPS chained launches move each buffer in once, out at most once. */
static void test_stencil(aql_agent *agent)
{
	aql_queue *q = NULL;
	aql_buf *a = new_buf("heat a"), *b = new_buf("heat b");
	float *ref = malloc(2 * N * sizeof(float)), *r0 = ref, *r1 = ref + N, *t;
	aql_launch_stats s;
	aql_completion done;
	const float *h;

	CHECK(ref != NULL, "out of memory");
	CHECK_OK(aql_queue_create(agent, NULL, &q));
	init(aql_buf_data(a, float));
	init(r0);
	for (int i = 0; i < STEPS; i++) {
		heat_ref(r0, r1);
		t = r0;
		r0 = r1;
		r1 = t;
	}
	done = heat(q, a, b, STEPS, NULL);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.launches == STEPS && s.copies_in == 2 && s.copies_out == 0 &&
		      s.bytes_in == 2 * N * sizeof(float) && s.bytes_out == 0,
	      "%d chained steps: %llu launches, %llu copies in (%llu bytes), %llu out (%llu bytes)",
	      STEPS, (unsigned long long)s.launches, (unsigned long long)s.copies_in,
	      (unsigned long long)s.bytes_in, (unsigned long long)s.copies_out,
	      (unsigned long long)s.bytes_out);
	expect_moves(a, 1, 0, "after the steps");
	expect_moves(b, 1, 0, "after the steps");
	/* STEPS is even: the result is in a. Reading it brings it back, once. */
	h = aql_buf_data_const(a, float);
	CHECK(h && count_bad(h, r0) == 0, "%d elements differ from plain C after %d steps",
	      h ? count_bad(h, r0) : N, STEPS);
	expect_moves(a, 1, 1, "after the host read the result");
	h = aql_buf_data_const(a, float);
	expect_moves(a, 1, 1, "after a second host read");
	expect_moves(b, 1, 0, "b, never asked for");

	/* A read-only host access declares no write: the next step copies nothing in. */
	done = heat(q, a, b, 1, NULL);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	expect_moves(a, 1, 1, "a step after a const host access");
	heat_ref(r0, r1);
	CHECK_OK(aql_buf_wait(b, TH_TIMEOUT_NS));
	expect_moves(b, 1, 1, "aql_buf_wait after a step that wrote b");
	h = aql_buf_data_const(b, float);
	CHECK(h && count_bad(h, r1) == 0, "%d elements of b wrong after one more step",
	      h ? count_bad(h, r1) : N);
	expect_moves(b, 1, 1, "host read after aql_buf_wait");

	/* A host write marks the agent's copy stale: the next step takes it. */
	float *w = aql_buf_data(a, float);

	CHECK(w != NULL, "writable access to a: %s", aql_error_message());
	if (w) {
		w[N / 2] = 1000.0f;
		r0[N / 2] = 1000.0f;
	}
	done = heat(q, a, b, 1, NULL);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	expect_moves(a, 2, 1, "a step after a host write");
	heat_ref(r0, r1);
	h = aql_buf_data_const(b, float);
	CHECK(h && count_bad(h, r1) == 0, "%d elements of b miss the host's write",
	      h ? count_bad(h, r1) : N);
	expect_moves(b, 1, 2, "b read after the step that followed the host write");
	free(ref);
	aql_buf_destroy(a);
	aql_buf_destroy(b);
	aql_queue_destroy(q);
}

/* Host access while a launch writes the buffer fails, naming the kernel. */
static void test_busy(aql_agent *agent)
{
	aql_queue *q = NULL;
	aql_buf *a = new_buf("busy a"), *b = new_buf("busy b");
	aql_signal *gate;
	aql_completion done;
	float ref[N];
	const float *h;

	CHECK_OK(aql_queue_create(agent, NULL, &q));
	init(aql_buf_data(a, float));
	init(ref);
	/* a on the agent first: the launch then only reads it (a fill writes). */
	CHECK_OK(aql_buf_to_agent(a, q, NULL));
	gate = th_gate_close(q);
	done = heat(q, a, b, 1, NULL);
	h = aql_buf_data_const(b, float);
	CHECK(!h && th_error_has("are written by heat_step in flight"),
	      "host read of a buffer a launch writes: %p, %s", (const void *)h,
	      aql_error_message());
	CHECK(aql_buf_data(a, float) == NULL && th_error_has("read by heat_step"),
	      "host write of a buffer a launch reads: %s", aql_error_message());
	CHECK(aql_buf_data_const(a, float) != NULL, "host read of a buffer a launch only reads: %s",
	      aql_error_message());
	expect_moves(b, 1, 0, "while refused");
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	h = aql_buf_data_const(b, float);
	CHECK(h && h[0] == ref[0] && h[N - 1] == ref[N - 1], "b after the gate opened");
	expect_moves(b, 1, 1, "read after completion");
	aql_buf_destroy(a);
	aql_buf_destroy(b);
	aql_signal_destroy(gate);
	aql_queue_destroy(q);
}

/* aql_buf_to_host: the copy back at a chosen point, queued after the steps. */
static void test_to_host(aql_agent *agent)
{
	aql_queue *q = NULL;
	aql_buf *a = new_buf("chosen a"), *b = new_buf("chosen b");
	float r0[N], r1[N];
	aql_completion done, back;
	aql_launch_stats s;
	aql_signal *gate;
	const float *h;

	CHECK_OK(aql_queue_create(agent, NULL, &q));
	init(aql_buf_data(a, float));
	init(r0);
	heat_ref(r0, r1);
	gate = th_gate_close(q);
	done = heat(q, a, b, 1, NULL);
	CHECK_OK(aql_buf_to_host(b, q, &back));
	CHECK(!aql_completion_done(back), "the copy back completed before the launch ran");
	CHECK(aql_buf_data_const(b, float) == NULL && th_error_has("written by a copy to the host"),
	      "host read before the copy back: %s", aql_error_message());
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(back, TH_TIMEOUT_NS));
	CHECK(aql_completion_done(done), "the launch is not done after the copy behind it");
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.copies_out == 1 && s.bytes_out == N * sizeof(float),
	      "aql_buf_to_host: %llu copies out (%llu bytes)", (unsigned long long)s.copies_out,
	      (unsigned long long)s.bytes_out);
	expect_moves(b, 1, 1, "after aql_buf_to_host");
	h = aql_buf_data_const(b, float);
	CHECK(h && count_bad(h, r1) == 0, "%d elements wrong after aql_buf_to_host",
	      h ? count_bad(h, r1) : N);
	expect_moves(b, 1, 1, "a host read after aql_buf_to_host copies nothing more");
	CHECK_OK(aql_buf_to_host(b, q, NULL));
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.copies_out == 1, "aql_buf_to_host of a current buffer copied: %llu",
	      (unsigned long long)s.copies_out);
	aql_buf_destroy(a);
	aql_buf_destroy(b);
	aql_signal_destroy(gate);
	aql_queue_destroy(q);
}

/* A file read into a buffer replaces what only the agent held: a later
 * host read must not copy the agent's older result over it. */
static void test_file_replaces(aql_agent *agent)
{
	char path[] = "/var/tmp/aql-test-residency-XXXXXX";
	int fd = mkstemp(path);
	aql_queue *q = NULL;
	aql_buf *a = new_buf("file a"), *b = new_buf("file b");
	float data[N];
	aql_completion done;
	const float *h;

	CHECK(fd >= 0, "temporary file %s", path);
	for (int i = 0; i < N; i++)
		data[i] = (float)i * 0.5f - 3.0f;
	CHECK(write(fd, data, sizeof(data)) == (ssize_t)sizeof(data), "write %s", path);
	close(fd);
	CHECK_OK(aql_queue_create(agent, NULL, &q));
	init(aql_buf_data(a, float));
	done = heat(q, a, b, 1, NULL);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_buf_read_file(b, path, 0, NULL, NULL, NULL));
	h = aql_buf_data_const(b, float);
	CHECK(h && memcmp(h, data, sizeof(data)) == 0,
	      "the agent's older result came back over the file's data");
	expect_moves(b, 1, 0, "a host read after a file read");
	/* The file's data is what the next launch reads. */
	done = heat(q, b, a, 1, NULL);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	expect_moves(b, 2, 0, "a launch after a file read");
	unlink(path);
	aql_buf_destroy(a);
	aql_buf_destroy(b);
	aql_queue_destroy(q);
}

/*
 * A launch on another agent takes the data with it through the host:
 * refused while work on the first agent is in flight, then what only the
 * first agent held is copied back before the second uses it.
 */
static void test_other_agent(aql_agent *first, aql_agent *second, const aql_kernel *k2)
{
	aql_queue *q1 = NULL, *q2 = NULL;
	aql_buf *a = new_buf("moving a"), *b = new_buf("moving b");
	aql_launch_config c = { .grid = { N } };
	aql_agent_info i2;
	float r0[N], r1[N];
	aql_completion done;
	aql_signal *gate;
	const float *h;
	int sep;

	CHECK_OK(aql_agent_get_info(second, &i2));
	sep = !i2.unified_memory;
	CHECK_OK(aql_queue_create(first, NULL, &q1));
	CHECK_OK(aql_queue_create(second, NULL, &q2));
	init(aql_buf_data(a, float));
	init(r0);
	heat_ref(r0, r1);
	heat_ref(r1, r0);
	gate = th_gate_close(q1);
	done = heat(q1, a, b, 1, NULL);
	c.after = &done;
	c.after_count = 1;
	CHECK(AQL_LAUNCH(q2, k2, &c, NULL, AQL_ARG(b), AQL_ARG(a), AQL_ARG(K),
			 AQL_ARG((uint32_t)N)) == AQL_ERR_BUSY &&
		      th_error_has("is on another agent, where heat_step uses"),
	      "a launch on another agent while the first writes: %s", aql_error_message());
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(AQL_LAUNCH(q2, k2, &c, &done, AQL_ARG(b), AQL_ARG(a), AQL_ARG(K),
			    AQL_ARG((uint32_t)N)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(info_of(a).agent == second && info_of(b).agent == second,
	      "the buffers did not move to the second agent");
	/* b came back from the first agent, then (separate) went to the second;
	 * a had nothing newer there than the host. */
	expect_moves(b, 1 + (uint64_t)sep, 1, "b, written on the first agent, read on the second");
	expect_moves(a, 1 + (uint64_t)sep, 0, "a, read on the first agent, written on the second");
	h = aql_buf_data_const(a, float);
	CHECK(h && count_bad(h, r0) == 0, "%d elements wrong after two agents",
	      h ? count_bad(h, r0) : N);
	expect_moves(a, 1 + (uint64_t)sep, (uint64_t)sep, "a read on the host");
	aql_buf_destroy(a);
	aql_buf_destroy(b);
	aql_signal_destroy(gate);
	aql_queue_destroy(q1);
	aql_queue_destroy(q2);
}

int main(int argc, char **argv)
{
	aql_host_agent_config cfg = { .workers = 2, .separate_memory = 1 };
	aql_agent *agent = NULL, *other = NULL;
	aql_agent_info info;

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: test_residency LAUNCH_KERNELS.host.so [LAUNCH_KERNELS.{ptx,hsaco}]\n");
		return 2;
	}
	co = th_load_kernels(argv[1], argc == 3 ? argv[2] : NULL);
	CHECK_OK(aql_code_object_kernel(co, "heat_step", &k_heat));
	if (!k_heat)
		return 1;
	CHECK_OK(aql_host_agent_create(&cfg, &other));
	if (th_test_gpu()) {
		agent = th_test_agent();
		CHECK_OK(aql_agent_get_info(agent, &info));
		CHECK(!info.unified_memory, "the GPU agent reports unified memory");
	} else {
		CHECK_OK(aql_host_agent_create(&cfg, &agent));
	}
	test_stencil(agent);
	test_busy(agent);
	test_to_host(agent);
	test_file_replaces(agent);
	if (th_test_gpu()) {
		/* The GPU's results go on to the default (unified) CPU agent. */
		const aql_kernel *hk = NULL;

		CHECK_OK(aql_code_object_load_file(th_agent(), argv[1], NULL, &host_co));
		CHECK_OK(aql_code_object_kernel(host_co, "heat_step", &hk));
		if (hk)
			test_other_agent(agent, th_agent(), hk);
	} else {
		test_other_agent(agent, other, k_heat);
	}
	aql_code_object_destroy(co);
	if (host_co)
		aql_code_object_destroy(host_co);
	if (!th_test_gpu())
		CHECK_OK(aql_agent_destroy(agent));
	CHECK_OK(aql_agent_destroy(other));
	return th_finish();
}
