/* SPDX-License-Identifier: MIT */
/*
 * Waiting beside other work: the poll budgets that waits learn from the
 * waits before them (util/spin.h), and the full-ring wait, whose polls
 * wait for a batch of room but never refuse room that is there.
 */
#include <string.h>

#include "helpers.h"
#include "util/spin.h"

#define MAX_NS 20000u

/* th_empty_kd's kernarg: one unused word. */
static _Alignas(16) uint64_t empty_args[2];

/* Waits that outlast the budget halve it down to the floor, never below. */
static void test_long_waits_shrink(void)
{
	struct aql_spin s = { 0 };
	uint64_t want = MAX_NS;

	CHECK(aql_spin_budget(&s, MAX_NS) == MAX_NS, "a fresh waiter polls the whole budget");
	for (int i = 0; i < 20; i++) {
		aql_spin_learn(&s, MAX_NS, 5 * (uint64_t)MAX_NS);
		want = want / 2 > AQL_SPIN_FLOOR_NS ? want / 2 : AQL_SPIN_FLOOR_NS;
		CHECK(aql_spin_budget(&s, MAX_NS) == want,
		      "after %d long waits: budget %llu, want %llu", i + 1,
		      (unsigned long long)aql_spin_budget(&s, MAX_NS), (unsigned long long)want);
	}
	CHECK(aql_spin_budget(&s, MAX_NS) == AQL_SPIN_FLOOR_NS, "long waits end at the floor");
}

/* Waits within the largest budget double it back, never past it. */
static void test_short_waits_grow(void)
{
	struct aql_spin s = { 0 };
	int steps = 0;

	for (int i = 0; i < 20; i++)
		aql_spin_learn(&s, MAX_NS, UINT64_MAX);
	while (aql_spin_budget(&s, MAX_NS) < MAX_NS && steps < 64) {
		uint64_t before = aql_spin_budget(&s, MAX_NS);

		/* Caught just within the largest budget: a longer poll pays. */
		aql_spin_learn(&s, MAX_NS, MAX_NS);
		CHECK(aql_spin_budget(&s, MAX_NS) == (2 * before < MAX_NS ? 2 * before : MAX_NS),
		      "step %d: %llu after %llu", steps,
		      (unsigned long long)aql_spin_budget(&s, MAX_NS), (unsigned long long)before);
		steps++;
	}
	CHECK(aql_spin_budget(&s, MAX_NS) == MAX_NS, "short waits restore the whole budget");
	CHECK(steps > 1 && steps < 10, "%d doublings from the floor", steps);
	aql_spin_learn(&s, MAX_NS, 0);
	CHECK(aql_spin_budget(&s, MAX_NS) == MAX_NS, "never past the largest budget");
	/* A caller with a smaller limit gets at most that. */
	CHECK(aql_spin_budget(&s, 100) == 100, "budget %llu for a 100 ns limit",
	      (unsigned long long)aql_spin_budget(&s, 100));
}

/*
 * A ring with room for the next packet, but not for the batch a polling
 * producer waits for, while the processor is held on a barrier that only
 * the test releases: the packet goes in (at the latest when the poll
 * ends), not after full_timeout_ns with AQL_ERR_QUEUE_FULL, even when
 * full_timeout_ns ends before the poll budget.
 */
static void test_room_without_batch(uint64_t timeout_ns)
{
	enum { SIZE = 64 };
	aql_queue_config c = { .size = SIZE, .type = AQL_QUEUE_SINGLE,
			       .full_timeout_ns = timeout_ns };
	aql_signal *gate = th_signal(1), *done = th_signal(1);
	aql_dispatch_packet empty = th_dispatch1(&th_empty_kd, empty_args, NULL);
	aql_dispatch_packet last = th_dispatch1(&th_empty_kd, empty_args, done);
	aql_barrier_packet hold;
	aql_queue *q = NULL;
	uint64_t t0;
	aql_status st;

	CHECK_OK(aql_queue_create(th_agent(), &c, &q));
	if (!q)
		return;
	memset(&hold, 0, sizeof(hold));
	hold.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 0, AQL_FENCE_SYSTEM,
					AQL_FENCE_SYSTEM);
	hold.dep_signal[0] = aql_signal_handle(gate);
	/* Ids 0 and 1 run; 2 holds the processor; 3..63 fill the ring. */
	th_submit(q, &empty);
	th_submit(q, &empty);
	th_submit(q, &hold);
	for (int i = 3; i < SIZE; i++)
		th_submit(q, &empty);
	th_wait_read_index(q, 2);
	/* Room for one (id 64 needs read index 1), not for 1 + SIZE / 16. */
	t0 = th_now_ns();
	st = th_submit(q, &last);
	CHECK(st == AQL_OK, "timeout %llu ns: %s: %s", (unsigned long long)timeout_ns,
	      aql_status_str(st), aql_error_message());
	CHECK(th_now_ns() - t0 < 4000000000ull, "the submit took %llu ns",
	      (unsigned long long)(th_now_ns() - t0));
	aql_signal_store(gate, 0, AQL_RELEASE);
	if (st == AQL_OK)
		CHECK(th_wait_done(done) == 0, "the last packet completed");
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(gate);
	aql_signal_destroy(done);
}

int main(void)
{
	test_long_waits_shrink();
	test_short_waits_grow();
	test_room_without_batch(4000000000ull);
	test_room_without_batch(1);
	return th_finish();
}
