/* SPDX-License-Identifier: MIT */
/*
 * Queue-ordered MPI (aql_mpi_enqueue_*, libaql-mpi's communication agent),
 * on 2 or more ranks, CPU agents: a send waits for the launch before it in
 * its queue (held behind a closed gate, nothing is sent) and sends what
 * that launch wrote on an agent with memory of its own; a launch after a
 * receive in the same queue, and a launch on another queue after its
 * completion, see the received data; an allreduce in a queue; receives
 * into a buffer on the agent of its own memory, staged in queue order
 * (a layout's and a whole one); faults: a truncated message and a
 * send to a rank that does not exist put the queue into its error state
 * with MPI's string, the rank, the peer and the tag, and drop what comes
 * after; aql_mpi_cancel() cancels a pending receive, and so does
 * aql_queue_destroy() alone, waking a thread that waits for it; the same
 * operations recorded in a graph and replayed; an operation right behind
 * another (chained) starts only once that one ended, and one with a
 * packet between them only once that packet completed; helped waits: a
 * receive that only the waiting thread may complete ends in its wait, a
 * chained operation whose previous one has ended is posted by the
 * enqueuing thread, failures seen there are reported as the agent
 * reports them, and a destroy while a waiting thread is inside MPI_Test
 * for the queue's receive cancels it; the agent's thread runs SCHED_IDLE.
 *
 * With AQL_TEST_AGENT=nvidia or amd (and the GPU build of the kernels),
 * the agent of its own memory is the emulated CUDA or KFD agent, and only
 * the ordering and staged-receive tests run.
 *
 * Usage: mpiexec -n N test_mpi_queue LAUNCH_KERNELS.host.so
 *        [multiple|serialized|funneled] [LAUNCH_KERNELS.{ptx,hsaco}]
 */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <aql/graph.h>
#include <aql/mpi.h>

#include "helpers.h"

enum { M = 1000 };

static int rank, size, provided = -1;
static MPI_Comm comm;
static const aql_kernel *add, *add_sep;	/* on the CPU agent, on sep */

/*
 * This file's MPI_Test and MPI_Isend stand in for the library's (MPI's
 * profiling interface, PMPI_*), to see which thread moves the operations:
 * - while only is set, MPI_Test on any other thread reports nothing
 *   completed without asking MPI (as MPI may, until it has progressed):
 *   the agent's thread and the packet processors cannot end an operation,
 *   only that thread can; tested counts its completions;
 * - MPI_Isend counts the calls made on the thread that set isend_on;
 * - a thread that sets stall stops in its next MPI_Test for 100 ms, after
 *   setting stalled (and with the agent's lock held, if it helps);
 * - while stall_agent is set, the agent's thread (aql-mpi) stops in its
 *   next MPI_Test (under its lock) until agent_go is set.
 */
static pthread_t only, isend_on;
static int only_set, isend_on_set, isends, tested, stalled, stall_agent, agent_go;
static __thread int stall;

static int on_agent_thread(void)
{
	char name[16] = "";

	return !pthread_getname_np(pthread_self(), name, sizeof(name)) &&
	       !strcmp(name, "aql-mpi");
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
	int err;

	if (__atomic_load_n(&stall_agent, __ATOMIC_ACQUIRE) && on_agent_thread() &&
	    __atomic_exchange_n(&stall_agent, 0, __ATOMIC_ACQ_REL)) {
		__atomic_store_n(&stalled, 1, __ATOMIC_RELEASE);
		for (uint64_t t0 = th_now_ns(); !__atomic_load_n(&agent_go, __ATOMIC_ACQUIRE) &&
						th_now_ns() - t0 < TH_TIMEOUT_NS;)
			th_sleep_ms(1);
	}
	if (stall) {
		stall = 0;
		__atomic_store_n(&stalled, 1, __ATOMIC_RELEASE);
		th_sleep_ms(100);
	}
	/* Acquire: only is written before only_set (release). */
	if (__atomic_load_n(&only_set, __ATOMIC_ACQUIRE) && !pthread_equal(pthread_self(), only)) {
		*flag = 0;
		return MPI_SUCCESS;
	}
	err = PMPI_Test(request, flag, status);
	if (*flag && __atomic_load_n(&only_set, __ATOMIC_ACQUIRE))
		__atomic_fetch_add(&tested, 1, __ATOMIC_RELAXED);
	return err;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
	      MPI_Comm comm, MPI_Request *request)
{
	if (__atomic_load_n(&isend_on_set, __ATOMIC_ACQUIRE) &&
	    pthread_equal(pthread_self(), isend_on))
		__atomic_fetch_add(&isends, 1, __ATOMIC_RELAXED);
	return PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
}

/* Set on, then off again, by the main thread only. */
static void only_this_thread(int on)
{
	if (on)
		only = pthread_self();
	__atomic_store_n(&tested, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&only_set, on, __ATOMIC_RELEASE);
}

static void count_isends_here(int on)
{
	if (on)
		isend_on = pthread_self();
	__atomic_store_n(&isends, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&isend_on_set, on, __ATOMIC_RELEASE);
}

static int next(void)
{
	return (rank + 1) % size;
}

static int prev(void)
{
	return (rank + size - 1) % size;
}

