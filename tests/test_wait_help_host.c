/* SPDX-License-Identifier: MIT */
/*
 * The CPU agent's waiters and producers that run packets themselves
 * (aql/host/host_agent.c, "Helpers that run packets"). A packet published
 * without a doorbell ring stays where a parked processor left it, so only
 * a waiting thread (or a producer waiting for room) can run it: without
 * the help every wait below times out. Also: no help from an agent made
 * with no_wait_help nor for a wait whose deadline is close; only the
 * waiter's packets at the head (and unsignaled ones ahead of them), only
 * the room a producer waits for; never a barrier whose condition is unmet
 * or a malformed packet (the processor fails it, with the message and
 * callback it gives without help); a kernel that faults on a waiter stops
 * the queue for good; and many waiters, producers and processors racing
 * for the claims while queues come and go, and producers flooding small
 * rings (run under TSan too: a kernel's plain counter would race were two
 * threads to run one queue's packets at once).
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include <aql/host_kernel.h>

#include "helpers.h"

/* Where a kernel ran: the thread, and how many work-items ran. */
struct where {
	pthread_t thread;
	uint32_t runs;
};

static void where_kernel(const void *kernarg)
{
	struct where *w = *(struct where *const *)kernarg;

	w->thread = pthread_self();
	__atomic_fetch_add(&w->runs, 1, __ATOMIC_RELAXED);
}

static const aql_host_kernel_descriptor where_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(where_kernel, struct where *, AQL_HOST_KD_NO_BARRIER);

/* Calls aql_host_barrier() although its descriptor says it does not. */
static void fault_kernel(const void *kernarg)
{
	where_kernel(kernarg);
	aql_host_barrier();
}

static const aql_host_kernel_descriptor fault_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(fault_kernel, struct where *, AQL_HOST_KD_NO_BARRIER);

/* What the error callback of queue() received, and on which thread. */
static struct {
	char message[256];
	pthread_t thread;
	unsigned calls;
} err;

static void on_error(aql_queue *q, aql_status status, const char *message, void *user)
{
	(void)q, (void)status, (void)user;
	snprintf(err.message, sizeof(err.message), "%s", message);
	err.thread = pthread_self();
	__atomic_fetch_add(&err.calls, 1, __ATOMIC_RELEASE);
}

/* A private agent whose processors park after 1 ns of polling. */
static aql_agent *agent(int no_help)
{
	aql_host_agent_config c = { .workers = 1, .idle_spin_ns = 1,
				    .no_wait_help = (uint8_t)no_help };
	aql_agent *a = NULL;

	CHECK_OK(aql_host_agent_create(&c, &a));
	if (!a)
		th_stop("no agent");
	return a;
}

#define QSIZE 64u

/* A queue of QSIZE on a; a producer waits full_ns for room (0: the
 * tests' timeout). */
static aql_queue *queue(aql_agent *a, enum aql_queue_type type, uint64_t full_ns)
{
	aql_queue_config c = { .size = QSIZE, .type = type,
			       .full_timeout_ns = full_ns ? full_ns : TH_TIMEOUT_NS,
			       .error_callback = on_error };
	aql_queue *q = NULL;

	CHECK_OK(aql_queue_create(a, &c, &q));
	if (!q)
		th_stop("no queue");
	return q;
}

/*
 * Until q's processor sleeps on its doorbell: it announced itself there
 * (waiters) and marked the sleep (1), and no ring has woken it since (a
 * wake marks 2, then 0). It no longer looks at the ring until a ring.
 */
static void await_parked(aql_queue *q)
{
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	while (!__atomic_load_n(&q->doorbell->waiters, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&q->doorbell->sleeping, __ATOMIC_ACQUIRE) != 1) {
		if (th_now_ns() > end)
			th_stop("the processor never parked");
		th_sleep_ms(1);
	}
}

/* Publish packets without ringing the doorbell; returns the first id. */
static uint64_t publish(aql_queue *q, const aql_packet *packets, uint32_t n)
{
	uint64_t id = 0;

	CHECK_OK(aql_queue_reserve(q, n, &id));
	for (uint32_t i = n; i-- > 0;)
		aql_packet_store(aql_queue_slot(q, id + i), &packets[i]);
	return id;
}

