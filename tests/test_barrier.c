/* SPDX-License-Identifier: MIT */
/*
 * Dependencies: the barrier bit, BARRIER_AND, BARRIER_OR and BARRIER_VALUE.
 * Each test checks that the dependent packet has NOT run while its
 * dependency is unmet, so a processor that ignored ordering would fail.
 */
#include <string.h>

#include "helpers.h"

static aql_barrier_packet barrier(enum aql_packet_type type, aql_signal *const deps[5],
				  aql_signal *completion)
{
	aql_barrier_packet b = {
		.header = aql_packet_header(type, 1, AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM),
		.completion_signal = aql_signal_handle(completion),
	};

	for (int i = 0; i < 5; i++)
		b.dep_signal[i] = deps[i] ? aql_signal_handle(deps[i]) : 0;
	return b;
}

/* Counter the dispatch behind a barrier increments; ms to give it a chance. */
struct gated {
	aql_queue *q;
	aql_signal *done;
	uint64_t counter;
	struct th_count_args args __attribute__((aligned(16)));
};

static void gated_start(struct gated *g, const void *barrier_packet)
{
	aql_dispatch_packet p;

	g->q = th_queue(16, AQL_QUEUE_MULTI, 0);
	g->done = th_signal(1);
	g->counter = 0;
	g->args.counter = &g->counter;
	p = th_dispatch1(&th_count_kd, &g->args, g->done);
	th_submit(g->q, barrier_packet);
	th_submit(g->q, &p);
}

static int gated_ran(struct gated *g)
{
	th_sleep_ms(20);
	return __atomic_load_n(&g->counter, __ATOMIC_ACQUIRE) != 0;
}

static void gated_end(struct gated *g)
{
	aql_signal_destroy(g->done);
	aql_queue_destroy(g->q);
}

/* AND: five slots, one null (always satisfied); released one by one. */
static void test_and(void)
{
	aql_signal *deps[5] = { th_signal(1), th_signal(1), NULL, th_signal(1), th_signal(1) };
	aql_signal *bdone = th_signal(1);
	aql_barrier_packet b = barrier(AQL_PACKET_BARRIER_AND, deps, bdone);
	struct gated g;

	gated_start(&g, &b);
	for (int i = 0; i < 5; i++) {
		if (!deps[i])
			continue;
		CHECK(!gated_ran(&g), "AND passed before dependency %d was met", i);
		aql_signal_store(deps[i], 0, AQL_RELEASE);
	}
	CHECK(th_wait_done(g.done) == 0 && g.counter == 1, "AND did not pass once all were met");
	CHECK(bdone->value == 0, "barrier completion signal %lld", (long long)bdone->value);
	gated_end(&g);
	for (int i = 0; i < 5; i++)
		aql_signal_destroy(deps[i]);
	aql_signal_destroy(bdone);
}

/* OR: passes when any one dependency is met; null slots never are. */
static void test_or(void)
{
	aql_signal *deps[5] = { NULL, th_signal(1), th_signal(1), NULL, NULL };
	aql_barrier_packet b = barrier(AQL_PACKET_BARRIER_OR, deps, NULL);
	aql_signal *none[5] = { NULL };
	aql_barrier_packet never = barrier(AQL_PACKET_BARRIER_OR, none, NULL);
	struct gated g;

	gated_start(&g, &b);
	CHECK(!gated_ran(&g), "OR passed with no dependency met");
	aql_signal_store(deps[2], 0, AQL_RELEASE);
	CHECK(th_wait_done(g.done) == 0 && g.counter == 1, "OR did not pass on one met dependency");
	gated_end(&g);

	/* All-null OR never passes; destroying the queue cancels what waits. */
	gated_start(&g, &never);
	CHECK(!gated_ran(&g), "OR with only null dependencies passed");
	aql_queue_destroy(g.q);
	CHECK(g.done->value == -1, "cancelled packet's signal is %lld, not -1",
	      (long long)g.done->value);
	aql_signal_destroy(g.done);
	for (int i = 0; i < 5; i++)
		aql_signal_destroy(deps[i]);
}