static aql_buf *new_buf(uint64_t count, const char *name)
{
	aql_buf_config c = { .name = name };
	aql_buf *b = NULL;

	CHECK_OK(aql_buf_create(AQL_TYPE(int32_t), count, AQL_INOUT, &c, &b));
	if (!b)
		th_stop("no buffer");
	return b;
}

static aql_queue *new_queue(aql_agent *agent)
{
	aql_queue *q = NULL;

	CHECK_OK(aql_queue_create(agent, NULL, &q));
	if (!q)
		th_stop("no queue");
	return q;
}

static aql_status launch_k(aql_queue *q, const aql_kernel *k, aql_buf *b, int32_t v,
			   const aql_completion *after, aql_completion *done)
{
	aql_launch_config c = { .grid = { M }, .after = after, .after_count = after ? 1 : 0 };

	return AQL_LAUNCH(q, k, &c, done, AQL_ARG(b), AQL_ARG(v), AQL_ARG((uint32_t)M));
}

static aql_status launch_add(aql_queue *q, aql_buf *b, int32_t v, const aql_completion *after,
			     aql_completion *done)
{
	return launch_k(q, add, b, v, after, done);
}

static int count_bad(aql_buf *b, int32_t base)
{
	const int32_t *h = aql_buf_data_const(b, int32_t);
	int bad = 0;

	if (!h)
		return -1;
	for (int i = 0; i < M; i++)
		bad += h[i] != i + base;
	return bad;
}

static void test_order(aql_agent *sep)
{
	aql_queue *q = new_queue(th_agent()), *q2 = new_queue(th_agent()), *qs = new_queue(sep);
	aql_buf *d = new_buf(M, "halo out"), *e = new_buf(M, "halo in"), *g = new_buf(M, "halo in 2");
	aql_completion sdone = { 0 }, s2done = { 0 }, rdone = { 0 }, gdone = { 0 }, ldone = { 0 },
		       l2done = { 0 };
	int32_t *h = aql_buf_data(d, int32_t);
	aql_signal *gate;
	int bad;

	for (int i = 0; h && i < M; i++)
		h[i] = i + 1000 * rank;
	/* Behind a closed gate: +5 on the separate-memory agent, then two sends. */
	gate = th_gate_close(qs);
	CHECK_OK(launch_k(qs, add_sep, d, 5, NULL, NULL));
	CHECK_OK(aql_mpi_enqueue_send(qs, d, NULL, next(), 1, comm, &sdone));
	CHECK_OK(aql_mpi_enqueue_send(qs, d, NULL, next(), 2, comm, &s2done));
	/* A receive, then +1 in the same queue with no dependency given. */
	CHECK_OK(aql_mpi_enqueue_recv(q, e, NULL, prev(), 1, comm, &rdone));
	CHECK_OK(launch_add(q, e, 1, NULL, &ldone));
	/* Another receive, and +3 on another queue after its completion. */
	CHECK_OK(aql_mpi_enqueue_recv(q, g, NULL, prev(), 2, comm, &gdone));
	CHECK_OK(launch_add(q2, g, 3, &gdone, &l2done));
	th_sleep_ms(100);
	CHECK(!aql_completion_done(sdone) && !aql_completion_done(s2done),
	      "no send ended while the gate held the launch before them");
	/* Every rank's gate is still closed here: no receive can have ended.
	 * (MPI_THREAD_SERIALIZED forbids the barrier while work is pending.) */
	if (provided == MPI_THREAD_MULTIPLE) {
		MPI_Barrier(comm);
		CHECK(!aql_completion_done(rdone) && !aql_completion_done(ldone) &&
		      !aql_completion_done(l2done),
		      "nothing after a receive ended before its message was sent (recv %d launch %d)",
		      aql_completion_done(rdone), aql_completion_done(ldone));
		MPI_Barrier(comm);
	}
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(ldone, TH_TIMEOUT_NS));
	CHECK_DONE(aql_completion_wait(l2done, TH_TIMEOUT_NS));
	CHECK_DONE(aql_completion_wait(s2done, TH_TIMEOUT_NS));
	CHECK(aql_completion_done(sdone) && aql_completion_done(rdone) &&
	      aql_completion_done(gdone), "every operation ended");
	bad = count_bad(e, 1000 * prev() + 5 + 1);
	CHECK(bad == 0, "received, then +1 in queue order: %d of %d wrong", bad, M);
	bad = count_bad(g, 1000 * prev() + 5 + 3);
	CHECK(bad == 0, "received, then +3 on another queue: %d of %d wrong", bad, M);
	aql_signal_destroy(gate);
	CHECK_OK(aql_mpi_cancel(q));
	CHECK_OK(aql_mpi_cancel(q2));
	CHECK_OK(aql_mpi_cancel(qs));
	CHECK_OK(aql_buf_destroy(d));
	CHECK_OK(aql_buf_destroy(e));
	CHECK_OK(aql_buf_destroy(g));
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_queue_destroy(q2));
	CHECK_OK(aql_queue_destroy(qs));
}

/*
 * A receive into a buffer whose current copy is on the agent of its own
 * memory, of every other element (a vector layout): what the launch before
 * it wrote there comes back first, so the elements not received keep it;
 * the received ones replace theirs, and the launch after it, on that
 * agent, sees both. Then a receive of a whole buffer there, which
 * replaces the agent's copy with no copy back.
 */
