/* SPDX-License-Identifier: MIT */
/*
 * Waiting beside other work: the poll budgets that waits learn from the
 * waits before them (util/spin.h); the full-ring wait, whose polls wait
 * for a batch of room but never refuse room that is there; which sleepers
 * a freed quarter ring wakes; and aql_queue_load_read_index(), the read
 * index of a producer that polls for room itself.
 */
#include <pthread.h>
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

/* A full ring polled with aql_queue_load_read_index(), or a submission
 * waiting for room, on its own thread. */
struct sleeper {
	pthread_t thread;
	aql_queue *q;
	int poll;		/* aql_queue_load_read_index(), else a submission */
	uint64_t read;		/* what the load answered */
	aql_status st;		/* what the submission answered */
	uint64_t ns;		/* how long either took */
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	aql_dispatch_packet d = th_dispatch1(&th_empty_kd, empty_args, NULL);
	uint64_t t0 = th_now_ns();

	if (s->poll)
		s->read = aql_queue_load_read_index(s->q, 20000000000ull);
	else
		s->st = aql_queue_submit(s->q, (const aql_packet *)&d);
	s->ns = th_now_ns() - t0;
	return NULL;
}

/* A kernel that runs until its flag is set: the processor stays busy,
 * neither idle nor blocked on a barrier. */
struct hold_args {
	uint32_t *release;
	uint32_t pad[2];
};

static void hold_kernel(const void *kernarg)
{
	const struct hold_args *a = kernarg;

	while (!__atomic_load_n(a->release, __ATOMIC_ACQUIRE))
		th_sleep_ms(1);
}

static const aql_host_kernel_descriptor hold_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(hold_kernel, struct hold_args, AQL_HOST_KD_NO_BARRIER);

static void start_sleepers(struct sleeper *s, int n, aql_queue *q, int polls)
{
	for (int i = 0; i < n; i++) {
		s[i] = (struct sleeper){ .q = q, .poll = i < polls };
		pthread_create(&s[i].thread, NULL, sleeper_main, &s[i]);
	}
	/* Long enough for them to poll out their budgets and sleep; one that
	 * has not yet only makes the test weaker. */
	th_sleep_ms(200);
}

/* Join n sleepers, each of which must be done well within its 20 s. */
static void join_sleepers(struct sleeper *s, int n, uint64_t min_read, const char *when)
{
	for (int i = 0; i < n; i++) {
		pthread_join(s[i].thread, NULL);
		if (s[i].poll)
			CHECK(s[i].read >= min_read && s[i].ns < 10000000000ull,
			      "%s: the read-index poll answered %llu after %llu ns (want >= %llu)",
			      when, (unsigned long long)s[i].read, (unsigned long long)s[i].ns,
			      (unsigned long long)min_read);
		else
			CHECK(s[i].st == AQL_OK && s[i].ns < 10000000000ull,
			      "%s: sleeper %d: %s after %llu ns (want AQL_OK well within 20 s)",
			      when, i, aql_status_str(s[i].st), (unsigned long long)s[i].ns);
	}
}

/*
 * Which sleepers on a full MULTI ring of 16 are woken, and when:
 * - a freed quarter ring wakes those that may hold ids (a read-index poll)
 *   and one that holds none, while the processor stays busy (a kernel at
 *   id 5 that runs until released): ids 0 (a gate), 1-4 retire, the
 *   quarter at id 3;
 * - a processor that blocks on a barrier wakes the rest, since the room
 *   is theirs too: with the ring full again, two submitters sleep; the
 *   kernel is released, ids 5-8 retire (one more woken at id 7) and the
 *   processor blocks on a second gate at id 9.
 * Each sleeper must be done long before its own 20 s, with the kernel
 * resp. the second gate still holding the processor.
 */
static void test_quarter_wakes(void)
{
	enum { SIZE = 16 };
	aql_queue_config c = { .size = SIZE, .type = AQL_QUEUE_MULTI,
			       .full_timeout_ns = 20000000000ull };
	aql_dispatch_packet empty = th_dispatch1(&th_empty_kd, empty_args, NULL), hold;
	static uint32_t release;
	static _Alignas(16) struct hold_args hold_args = { .release = &release };
	struct sleeper s[2];
	aql_signal *gate1, *gate2;
	aql_queue *q = NULL;

	CHECK_OK(aql_queue_create(th_agent(), &c, &q));
	if (!q)
		return;
	hold = th_dispatch1(&hold_kd, &hold_args, NULL);
	gate1 = th_gate_close(q);
	for (int i = 1; i < 5; i++)
		th_submit(q, &empty);
	th_submit(q, &hold);
	for (int i = 6; i < 9; i++)
		th_submit(q, &empty);
	gate2 = th_gate_close(q);
	for (int i = 10; i < SIZE; i++)
		th_submit(q, &empty);
	start_sleepers(s, 2, q, 1);
	th_gate_open(gate1);
	join_sleepers(s, 2, 4, "a quarter freed");
	CHECK(!__atomic_load_n(&release, __ATOMIC_RELAXED), "the kernel held throughout");
	/* Full again: the submitter took one id, four more fill the ring. */
	for (int i = 0; i < 4; i++)
		th_submit(q, &empty);
	start_sleepers(s, 2, q, 0);
	__atomic_store_n(&release, 1, __ATOMIC_RELEASE);
	join_sleepers(s, 2, 0, "the processor blocked");
	CHECK(aql_signal_load(gate2, AQL_ACQUIRE) == 1, "the second gate held throughout");
	th_gate_open(gate2);
	th_wait_read_index(q, SIZE + 7);
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(gate1);
	aql_signal_destroy(gate2);
}