static aql_packet dispatch(const aql_host_kernel_descriptor *kd, struct where **arg,
			   aql_signal *done)
{
	aql_packet p;

	p.dispatch = th_dispatch1(kd, arg, done);
	return p;
}

static aql_status wait_ns(aql_signal *s, uint64_t timeout_ns, enum aql_wait_hint hint)
{
	return aql_signal_wait(s, AQL_COND_LT, 1, timeout_ns, hint, NULL);
}

/* In each wait mode, the waiter runs its unrung packet on its thread. */
static void test_waiter_runs_it(void)
{
	static const enum aql_wait_hint hints[] = { AQL_WAIT_BLOCKED, AQL_WAIT_SPIN_BLOCK,
						    AQL_WAIT_ACTIVE };
	aql_agent *a = agent(0);
	aql_queue *q = queue(a, AQL_QUEUE_SINGLE, 0);
	static _Alignas(16) struct where *arg;
	static struct where w;
	aql_signal *s = th_signal(1);
	aql_packet p = dispatch(&where_kd, &arg, s);

	arg = &w;
	for (uint32_t k = 0; k < 3; k++) {
		aql_signal_store(s, 1, AQL_RELAXED);
		await_parked(q);
		publish(q, &p, 1);
		CHECK_DONE(wait_ns(s, TH_TIMEOUT_NS, hints[k]));
		CHECK(w.runs == k + 1, "hint %u: the kernel ran %u times", k, w.runs);
		CHECK(pthread_equal(w.thread, pthread_self()),
		      "hint %u: the kernel ran on another thread", k);
		CHECK(aql_signal_load(s, AQL_ACQUIRE) == 0, "hint %u: signal %lld", k,
		      (long long)aql_signal_load(s, AQL_RELAXED));
		CHECK(__atomic_load_n(&q->amd->read_dispatch_id, __ATOMIC_ACQUIRE) == k + 1,
		      "hint %u: read index %llu", k,
		      (unsigned long long)q->amd->read_dispatch_id);
	}
	/* The processor takes up where the waiter left off. */
	aql_signal_store(s, 1, AQL_RELAXED);
	CHECK_OK(th_submit(q, &p));
	th_wait_done(s);
	CHECK(w.runs == 4, "after the processor's packet: %u runs", w.runs);
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_signal_destroy(s));
	CHECK_OK(aql_agent_destroy(a));
}

/*
 * Packets without a completion signal ahead of the waiter's own (a
 * recorded graph's replay signals only its last) run on the waiter too,
 * and no further than its own: the unsignaled packet behind them stays.
 * A packet of another signal ahead of its own stops it.
 */
static void test_waiter_runs_unsignaled_ahead(void)
{
	static _Alignas(16) struct where *arg;
	static struct where w;
	aql_agent *a = agent(0);
	aql_queue *q = queue(a, AQL_QUEUE_SINGLE, 0);
	aql_signal *s = th_signal(1), *other = th_signal(1), *last = th_signal(1);
	aql_packet p[5] = { dispatch(&where_kd, &arg, NULL), dispatch(&where_kd, &arg, NULL),
			    dispatch(&where_kd, &arg, NULL), dispatch(&where_kd, &arg, s),
			    dispatch(&where_kd, &arg, NULL) };
	aql_packet q2[2] = { dispatch(&where_kd, &arg, other), dispatch(&where_kd, &arg, last) };
	uint64_t id;

	arg = &w;
	await_parked(q);
	publish(q, p, 5);
	CHECK_DONE(wait_ns(s, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED));
	CHECK(w.runs == 4 && pthread_equal(w.thread, pthread_self()) &&
	      __atomic_load_n(&q->amd->read_dispatch_id, __ATOMIC_ACQUIRE) == 4,
	      "%u runs (read index %llu), on this thread: %d", w.runs,
	      (unsigned long long)q->amd->read_dispatch_id, pthread_equal(w.thread, pthread_self()));
	/* Behind the unsignaled packet left above: another signal's, then
	 * last's. */
	id = publish(q, q2, 2);
	CHECK(wait_ns(last, 50000000, AQL_WAIT_BLOCKED) == AQL_ERR_TIMEOUT,
	      "a packet of another signal ran on the waiter");
	CHECK(w.runs == 4, "%u runs, want 4", w.runs);
	aql_queue_ring_doorbell(q, id + 1);
	CHECK(th_wait_done(last) == 0 && th_wait_done(other) == 0 && w.runs == 7,
	      "once rung: %u runs, want 7", w.runs);
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_signal_destroy(s));
	CHECK_OK(aql_signal_destroy(other));
	CHECK_OK(aql_signal_destroy(last));
	CHECK_OK(aql_agent_destroy(a));
}