static void test_recv_staged(aql_agent *sep)
{
	aql_queue *q = new_queue(th_agent()), *qs = new_queue(sep);
	aql_buf *src = new_buf(M / 2, "halo sent"), *r = new_buf(M, "halo on the agent"),
		*w = new_buf(M / 2, "whole on the agent");
	aql_buf_info info;
	aql_mpi_layout even = { .kind = AQL_MPI_VECTOR, .blocks = M / 2, .blocklen = 1,
				.stride = 2 };
	int32_t *h = aql_buf_data(src, int32_t);
	const int32_t *got;
	aql_completion sent, sent2, after, after2;
	uint64_t back;
	int bad = 0, bad2 = 0;

	for (int k = 0; h && k < M / 2; k++)
		h[k] = 100000 + 1000 * rank + k;
	h = aql_buf_data(r, int32_t);
	for (int i = 0; h && i < M; i++)
		h[i] = i;
	CHECK_OK(launch_k(qs, add_sep, r, 7, NULL, NULL));
	CHECK_OK(aql_mpi_enqueue_recv(qs, r, &even, prev(), 4, comm, NULL));
	CHECK_OK(launch_k(qs, add_sep, r, 1, NULL, &after));
	CHECK_OK(launch_k(qs, add_sep, w, 7, NULL, NULL));
	CHECK_OK(aql_buf_get_info(w, &info));
	back = info.moves_to_host;
	CHECK_OK(aql_mpi_enqueue_recv(qs, w, NULL, prev(), 5, comm, NULL));
	CHECK_OK(launch_k(qs, add_sep, w, 1, NULL, &after2));
	CHECK_OK(aql_mpi_enqueue_send(q, src, NULL, next(), 4, comm, &sent));
	CHECK_OK(aql_mpi_enqueue_send(q, src, NULL, next(), 5, comm, &sent2));
	CHECK_DONE(aql_completion_wait(after, TH_TIMEOUT_NS));
	CHECK_DONE(aql_completion_wait(after2, TH_TIMEOUT_NS));
	CHECK_DONE(aql_completion_wait(sent2, TH_TIMEOUT_NS));
	got = aql_buf_data_const(r, int32_t);
	for (int i = 0; got && i < M; i++)
		bad += got[i] != (i % 2 ? i + 7 + 1 : 100000 + 1000 * prev() + i / 2 + 1);
	CHECK(got && bad == 0,
	      "received into every other element on the agent, then +1 there: %d of %d wrong",
	      bad, M);
	CHECK_OK(aql_buf_get_info(w, &info));
	CHECK(info.moves_to_host == back, "a whole receive copied nothing back (%llu copies)",
	      (unsigned long long)(info.moves_to_host - back));
	got = aql_buf_data_const(w, int32_t);
	for (int k = 0; got && k < M / 2; k++)
		bad2 += got[k] != 100000 + 1000 * prev() + k + 1;
	CHECK(got && bad2 == 0, "received a whole buffer on the agent, then +1: %d of %d wrong",
	      bad2, M / 2);
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_queue_destroy(qs));
	CHECK_OK(aql_buf_destroy(src));
	CHECK_OK(aql_buf_destroy(r));
	CHECK_OK(aql_buf_destroy(w));
}