/* BARRIER_VALUE: (value & mask) cond compare, for every condition. */
static void test_barrier_value(void)
{
	static const struct {
		enum aql_signal_condition cond;
		int64_t compare, before, after;
	} cases[] = {
		{ AQL_COND_EQ, 0x30, 0x1f, 0x130 },	/* mask 0xff hides bit 8 */
		{ AQL_COND_NE, 0x05, 0x105, 0x06 },
		{ AQL_COND_LT, 0x10, 0x10, 0x0f },
		{ AQL_COND_GTE, 0x40, 0x3f, 0x41 },
	};

	for (unsigned i = 0; i < 4; i++) {
		aql_signal *s = th_signal(cases[i].before);
		aql_barrier_value_packet b = {
			.header = { aql_packet_header(AQL_PACKET_VENDOR_SPECIFIC, 1,
						      AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM),
				    AQL_AMD_PACKET_BARRIER_VALUE, 0 },
			.signal = aql_signal_handle(s),
			.value = cases[i].compare,
			.mask = 0xff,
			.cond = cases[i].cond,
		};
		struct gated g;

		gated_start(&g, &b);
		CHECK(!gated_ran(&g), "case %u passed with value 0x%llx", i,
		      (unsigned long long)cases[i].before);
		aql_signal_store(s, cases[i].after, AQL_RELEASE);
		CHECK(th_wait_done(g.done) == 0 && g.counter == 1, "case %u did not pass", i);
		gated_end(&g);
		aql_signal_destroy(s);
	}
}

/*
 * The barrier bit: a slow many-group kernel writes an array; the next
 * packet, with the barrier bit, checks every element is already written.
 */
enum { SLOW_N = 4096 };

struct __attribute__((aligned(16))) slow_args {
	uint32_t *data;
};

static void slow_writer(const void *kernarg)
{
	const struct slow_args *a = kernarg;
	uint32_t i = aql_host_global_id(0);

	if (i % 256 == 0)
		th_sleep_ms(1);
	a->data[i] = i + 1;
}

struct __attribute__((aligned(16))) check_args {
	const uint32_t *data;
	uint32_t *missing;
};

static void checker(const void *kernarg)
{
	const struct check_args *a = kernarg;

	for (uint32_t i = 0; i < SLOW_N; i++)
		*a->missing += a->data[i] != i + 1;
}

static const aql_host_kernel_descriptor slow_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(slow_writer, struct slow_args, AQL_HOST_KD_NO_BARRIER);
static const aql_host_kernel_descriptor check_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(checker, struct check_args, AQL_HOST_KD_NO_BARRIER);

static void test_barrier_bit(void)
{
	static uint32_t data[SLOW_N];
	uint32_t missing = 0;
	struct slow_args sa = { data };
	struct check_args ca = { data, &missing };
	const uint32_t grid[3] = { SLOW_N, 1, 1 };
	const uint16_t wg[3] = { 64, 1, 1 };
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *done = th_signal(1);
	aql_dispatch_packet w = th_dispatch(&slow_kd, &sa, 1, grid, wg, NULL, 0);
	aql_dispatch_packet c = th_dispatch1(&check_kd, &ca, done);

	c.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
				     AQL_FENCE_SYSTEM);
	th_submit(q, &w);
	th_submit(q, &c);
	CHECK(th_wait_done(done) == 0, "barrier-bit packet failed");
	CHECK(missing == 0, "barrier-bit packet ran before %u elements were written", missing);
	aql_signal_destroy(done);
	aql_queue_destroy(q);
}

/* A barrier on another queue's completion signal orders work across queues. */
static void test_cross_queue(void)
{
	aql_queue *q1 = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *first = th_signal(1);
	aql_signal *deps[5] = { first };
	aql_barrier_packet b = barrier(AQL_PACKET_BARRIER_AND, deps, NULL);
	aql_signal *gate = th_signal(1);
	aql_signal *gate_deps[5] = { gate };
	aql_barrier_packet hold = barrier(AQL_PACKET_BARRIER_AND, gate_deps, NULL);
	uint64_t counter = 0;
	struct th_count_args args __attribute__((aligned(16))) = { &counter };
	aql_dispatch_packet p = th_dispatch1(&th_count_kd, &args, first);
	struct gated g;

	th_submit(q1, &hold);
	th_submit(q1, &p);
	gated_start(&g, &b);
	CHECK(!gated_ran(&g), "queue 2 ran before queue 1's packet completed");
	aql_signal_store(gate, 0, AQL_RELEASE);
	CHECK(th_wait_done(g.done) == 0 && g.counter == 1 && counter == 1,
	      "cross-queue dependency did not resolve");
	gated_end(&g);
	aql_queue_destroy(q1);
	aql_signal_destroy(first);
	aql_signal_destroy(gate);
}

int main(void)
{
	test_and();
	test_or();
	test_barrier_value();
	test_barrier_bit();
	test_cross_queue();
	return th_finish();
}