/* No help from a no_wait_help agent, nor for a wait whose deadline is
 * under a millisecond away; the processor runs the packet once rung. */
static void test_no_help(void)
{
	static _Alignas(16) struct where *arg;
	static struct where w;

	arg = &w;
	for (int no_help = 1; no_help >= 0; no_help--) {
		aql_agent *a = agent(no_help);
		aql_queue *q = queue(a, AQL_QUEUE_SINGLE, 0);
		aql_signal *s = th_signal(1);
		aql_packet p = dispatch(&where_kd, &arg, s);
		uint64_t id;

		w.runs = 0;
		await_parked(q);
		id = publish(q, &p, 1);
		CHECK(wait_ns(s, no_help ? 50000000 : 500000, AQL_WAIT_BLOCKED) ==
		      AQL_ERR_TIMEOUT, "no_wait_help %d: the wait did not time out", no_help);
		CHECK(w.runs == 0, "no_wait_help %d: the kernel ran", no_help);
		/* Rung: the processor runs it (or, with help, this long wait). */
		aql_queue_ring_doorbell(q, id);
		th_wait_done(s);
		CHECK(w.runs == 1 && (!no_help || !pthread_equal(w.thread, pthread_self())),
		      "no_wait_help %d: %u runs, on this thread: %d", no_help, w.runs,
		      pthread_equal(w.thread, pthread_self()));
		CHECK_OK(aql_queue_destroy(q));
		CHECK_OK(aql_signal_destroy(s));
		CHECK_OK(aql_agent_destroy(a));
	}
}

/* Only the waiter's own packets at the head, never another signal's ahead;
 * a barrier only once its condition holds. */
static void test_only_own_ready_packets(void)
{
	static _Alignas(16) struct where *arg1, *arg2;
	static struct where w1, w2;
	aql_agent *a = agent(0);
	aql_queue *q = queue(a, AQL_QUEUE_SINGLE, 0);
	aql_signal *s1 = th_signal(1), *s2 = th_signal(2), *dep = th_signal(1);
	aql_signal *b = th_signal(1), *v = th_signal(1);
	aql_packet p[4] = { dispatch(&where_kd, &arg1, s1), dispatch(&where_kd, &arg2, s2),
			    dispatch(&where_kd, &arg2, s2), th_barrier_and(dep, b) };
	aql_packet value = th_barrier_value(dep, AQL_COND_EQ, 5, -1, v);

	arg1 = &w1;
	arg2 = &w2;
	/* A signal made in a freed one's memory keeps its wait words
	 * (aql/signal.c), so dep may carry the sleep mark its memory had as
	 * an earlier queue's doorbell: clear it (nobody waits on dep), so
	 * that a mark below is this test's. */
	__atomic_store_n(&dep->sleeping, 0, __ATOMIC_RELAXED);
	await_parked(q);
	publish(q, p, 4);
	/* s2's packets are behind s1's: the waiter leaves them. */
	CHECK(wait_ns(s2, 50000000, AQL_WAIT_BLOCKED) == AQL_ERR_TIMEOUT,
	      "a packet behind another's ran");
	CHECK(w1.runs == 0 && w2.runs == 0, "runs %u, %u", w1.runs, w2.runs);
	CHECK_DONE(wait_ns(s1, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED));
	CHECK(w1.runs == 1 && w2.runs == 0, "s1's wait: runs %u, %u", w1.runs, w2.runs);
	/* Both packets that count s2 down, at the head now. */
	CHECK_DONE(wait_ns(s2, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED));
	CHECK(w2.runs == 2 && pthread_equal(w2.thread, pthread_self()), "s2's wait: %u runs",
	      w2.runs);
	/* The barrier waits for dep: the waiter neither runs nor blocks on it. */
	CHECK(wait_ns(b, 50000000, AQL_WAIT_BLOCKED) == AQL_ERR_TIMEOUT,
	      "a barrier with an unmet dependency completed");
	/* Nor did it wait on it: a sleep mark would cost the store a call. */
	CHECK(__atomic_load_n(&dep->sleeping, __ATOMIC_ACQUIRE) == 0,
	      "the waiter left a sleep mark on the barrier's dependency");
	aql_signal_store(dep, 0, AQL_RELEASE);
	CHECK_DONE(wait_ns(b, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED));
	/* The same for BARRIER_VALUE. */
	await_parked(q);
	publish(q, &value, 1);
	CHECK(wait_ns(v, 50000000, AQL_WAIT_BLOCKED) == AQL_ERR_TIMEOUT,
	      "a BARRIER_VALUE whose condition is unmet completed");
	aql_signal_store(dep, 5, AQL_RELEASE);
	CHECK_DONE(wait_ns(v, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED));
	CHECK(q->amd->read_dispatch_id == 5, "read index %llu, want 5",
	      (unsigned long long)q->amd->read_dispatch_id);
	CHECK_OK(aql_queue_destroy(q));
	aql_signal *all[] = { s1, s2, dep, b, v };
	for (int i = 0; i < 5; i++)
		CHECK_OK(aql_signal_destroy(all[i]));
	CHECK_OK(aql_agent_destroy(a));
}