static void test_allreduce(void)
{
	aql_queue *q = new_queue(th_agent());
	aql_buf *s = new_buf(M, "sum");
	int32_t *h = aql_buf_data(s, int32_t);
	aql_completion done;
	int bad;

	for (int i = 0; h && i < M; i++)
		h[i] = i + rank;
	CHECK_OK(aql_mpi_enqueue_allreduce(q, NULL, s, MPI_SUM, comm, NULL));
	CHECK_OK(launch_add(q, s, 1, NULL, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	/* sum over ranks of (i + r) = size * i + size * (size - 1) / 2; then +1 */
	h = aql_buf_data(s, int32_t);
	bad = 0;
	for (int i = 0; h && i < M; i++)
		bad += h[i] != size * i + size * (size - 1) / 2 + 1;
	CHECK(h && bad == 0, "allreduce in queue order: %d wrong", bad);
	CHECK_OK(aql_mpi_cancel(q));
	CHECK_OK(aql_buf_destroy(s));
	CHECK_OK(aql_queue_destroy(q));
}

static int queue_error_has(aql_queue *q, const char *needle)
{
	const char *msg = "";

	if (aql_queue_error(q, &msg) == AQL_OK)
		return 0;
	if (strstr(msg, needle))
		return 1;
	fprintf(stderr, "  queue error \"%s\" lacks \"%s\"\n", msg, needle);
	return 0;
}

static void test_faults(void)
{
	aql_queue *q = new_queue(th_agent());
	aql_buf *ten = new_buf(10, "ten"), *five = new_buf(5, "five"), *x = new_buf(M, "after");
	aql_completion done, after;
	char want[64];

	/* Truncation: rank 0 sends ten, rank 1 receives into five. */
	if (rank == 0)
		CHECK_OK(aql_mpi_send(ten, NULL, 1, 50, comm));
	if (rank == 1) {
		/* Gated, so that the launch is in before the receive can fail. */
		aql_signal *gate = th_gate_close(q);

		CHECK_OK(aql_mpi_enqueue_recv(q, five, NULL, 0, 50, comm, &done));
		CHECK_OK(launch_add(q, x, 1, NULL, &after));
		th_gate_open(gate);
		CHECK(th_done(aql_completion_wait(done, TH_TIMEOUT_NS)) == AQL_ERR_QUEUE_ERROR,
		      "a truncated receive fails");
		CHECK(th_done(aql_completion_wait(after, TH_TIMEOUT_NS)) == AQL_ERR_QUEUE_ERROR,
		      "the launch behind it is dropped");
		CHECK(queue_error_has(q, "MPI_ERR_TRUNCATE") &&
		      queue_error_has(q, "of five failed on rank 1 (peer 0, tag 50)"),
		      "the queue names the truncation");
		aql_signal_destroy(gate);
	}
	CHECK_OK(aql_mpi_cancel(q));
	CHECK_OK(aql_queue_destroy(q));

	/* A failed MPI call: a send to a rank that does not exist. */
	q = new_queue(th_agent());
	CHECK_OK(aql_mpi_enqueue_send(q, ten, NULL, size + 3, 51, comm, &done));
	CHECK(th_done(aql_completion_wait(done, TH_TIMEOUT_NS)) == AQL_ERR_QUEUE_ERROR,
	      "a send to rank %d fails", size + 3);
	snprintf(want, sizeof(want), "on rank %d (peer %d, tag 51)", rank, size + 3);
	CHECK(queue_error_has(q, "MPI_Isend of ten") && queue_error_has(q, want),
	      "the queue names the call, rank, peer and tag");
	CHECK(aql_mpi_enqueue_send(q, ten, NULL, next(), 52, comm, NULL) == AQL_ERR_QUEUE_ERROR,
	      "a queue in its error state takes no more");
	CHECK_OK(aql_mpi_cancel(q));
	CHECK_OK(aql_queue_destroy(q));

	/* Cancel: a receive nobody sends to, and a launch behind it. */
	q = new_queue(th_agent());
	CHECK_OK(aql_mpi_enqueue_recv(q, five, NULL, prev(), 53, comm, &done));
	CHECK_OK(launch_add(q, x, 1, NULL, &after));
	th_sleep_ms(50);
	CHECK(!aql_completion_done(done) && !aql_completion_done(after), "the receive is pending");
	CHECK_OK(aql_mpi_cancel(q));
	CHECK(aql_signal_load(done.signal, AQL_ACQUIRE) < 0,
	      "the cancelled receive's completion is -1");
	CHECK(th_done(aql_completion_wait(after, TH_TIMEOUT_NS)) == AQL_ERR_QUEUE_ERROR,
	      "the launch behind it is dropped");
	CHECK(queue_error_has(q, "cancelled"), "the queue says it was cancelled");
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_buf_destroy(ten));
	CHECK_OK(aql_buf_destroy(five));
	CHECK_OK(aql_buf_destroy(x));
}

/* Whether a message from prev() with tag has arrived (MPI_THREAD_MULTIPLE). */
static int arrived(int tag)
{
	int flag = 0;

	MPI_Iprobe(prev(), tag, comm, &flag, MPI_STATUS_IGNORE);
	return flag;
}

/* Receive tag from prev() into b and check it holds base + i. */
static void recv_check(aql_buf *b, int tag, int32_t base, const char *what)
{
	int bad;

	CHECK_OK(aql_mpi_recv(b, NULL, prev(), tag, comm, MPI_STATUS_IGNORE));
	bad = count_bad(b, base);
	CHECK(bad == 0, "%s: %d of %d wrong", what, bad, M);
}

/*
 * Chaining (mpi/queue.c): a send right behind a receive in its queue may
 * start once the receive ended, before the packet processor has run the
 * packets between; it must not start before. Each rank's receive waits
 * until all have checked that no chained send went out. Then the same
 * with a closed gate between a receive that ended and the send: the send
 * must wait for the gate. The checks need MPI_THREAD_MULTIPLE (the main
 * thread calls MPI beside the agent).
 */
static void test_chain(void)
{
	aql_queue *q = new_queue(th_agent());
	aql_buf *d = new_buf(M, "chained out"), *e = new_buf(M, "chained in"),
		*f = new_buf(M, "chained check");
	aql_completion rdone = { 0 }, sdone = { 0 };
	int32_t *h = aql_buf_data(d, int32_t);
	aql_signal *gate;

	for (int i = 0; h && i < M; i++)
		h[i] = i + 1000 * rank;
	CHECK_OK(aql_mpi_enqueue_recv(q, e, NULL, prev(), 60, comm, &rdone));
	CHECK_OK(aql_mpi_enqueue_send(q, d, NULL, next(), 61, comm, &sdone));
	th_sleep_ms(100);
	MPI_Barrier(comm);
	CHECK(!arrived(61), "the chained send did not go out before the receive before it ended");
	CHECK(!aql_completion_done(rdone) && !aql_completion_done(sdone),
	      "neither ended before the message was sent (recv %d send %d)",
	      aql_completion_done(rdone), aql_completion_done(sdone));
	MPI_Barrier(comm);
	CHECK_OK(aql_mpi_send(d, NULL, next(), 60, comm));
	CHECK_DONE(aql_completion_wait(sdone, TH_TIMEOUT_NS));
	CHECK(aql_completion_done(rdone), "the receive ended before the send after it");
	recv_check(f, 61, 1000 * prev(), "the chained send's message");
	CHECK(count_bad(e, 1000 * prev()) == 0, "the receive before it got its message");

	/* A receive, a closed gate, then a send; the receive's message
	 * sent once all three are queued (before: a message over the eager
	 * limit would wait for a receive not yet queued). */
	CHECK_OK(aql_mpi_enqueue_recv(q, e, NULL, prev(), 62, comm, &rdone));
	gate = th_gate_close(q);
	CHECK_OK(aql_mpi_enqueue_send(q, d, NULL, next(), 63, comm, &sdone));
	CHECK_OK(aql_mpi_send(d, NULL, next(), 62, comm));
	CHECK_DONE(aql_completion_wait(rdone, TH_TIMEOUT_NS));
	th_sleep_ms(100);
	MPI_Barrier(comm);
	CHECK(!arrived(63) && !aql_completion_done(sdone),
	      "a send with a closed gate before it waited for the gate, not for the receive");
	MPI_Barrier(comm);
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(sdone, TH_TIMEOUT_NS));
	recv_check(f, 63, 1000 * prev(), "the send after the gate");
	aql_signal_destroy(gate);
	CHECK_OK(aql_mpi_cancel(q));
	CHECK_OK(aql_buf_destroy(d));
	CHECK_OK(aql_buf_destroy(e));
	CHECK_OK(aql_buf_destroy(f));
	CHECK_OK(aql_queue_destroy(q));
}