/* Reserve the next id of q by hand, as an HSA program does. */
static uint64_t add_write_index(aql_queue *q)
{
	return __atomic_fetch_add(&q->amd->write_dispatch_id, 1, __ATOMIC_RELAXED);
}

/* Write packet at id and ring for it. */
static void publish_at(aql_queue *q, uint64_t id, const aql_dispatch_packet *packet)
{
	aql_packet_store(aql_queue_slot(q, id), (const aql_packet *)packet);
	aql_queue_ring_doorbell(q, id);
}

/*
 * A MULTI ring whose write index ran past it while the processor waits
 * for a packet not yet written (id 0, held by the poller itself): the
 * read-index poll answers at once, since only its caller can move it.
 */
static void test_load_read_index_own_packet(void)
{
	enum { SIZE = 8 };
	aql_queue *q = th_queue(SIZE, AQL_QUEUE_MULTI, 0);
	aql_dispatch_packet empty = th_dispatch1(&th_empty_kd, empty_args, NULL);
	uint64_t mine = add_write_index(q), last, t0, read;

	for (int i = 1; i < SIZE; i++)
		publish_at(q, add_write_index(q), &empty);
	last = add_write_index(q);
	t0 = th_now_ns();
	read = aql_queue_load_read_index(q, 20000000000ull);
	CHECK(read == mine && th_now_ns() - t0 < 10000000000ull,
	      "waiting for its own packet: %llu after %llu ns (want %llu at once)",
	      (unsigned long long)read, (unsigned long long)(th_now_ns() - t0),
	      (unsigned long long)mine);
	publish_at(q, mine, &empty);
	th_wait_read_index(q, 1);
	publish_at(q, last, &empty);
	th_wait_read_index(q, SIZE + 1);
	CHECK_OK(aql_queue_destroy(q));
}

/*
 * aql_queue_load_read_index(): a ring with room answers at once; a full
 * one whose processor is held answers the unmoved index at the deadline;
 * once the processor moves, the index it reached.
 */
static void test_load_read_index(void)
{
	enum { SIZE = 8 };
	aql_queue *q = th_queue(SIZE, AQL_QUEUE_SINGLE, 0);
	aql_dispatch_packet empty = th_dispatch1(&th_empty_kd, empty_args, NULL);
	aql_signal *gate;
	uint64_t t0, ns, read;

	t0 = th_now_ns();
	read = aql_queue_load_read_index(q, 20000000000ull);
	CHECK(read == 0 && th_now_ns() - t0 < 10000000000ull,
	      "an empty ring: %llu after %llu ns", (unsigned long long)read,
	      (unsigned long long)(th_now_ns() - t0));
	gate = th_gate_close(q);
	for (int i = 1; i < SIZE; i++)
		th_submit(q, &empty);
	t0 = th_now_ns();
	read = aql_queue_load_read_index(q, 50000000);
	ns = th_now_ns() - t0;
	CHECK(read == 0 && ns >= 50000000, "a held full ring: %llu after %llu ns (want 0 "
	      "at the 50 ms deadline)", (unsigned long long)read, (unsigned long long)ns);
	th_gate_open(gate);
	th_wait_read_index(q, SIZE);
	t0 = th_now_ns();
	read = aql_queue_load_read_index(q, 20000000000ull);
	CHECK(read == SIZE && th_now_ns() - t0 < 10000000000ull,
	      "a drained ring: %llu after %llu ns", (unsigned long long)read,
	      (unsigned long long)(th_now_ns() - t0));
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(gate);
}

int main(void)
{
	test_long_waits_shrink();
	test_short_waits_grow();
	test_room_without_batch(4000000000ull);
	test_room_without_batch(1);
	test_load_read_index();
	test_load_read_index_own_packet();
	test_quarter_wakes();
	return th_finish();
}