/* A malformed packet is the processor's to fail: the same message and
 * callback (on its thread) with and without help. */
static void test_malformed(void)
{
	static _Alignas(16) struct where *arg;
	char message[2][256];

	for (int no_help = 0; no_help < 2; no_help++) {
		aql_agent *a = agent(no_help);
		aql_queue *q = queue(a, AQL_QUEUE_SINGLE, 0);
		aql_signal *s = th_signal(1);
		aql_packet p = dispatch(&where_kd, &arg, s);
		uint64_t id;

		p.dispatch.kernel_object = 0;
		err.calls = 0;
		await_parked(q);
		id = publish(q, &p, 1);
		CHECK(wait_ns(s, 50000000, AQL_WAIT_BLOCKED) == AQL_ERR_TIMEOUT,
		      "no_wait_help %d: a waiter ran a malformed packet", no_help);
		CHECK(__atomic_load_n(&err.calls, __ATOMIC_ACQUIRE) == 0,
		      "no_wait_help %d: error callback before the ring", no_help);
		aql_queue_ring_doorbell(q, id);
		CHECK(th_wait_done(s) == -1, "no_wait_help %d: the malformed packet's signal",
		      no_help);
		while (!__atomic_load_n(&err.calls, __ATOMIC_ACQUIRE))
			th_sleep_ms(1);
		CHECK(err.calls == 1 && !pthread_equal(err.thread, pthread_self()),
		      "no_wait_help %d: %u callbacks, on this thread: %d", no_help, err.calls,
		      pthread_equal(err.thread, pthread_self()));
		snprintf(message[no_help], sizeof(message[0]), "%s", err.message);
		CHECK(strstr(err.message, "packet 0 (slot 0): kernel_object is null") != NULL,
		      "no_wait_help %d: message \"%s\"", no_help, err.message);
		CHECK_OK(aql_queue_destroy(q));
		CHECK_OK(aql_signal_destroy(s));
		CHECK_OK(aql_agent_destroy(a));
	}
	CHECK(strcmp(strstr(message[0], "packet 0"), strstr(message[1], "packet 0")) == 0,
	      "messages differ: \"%s\" and \"%s\"", message[0], message[1]);
}

/* A kernel that faults on the waiter stops the queue as on the processor:
 * the packet behind it is cancelled, and once rung the processor runs
 * neither again. The callback then runs on the waiter's thread. */