struct waiter {
	aql_completion c;
	aql_status st;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->st = th_done(aql_completion_wait(w->c, TH_TIMEOUT_NS));
	return NULL;
}

/*
 * Destroying a queue cancels its pending receive, with no aql_mpi_cancel():
 * a thread already waiting for it wakes with the failure, and the launch
 * behind it is dropped. Completions stay readable after the queue is gone,
 * also once a new queue's operations reuse its counters.
 */
static void test_destroy(void)
{
	aql_queue *q = new_queue(th_agent());
	aql_buf *s = new_buf(M, "destroyed sum"), *five = new_buf(5, "never sent"),
		*x = new_buf(M, "behind");
	aql_completion first, done, after;
	struct waiter w;
	pthread_t t;

	/* Operations that end well on a queue then destroyed at once: the
	 * second, chained, may end before the packet processor reaches its
	 * packets, which must then leave the counters as they are. */
	CHECK_OK(aql_mpi_enqueue_allreduce(q, NULL, s, MPI_SUM, comm, NULL));
	CHECK_OK(aql_mpi_enqueue_allreduce(q, NULL, s, MPI_SUM, comm, &first));
	CHECK_DONE(aql_completion_wait(first, TH_TIMEOUT_NS));
	CHECK_OK(aql_queue_destroy(q));
	/* A new queue (reusing those counters): a receive nobody sends to. */
	q = new_queue(th_agent());
	CHECK_OK(aql_mpi_enqueue_recv(q, five, NULL, prev(), 60, comm, &done));
	CHECK_OK(launch_add(q, x, 1, NULL, &after));
	CHECK(aql_completion_done(first) && aql_signal_load(first.signal, AQL_ACQUIRE) >= 0,
	      "a completion of a destroyed queue stays done, and good");
	w = (struct waiter){ done, AQL_OK };
	if (pthread_create(&t, NULL, wait_thread, &w))
		th_stop("no waiter thread");
	th_sleep_ms(50);
	CHECK(!aql_completion_done(done), "the receive is pending before the destroy");
	CHECK_OK(aql_queue_destroy(q));
	pthread_join(t, NULL);
	CHECK(w.st == AQL_ERR_QUEUE_ERROR, "the waiter woke with the cancelled receive's failure (%s)",
	      aql_status_str(w.st));
	CHECK(aql_signal_load(done.signal, AQL_ACQUIRE) < 0,
	      "the cancelled receive's completion is -1 after the destroy");
	CHECK(aql_signal_load(after.signal, AQL_ACQUIRE) < 0, "the launch behind it was dropped");
	CHECK_OK(aql_buf_destroy(s));
	CHECK_OK(aql_buf_destroy(five));
	CHECK_OK(aql_buf_destroy(x));
}

/* Wait for c, polling, with the helpers; AQL_ERR_TIMEOUT after 10 s. */
static aql_status helped_wait(aql_completion c)
{
	return aql_signal_wait(c.signal, AQL_COND_LT, c.below, 10ull * 1000000000,
			       AQL_WAIT_ACTIVE, NULL);
}

/* A waiter that stops in its first MPI_Test, which its wait's helper
 * makes: it polls, so that its helper, not the agent, tests the receive. */
static void *stalling_wait_thread(void *arg)
{
	struct waiter *w = arg;

	stall = 1;
	w->st = helped_wait(w->c);
	return NULL;
}

/*
 * Helped waits (mpi/queue.c's top comment). MPI_THREAD_MULTIPLE: the main
 * thread calls MPI beside the agent.
 */