static void test_fault_on_waiter(void)
{
	static _Alignas(16) struct where *arg1, *arg2;
	static struct where w1, w2;
	aql_agent *a = agent(0);
	aql_queue *q = queue(a, AQL_QUEUE_SINGLE, 0);
	aql_signal *s1 = th_signal(1), *s2 = th_signal(1);
	aql_packet p[2] = { dispatch(&fault_kd, &arg1, s1), dispatch(&where_kd, &arg2, s2) };
	uint64_t id;

	arg1 = &w1;
	arg2 = &w2;
	p[0].dispatch.workgroup_size_x = 2;
	p[0].dispatch.grid_size_x = 2;
	err.calls = 0;
	await_parked(q);
	id = publish(q, p, 2);
	CHECK(th_wait_done(s1) == -1, "the faulting packet's signal");
	CHECK(w1.runs == 2 && pthread_equal(w1.thread, pthread_self()),
	      "the faulting kernel: %u work-items, on this thread: %d", w1.runs,
	      pthread_equal(w1.thread, pthread_self()));
	CHECK(aql_signal_load(s2, AQL_ACQUIRE) == -1, "the packet behind it: signal %lld",
	      (long long)aql_signal_load(s2, AQL_RELAXED));
	CHECK(err.calls == 1 && pthread_equal(err.thread, pthread_self()) &&
	      strstr(err.message, "called aql_host_barrier()"),
	      "%u callbacks, message \"%s\"", err.calls, err.message);
	aql_queue_ring_doorbell(q, id + 1);
	th_sleep_ms(50);
	CHECK(w1.runs == 2 && w2.runs == 0, "after the ring: runs %u, %u", w1.runs, w2.runs);
	CHECK(aql_queue_submit(q, &p[1]) == AQL_ERR_QUEUE_ERROR, "the queue took a packet");
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_signal_destroy(s1));
	CHECK_OK(aql_signal_destroy(s2));
	CHECK_OK(aql_agent_destroy(a));
}

/*
 * Fill q's ring with first and QSIZE - 1 dispatches behind it, unrung, so
 * that its parked processor never looks at them: only a producer waiting
 * for room can run them.
 */
static void fill_unrung(aql_queue *q, const aql_packet *first, struct where **arg,
			aql_signal *s)
{
	aql_packet p[QSIZE];

	p[0] = *first;
	for (uint32_t i = 1; i < QSIZE; i++)
		p[i] = dispatch(&where_kd, arg, s);
	await_parked(q);
	publish(q, p, QSIZE);
}

/* The packets at the head ran on this thread: runs of them, all retired,
 * and fewer than the ring (only the room waited for). */
static void check_ran_here(aql_queue *q, const struct where *w, const char *what)
{
	uint64_t read = __atomic_load_n(&q->amd->read_dispatch_id, __ATOMIC_ACQUIRE);

	CHECK(w->runs >= 1 && w->runs < QSIZE && read == w->runs &&
	      pthread_equal(w->thread, pthread_self()),
	      "%s: %u packets ran (read index %llu), on this thread: %d", what, w->runs,
	      (unsigned long long)read, pthread_equal(w->thread, pthread_self()));
}

/*
 * A producer waiting for room on a full ring whose processor is parked
 * runs the packets at the head itself: aql_queue_reserve(), and the
 * read-index poll of an HSA program on a MULTI queue. Without help both
 * would wait out their timeout. Once rung, the processor goes on from
 * where the producer left off. With one_cpu the thread and the processors
 * (which inherit its mask) share a CPU, where the producer asks again
 * until the processor has been parked a while.
 */