static void test_helped(void)
{
	aql_queue *q = new_queue(th_agent()), *q2 = new_queue(th_agent());
	aql_buf *d = new_buf(M, "helped out"), *e = new_buf(M, "helped in"),
		*f = new_buf(M, "helped check"), *ten = new_buf(10, "ten"), *five = new_buf(5, "five");
	aql_completion rdone, ldone, sdone, s2done;
	int32_t *h = aql_buf_data(d, int32_t);
	struct waiter w;
	char want[64];
	aql_status st;
	pthread_t t;

	for (int i = 0; h && i < M; i++)
		h[i] = i + 1000 * rank;
	/* Only this thread may complete the receive: it is posted at its
	 * enqueue, its message sent after the barrier, so the wait's helper
	 * ends it (and nothing else would, the wait timing out). The wait
	 * polls (AQL_WAIT_ACTIVE): a helper only tries the agent's lock, and
	 * a wait that sleeps would leave the receive to the agent. */
	only_this_thread(1);
	CHECK_OK(aql_mpi_enqueue_recv(q, e, NULL, prev(), 80, comm, &rdone));
	CHECK_OK(launch_add(q, e, 1, NULL, &ldone));
	MPI_Barrier(comm);
	CHECK_OK(aql_mpi_send(d, NULL, next(), 80, comm));
	st = helped_wait(rdone);
	CHECK(st == AQL_OK && __atomic_load_n(&tested, __ATOMIC_RELAXED) > 0,
	      "the receive ended in the waiting thread's helper (%s, %d completions there)",
	      aql_status_str(st), __atomic_load_n(&tested, __ATOMIC_RELAXED));
	only_this_thread(0);
	CHECK_DONE(aql_completion_wait(ldone, TH_TIMEOUT_NS));
	CHECK(count_bad(e, 1000 * prev() + 1) == 0, "the launch behind the helped receive saw it");

	/* Post at enqueue: a chained send whose previous operation has ended
	 * is posted by the enqueue, on this thread; one behind a pending
	 * receive is not, and does not go out. */
	CHECK_OK(aql_mpi_enqueue_send(q2, d, NULL, next(), 81, comm, &sdone));
	CHECK_DONE(aql_completion_wait(sdone, TH_TIMEOUT_NS));
	count_isends_here(1);
	CHECK_OK(aql_mpi_enqueue_send(q2, d, NULL, next(), 82, comm, &s2done));
	CHECK(__atomic_load_n(&isends, __ATOMIC_RELAXED) == 1,
	      "the chained send behind an ended one was posted at its enqueue (%d MPI_Isend here)",
	      __atomic_load_n(&isends, __ATOMIC_RELAXED));
	count_isends_here(1);
	CHECK_OK(aql_mpi_enqueue_recv(q2, e, NULL, prev(), 83, comm, &rdone));
	CHECK_OK(aql_mpi_enqueue_send(q2, d, NULL, next(), 84, comm, &sdone));
	th_sleep_ms(50);
	MPI_Barrier(comm);
	CHECK(__atomic_load_n(&isends, __ATOMIC_RELAXED) == 0 && !arrived(84),
	      "a send chained behind a pending receive did not start");
	MPI_Barrier(comm);
	count_isends_here(0);
	recv_check(f, 81, 1000 * prev(), "the first send");
	recv_check(f, 82, 1000 * prev(), "the send posted at its enqueue");
	CHECK_OK(aql_mpi_send(d, NULL, next(), 83, comm));
	CHECK_DONE(aql_completion_wait(sdone, TH_TIMEOUT_NS));
	CHECK(aql_completion_done(rdone), "the receive ended before the send behind it");
	recv_check(f, 84, 1000 * prev(), "the send behind the receive");
	CHECK_OK(aql_mpi_cancel(q2));
	CHECK_OK(aql_queue_destroy(q2));

	/* Failures seen by a helper or an enqueue (posting, testing) end as
	 * the agent ends them. A truncated receive that only this thread may
	 * complete: */
	q2 = new_queue(th_agent());
	only_this_thread(1);
	if (rank == 1)
		CHECK_OK(aql_mpi_enqueue_recv(q2, five, NULL, 0, 85, comm, &rdone));
	MPI_Barrier(comm);
	if (rank == 0)
		CHECK_OK(aql_mpi_send(ten, NULL, 1, 85, comm));
	if (rank == 1) {
		CHECK(helped_wait(rdone) == AQL_OK && aql_signal_load(rdone.signal, AQL_ACQUIRE) < 0 &&
		      queue_error_has(q2, "MPI_ERR_TRUNCATE") &&
		      queue_error_has(q2, "of five failed on rank 1 (peer 0, tag 85)"),
		      "a truncation seen in the helper's MPI_Test fails the queue, named");
	}
	only_this_thread(0);
	CHECK_OK(aql_mpi_cancel(q2));
	CHECK_OK(aql_queue_destroy(q2));
	/* A send to a rank that does not exist, posted at its enqueue. */
	q2 = new_queue(th_agent());
	CHECK_OK(aql_mpi_enqueue_allreduce(q2, NULL, f, MPI_SUM, comm, &sdone));
	CHECK_DONE(aql_completion_wait(sdone, TH_TIMEOUT_NS));
	count_isends_here(1);
	CHECK_OK(aql_mpi_enqueue_send(q2, ten, NULL, size + 3, 86, comm, &sdone));
	CHECK(__atomic_load_n(&isends, __ATOMIC_RELAXED) == 1, "the send was posted at its enqueue");
	count_isends_here(0);
	snprintf(want, sizeof(want), "on rank %d (peer %d, tag 86)", rank, size + 3);
	CHECK(th_done(aql_completion_wait(sdone, TH_TIMEOUT_NS)) == AQL_ERR_QUEUE_ERROR &&
	      queue_error_has(q2, "MPI_Isend of ten") && queue_error_has(q2, want),
	      "a send failed at its enqueue fails the queue, named");
	CHECK_OK(aql_mpi_cancel(q2));
	CHECK_OK(aql_queue_destroy(q2));

	/* A destroy while a waiting thread's helper is inside MPI_Test for
	 * the queue's receive (holding the agent's lock): it cancels the
	 * receive once the helper is out, and the waiter wakes failed. */
	q2 = new_queue(th_agent());
	CHECK_OK(aql_mpi_enqueue_recv(q2, five, NULL, prev(), 87, comm, &rdone));
	__atomic_store_n(&stalled, 0, __ATOMIC_RELAXED);
	w = (struct waiter){ rdone, AQL_OK };
	if (pthread_create(&t, NULL, stalling_wait_thread, &w))
		th_stop("no waiter thread");
	for (int i = 0; i < 10000 && !__atomic_load_n(&stalled, __ATOMIC_ACQUIRE); i++)
		th_sleep_ms(1);
	CHECK(__atomic_load_n(&stalled, __ATOMIC_ACQUIRE), "the waiter's helper called MPI_Test");
	CHECK_OK(aql_queue_destroy(q2));
	pthread_join(t, NULL);
	CHECK(w.st == AQL_OK && aql_signal_load(rdone.signal, AQL_ACQUIRE) < 0,
	      "the waiter woke with the cancelled receive's failure (%s)", aql_status_str(w.st));

	CHECK_OK(aql_mpi_cancel(q));
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_buf_destroy(d));
	CHECK_OK(aql_buf_destroy(e));
	CHECK_OK(aql_buf_destroy(f));
	CHECK_OK(aql_buf_destroy(ten));
	CHECK_OK(aql_buf_destroy(five));
}