static void test_producer_runs_them(int one_cpu)
{
	static _Alignas(16) struct where *arg;
	static struct where w;
	cpu_set_t all, one;
	aql_queue *q, *poll;
	aql_signal *s;
	aql_packet p;
	uint64_t id = 0, read;
	aql_agent *a;

	CHECK(sched_getaffinity(0, sizeof(all), &all) == 0, "sched_getaffinity");
	if (one_cpu) {
		CPU_ZERO(&one);
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &all)) {
				CPU_SET(c, &one);
				break;
			}
		CHECK(sched_setaffinity(0, sizeof(one), &one) == 0, "sched_setaffinity");
	}
	a = agent(0);
	q = queue(a, AQL_QUEUE_SINGLE, 0);
	poll = queue(a, AQL_QUEUE_MULTI, 0);
	s = th_signal(2 * QSIZE + 1);
	p = dispatch(&where_kd, &arg, s);
	arg = &w;
	w.runs = 0;
	fill_unrung(q, &p, &arg, s);
	CHECK_OK(aql_queue_reserve(q, 1, &id));
	CHECK(id == QSIZE, "reserved id %llu, want %u", (unsigned long long)id, QSIZE);
	check_ran_here(q, &w, "aql_queue_reserve");
	aql_packet_store(aql_queue_slot(q, id), &p);
	aql_queue_ring_doorbell(q, id);
	th_wait_read_index(q, id + 1);
	w.runs = 0;
	fill_unrung(poll, &p, &arg, s);
	read = aql_queue_load_read_index(poll, TH_TIMEOUT_NS);
	CHECK(read == w.runs, "the poll's read index %llu after %u runs",
	      (unsigned long long)read, w.runs);
	check_ran_here(poll, &w, "aql_queue_load_read_index");
	aql_queue_ring_doorbell(poll, QSIZE - 1);
	CHECK(th_wait_done(s) == 0, "not every packet completed");
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_queue_destroy(poll));
	CHECK_OK(aql_signal_destroy(s));
	CHECK_OK(aql_agent_destroy(a));
	CHECK(sched_setaffinity(0, sizeof(all), &all) == 0, "sched_setaffinity back");
}

/*
 * No producer runs packets on a no_wait_help agent, for a room wait whose
 * timeout is under a millisecond, nor a barrier whose condition is unmet
 * or a malformed packet at the head: each reserve times out on its full
 * ring. Once rung, the processor runs what is there (the malformed packet
 * fails its queue, as without help).
 */
static void test_producer_no_help(void)
{
	static _Alignas(16) struct where *arg;
	static struct where w;
	aql_signal *s = th_signal(0), *dep = th_signal(1), *b = th_signal(1);
	struct {
		int no_help;
		uint64_t full_ns;
		aql_packet first;
		const char *what;
	} cases[] = {
		{ 1, 50000000, dispatch(&where_kd, &arg, s), "no_wait_help" },
		{ 0, 500000, dispatch(&where_kd, &arg, s), "a 0.5 ms timeout" },
		{ 0, 50000000, th_barrier_and(dep, b), "an unmet barrier" },
		{ 0, 50000000, dispatch(&where_kd, &arg, s), "a malformed packet" },
	};
	uint64_t id;

	arg = &w;
	cases[3].first.dispatch.kernel_object = 0;
	for (uint32_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		aql_agent *a = agent(cases[c].no_help);
		aql_queue *q = queue(a, AQL_QUEUE_SINGLE, cases[c].full_ns);

		w.runs = 0;
		err.calls = 0;
		aql_signal_store(s, QSIZE - (c == 2), AQL_RELAXED);
		fill_unrung(q, &cases[c].first, &arg, s);
		CHECK(aql_queue_reserve(q, 1, &id) == AQL_ERR_QUEUE_FULL,
		      "%s: a reserve on a full ring did not time out", cases[c].what);
		CHECK(w.runs == 0 && q->amd->read_dispatch_id == 0, "%s: %u packets ran",
		      cases[c].what, w.runs);
		aql_signal_store(dep, 0, AQL_RELEASE);
		aql_queue_ring_doorbell(q, QSIZE - 1);
		if (c == 3) {
			/* Failed, and the packets behind it cancelled (-1 each). */
			CHECK(th_wait_done(s) < 0, "%s: its signal", cases[c].what);
			while (!__atomic_load_n(&err.calls, __ATOMIC_ACQUIRE))
				th_sleep_ms(1);
			CHECK(strstr(err.message, "kernel_object is null") && w.runs == 0,
			      "%s: message \"%s\", %u runs", cases[c].what, err.message, w.runs);
		} else {
			CHECK(th_wait_done(s) == 0 && w.runs == QSIZE - (c == 2),
			      "%s: %u runs once rung", cases[c].what, w.runs);
		}
		aql_signal_store(dep, 1, AQL_RELAXED);
		CHECK_OK(aql_queue_destroy(q));
		CHECK_OK(aql_agent_destroy(a));
	}
	CHECK_OK(aql_signal_destroy(s));
	CHECK_OK(aql_signal_destroy(dep));
	CHECK_OK(aql_signal_destroy(b));
}