/*
 * Queue-ordered MPI in a recorded graph: a step (+1 on what goes out, a
 * send to the next rank and a receive from the one before, +10 on what
 * came in) recorded once and replayed three times; each replay sends what
 * the one before left. Nothing is sent while recording; a completion is
 * refused there (the replay's covers the operation).
 */
static void test_graph(void)
{
	aql_queue *q = new_queue(th_agent());
	aql_buf *out = new_buf(M, "graph out"), *in = new_buf(M, "graph in");
	/* Every element, as a derived datatype that each replay reuses. */
	aql_mpi_layout pairs = { .kind = AQL_MPI_VECTOR, .blocks = M / 2, .blocklen = 2,
				 .stride = 2 };
	int32_t *h = aql_buf_data(out, int32_t);
	aql_completion done;
	aql_graph_exec *e = NULL;
	aql_graph *g = NULL;
	int bad;

	for (int i = 0; h && i < M; i++)
		h[i] = i + 1000 * rank;
	CHECK_OK(aql_graph_begin(q, &g));
	CHECK(aql_graph_is_recording(q), "the queue records");
	CHECK_OK(launch_add(q, out, 1, NULL, NULL));
	CHECK(aql_mpi_enqueue_send(q, out, NULL, next(), 70, comm, &done) == AQL_ERR_INVALID_ARG &&
	      th_error_has("records a graph"), "a completion refused while recording");
	/* Even ranks send first, odd ones receive first: no cycle of sends. */
	if (rank % 2 == 0)
		CHECK_OK(aql_mpi_enqueue_send(q, out, &pairs, next(), 70, comm, NULL));
	CHECK_OK(aql_mpi_enqueue_recv(q, in, NULL, prev(), 70, comm, NULL));
	if (rank % 2)
		CHECK_OK(aql_mpi_enqueue_send(q, out, &pairs, next(), 70, comm, NULL));
	CHECK_OK(launch_add(q, in, 10, NULL, NULL));
	CHECK_OK(aql_graph_end(g));
	CHECK(!aql_graph_is_recording(q), "the recording ended");
	th_sleep_ms(20);
	h = aql_buf_data(in, int32_t);
	CHECK(h && h[5] == 0, "nothing was received while recording (%d)", h ? h[5] : -1);
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	for (int r = 1; e && r <= 3; r++) {
		CHECK_OK(aql_graph_exec_replay(e, q, &done));
		CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
		bad = count_bad(in, 1000 * prev() + r + 10);
		CHECK(bad == 0, "replay %d: received, +10: %d of %d wrong", r, bad, M);
	}
	CHECK_OK(aql_graph_exec_destroy(e));
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_buf_destroy(out));
	CHECK_OK(aql_buf_destroy(in));
}

/* The policy of this process's thread named name, -1 if there is none. */
static int policy_of(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int policy = -1;

	while (d && policy < 0 && (e = readdir(d))) {
		char path[300], comm[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, name, strlen(name)) &&
		    comm[strlen(name)] == '\n')
			policy = sched_getscheduler((pid_t)atoi(e->d_name));
		fclose(f);
	}
	if (d)
		closedir(d);
	return policy;
}

/*
 * The agent's thread (aql-mpi) waits in SCHED_IDLE (mpi/queue.c). Held
 * in MPI_Test, with its lock, while a receive is pending, a thread whose
 * wait's helper finds the lock taken puts it back in its own policy (so
 * that it lets go soon beside busy threads); once it has let go, and is
 * idle, it is SCHED_IDLE again.
 */