/*
 * Stress: producers on two MULTI queues each submit and wait for their own
 * packets, in every wait mode, as the processors park and wake. Each
 * queue's kernels bump a plain counter: two threads running one queue's
 * packets at once would race on it (TSan) or lose counts.
 */
#define STRESS_THREADS 4
#define STRESS_ROUNDS 1500

struct stress_queue {
	aql_queue *q;
	uint64_t count;		/* plain: only the queue's packets touch it */
	uint64_t submitted;	/* atomic */
};

static struct stress_queue sq[2];
static uint64_t stress_helped;
static __thread int stress_producer;

static void count_kernel(const void *kernarg)
{
	struct stress_queue *s = *(struct stress_queue *const *)kernarg;

	s->count++;
	if (stress_producer)
		__atomic_fetch_add(&stress_helped, 1, __ATOMIC_RELAXED);
}

static const aql_host_kernel_descriptor count_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(count_kernel, struct stress_queue *, AQL_HOST_KD_NO_BARRIER);

/* Each queue's kernarg, 16-byte aligned. */
static _Alignas(16) struct stress_queue *stress_args[2][2] = { { &sq[0] }, { &sq[1] } };

static void *stress_producer_main(void *arg)
{
	static const enum aql_wait_hint hints[] = { AQL_WAIT_BLOCKED, AQL_WAIT_SPIN_BLOCK,
						    AQL_WAIT_ACTIVE };
	uint32_t t = (uint32_t)(uintptr_t)arg;
	aql_signal *s = th_signal(0), *ready = th_signal(0);

	stress_producer = 1;
	for (uint32_t i = 0; i < STRESS_ROUNDS; i++) {
		struct stress_queue *x = &sq[(i + t) & 1];
		uint32_t n = 1 + i % 3;
		aql_packet p[3];

		for (uint32_t k = 0; k < n; k++) {
			p[k].dispatch = th_dispatch1(&count_kd, stress_args[x - sq], s);
			/* Now and then a barrier (its dependency met) ends it. */
			if (k == 2 && i % 2)
				p[k] = th_barrier_and(ready, s);
			else
				__atomic_fetch_add(&x->submitted, 1, __ATOMIC_RELAXED);
		}
		aql_signal_store(s, n, AQL_RELAXED);
		if (th_submit_all(x->q, p, n) != AQL_OK)
			break;
		if (th_done(wait_ns(s, TH_TIMEOUT_NS, hints[(i / 2 + t) % 3])) != AQL_OK)
			break;
	}
	aql_signal_destroy(s);
	aql_signal_destroy(ready);
	return NULL;
}

/* Meanwhile queues come and go on the same agent, so help slots pass
 * from processor to processor while waiters scan them. The checks are
 * the main thread's (CHECK is not thread safe): churned counts rounds. */
#define CHURN_QUEUES 100

static struct where churned;

static void *churn_main(void *arg)
{
	static _Alignas(16) struct where *where_arg = &churned;
	aql_queue_config c = { .size = 64, .type = AQL_QUEUE_SINGLE };
	aql_signal *s = th_signal(1);
	aql_packet p = dispatch(&where_kd, &where_arg, s);
	aql_queue *q;

	for (uint32_t i = 0; i < CHURN_QUEUES; i++) {
		if (aql_queue_create(arg, &c, &q) != AQL_OK)
			break;
		aql_signal_store(s, 1, AQL_RELAXED);
		if (aql_queue_submit(q, &p) != AQL_OK ||
		    wait_ns(s, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED) != AQL_OK ||
		    aql_queue_destroy(q) != AQL_OK)
			break;
	}
	aql_signal_destroy(s);
	return NULL;
}