static void test_agent_thread(void)
{
	aql_queue *q = new_queue(th_agent());
	aql_buf *e = new_buf(M, "held agent");
	aql_completion rdone;
	int policy;

	__atomic_store_n(&stalled, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&agent_go, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stall_agent, 1, __ATOMIC_RELEASE);
	CHECK_OK(aql_mpi_enqueue_recv(q, e, NULL, prev(), 90, comm, &rdone));
	for (uint64_t t0 = th_now_ns(); !__atomic_load_n(&stalled, __ATOMIC_ACQUIRE) &&
					th_now_ns() - t0 < TH_TIMEOUT_NS;)
		th_sleep_ms(1);
	CHECK(__atomic_load_n(&stalled, __ATOMIC_ACQUIRE), "the agent's thread tested the receive");
	/* A polling wait's helper finds the agent's lock taken. */
	CHECK(aql_signal_wait(rdone.signal, AQL_COND_LT, rdone.below, 20000000, AQL_WAIT_ACTIVE,
			      NULL) == AQL_ERR_TIMEOUT, "the receive waits for its message");
	policy = policy_of("aql-mpi");
	CHECK(policy == SCHED_OTHER, "the agent's thread, held with its lock, was put back in "
	      "SCHED_OTHER (%d) by a helper kept out: policy %d", SCHED_OTHER, policy);
	__atomic_store_n(&agent_go, 1, __ATOMIC_RELEASE);
	MPI_Barrier(comm);
	CHECK_OK(aql_mpi_send(e, NULL, next(), 90, comm));
	CHECK_DONE(aql_completion_wait(rdone, TH_TIMEOUT_NS));
	CHECK_OK(aql_mpi_cancel(q));
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_buf_destroy(e));
	policy = policy_of("aql-mpi");
	for (uint64_t t0 = th_now_ns(); policy != SCHED_IDLE && th_now_ns() - t0 < TH_TIMEOUT_NS;
	     th_sleep_ms(1))
		policy = policy_of("aql-mpi");
	CHECK(policy == SCHED_IDLE, "the communication agent's idle thread (aql-mpi) has policy "
	      "%d, not SCHED_IDLE (%d)", policy, SCHED_IDLE);
}

int main(int argc, char **argv)
{
	aql_host_agent_config cfg = { .workers = 2, .separate_memory = 1 };
	const char *level = argc >= 3 ? argv[2] : "multiple";
	int want = MPI_THREAD_MULTIPLE, st;
	aql_code_object *co, *co_sep = NULL;
	aql_agent *sep = NULL;

	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: mpiexec -n N test_mpi_queue LAUNCH_KERNELS.host.so [multiple|serialized|funneled] [LAUNCH_KERNELS.{ptx,hsaco}]\n");
		return 2;
	}
	if (!strcmp(level, "serialized"))
		want = MPI_THREAD_SERIALIZED;
	else if (!strcmp(level, "funneled"))
		want = MPI_THREAD_FUNNELED;
	MPI_Init_thread(&argc, &argv, want, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		fprintf(stderr, "test_mpi_queue needs 2 or more ranks (mpiexec -n 2)\n");
		MPI_Finalize();
		return 2;
	}
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	/* MPICH 4.0.2 raises MPI_Test's errors on MPI_COMM_WORLD (docs/mpi.md). */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	printf("rank %d of %d: asked for thread level %d (%s), MPI provides %d\n", rank, size, want,
	       level, provided);
	/* The agent of its own memory: the test agent (an emulated GPU), or a CPU agent. */
	CHECK_OK(aql_code_object_load_file(th_agent(), argv[1], NULL, &co));
	if (co)
		CHECK_OK(aql_code_object_kernel(co, "add_i32", &add));
	if (th_test_gpu()) {
		sep = th_test_agent();
		co_sep = th_load_kernels(argv[1], argc == 4 ? argv[3] : NULL);
		CHECK_OK(aql_code_object_kernel(co_sep, "add_i32", &add_sep));
	} else {
		CHECK_OK(aql_host_agent_create(&cfg, &sep));
		add_sep = add;
	}
	if (add && add_sep && sep && provided < MPI_THREAD_SERIALIZED) {
		aql_queue *q = new_queue(th_agent());
		aql_buf *b = new_buf(M, "funneled");

		CHECK(aql_mpi_enqueue_send(q, b, NULL, next(), 1, comm, NULL) == AQL_ERR_UNSUPPORTED &&
		      th_error_has("MPI_THREAD_FUNNELED") && th_error_has("MPI_THREAD_SERIALIZED"),
		      "queue-ordered MPI refused below MPI_THREAD_SERIALIZED");
		CHECK_OK(aql_buf_destroy(b));
		CHECK_OK(aql_queue_destroy(q));
	} else if (add && add_sep && sep) {
		test_order(sep);
		test_recv_staged(sep);
		if (!th_test_gpu()) {
			test_allreduce();
			test_faults();
			test_destroy();
			test_graph();
			if (provided == MPI_THREAD_MULTIPLE) {
				test_chain();
				test_helped();
				test_agent_thread();
			}
		}
	}
	aql_mpi_shutdown();
	CHECK_OK(aql_code_object_destroy(co));
	if (co_sep)
		CHECK_OK(aql_code_object_destroy(co_sep));
	else
		CHECK_OK(aql_agent_destroy(sep));
	MPI_Comm_free(&comm);
	st = th_finish();
	MPI_Finalize();
	return st;
}