static void test_stress(void)
{
	aql_agent *a = agent(0);
	pthread_t threads[STRESS_THREADS + 1];

	for (int i = 0; i < 2; i++)
		sq[i] = (struct stress_queue){ .q = queue(a, AQL_QUEUE_MULTI, 0) };
	for (uintptr_t t = 0; t < STRESS_THREADS; t++)
		CHECK(pthread_create(&threads[t], NULL, stress_producer_main, (void *)t) == 0,
		      "pthread_create");
	CHECK(pthread_create(&threads[STRESS_THREADS], NULL, churn_main, a) == 0,
	      "pthread_create");
	for (int t = 0; t <= STRESS_THREADS; t++)
		pthread_join(threads[t], NULL);
	CHECK(churned.runs == CHURN_QUEUES, "churn: %u of %u queues ran their packet",
	      churned.runs, CHURN_QUEUES);
	for (int i = 0; i < 2; i++) {
		CHECK_OK(aql_queue_destroy(sq[i].q));
		CHECK(sq[i].count == sq[i].submitted, "queue %d: %llu kernels ran of %llu", i,
		      (unsigned long long)sq[i].count, (unsigned long long)sq[i].submitted);
	}
	printf("stress: %llu of %llu kernels ran on their waiters\n",
	       (unsigned long long)stress_helped,
	       (unsigned long long)(sq[0].submitted + sq[1].submitted));
	CHECK_OK(aql_agent_destroy(a));
}

/*
 * Stress for producers that run packets: threads flood the two MULTI
 * queues without waiting between packets, so their small rings are full
 * most of the time while the processors park (after 1 ns of polling) and
 * wake. Only every FLOOD_RING-th packet rings the doorbell, so that the
 * processors stay parked longer and the producers claim their slots
 * often. The plain counters again catch two threads running one queue's
 * packets at once.
 */
#define FLOOD_PACKETS 5000
#define FLOOD_RING 256

static void *flood_main(void *arg)
{
	uint32_t t = (uint32_t)(uintptr_t)arg;
	struct stress_queue *x = &sq[t & 1];
	aql_signal *s = th_signal(FLOOD_PACKETS);
	aql_packet p;

	p.dispatch = th_dispatch1(&count_kd, stress_args[x - sq], s);
	stress_producer = 1;
	for (uint32_t i = 1; i <= FLOOD_PACKETS; i++) {
		uint64_t id = 0;

		if (i % FLOOD_RING && i < FLOOD_PACKETS) {
			if (aql_queue_reserve(x->q, 1, &id) != AQL_OK)
				break;
			aql_packet_store(aql_queue_slot(x->q, id), &p);
		} else if (aql_queue_submit(x->q, &p) != AQL_OK) {
			break;
		}
		__atomic_fetch_add(&x->submitted, 1, __ATOMIC_RELAXED);
	}
	th_done(wait_ns(s, TH_TIMEOUT_NS, AQL_WAIT_SPIN_BLOCK));
	aql_signal_destroy(s);
	return NULL;
}

static void test_flood(void)
{
	aql_agent *a = agent(0);
	pthread_t threads[STRESS_THREADS];

	stress_helped = 0;
	for (int i = 0; i < 2; i++)
		sq[i] = (struct stress_queue){ .q = queue(a, AQL_QUEUE_MULTI, 0) };
	for (uintptr_t t = 0; t < STRESS_THREADS; t++)
		CHECK(pthread_create(&threads[t], NULL, flood_main, (void *)t) == 0,
		      "pthread_create");
	for (int t = 0; t < STRESS_THREADS; t++)
		pthread_join(threads[t], NULL);
	for (int i = 0; i < 2; i++) {
		CHECK_OK(aql_queue_destroy(sq[i].q));
		CHECK(sq[i].count == sq[i].submitted &&
		      sq[i].submitted == STRESS_THREADS / 2 * FLOOD_PACKETS,
		      "queue %d: %llu kernels ran of %llu", i, (unsigned long long)sq[i].count,
		      (unsigned long long)sq[i].submitted);
	}
	printf("flood: %llu of %llu kernels ran on their producers\n",
	       (unsigned long long)stress_helped,
	       (unsigned long long)(sq[0].submitted + sq[1].submitted));
	CHECK_OK(aql_agent_destroy(a));
}

int main(void)
{
	test_waiter_runs_it();
	test_waiter_runs_unsignaled_ahead();
	test_no_help();
	test_only_own_ready_packets();
	test_malformed();
	test_fault_on_waiter();
	test_producer_runs_them(0);
	test_producer_runs_them(1);
	test_producer_no_help();
	test_stress();
	test_flood();
	return th_finish();
}
