/* SPDX-License-Identifier: MIT */
/*
 * Queue-ordered MPI: the communication agent. An operation is two packets
 * in the caller's queue around it: a barrier (barrier bit set) whose
 * completion says that everything before it has completed, so the
 * operation may start; then a BARRIER_VALUE packet that holds back what
 * comes after until the operation has ended. Per queue, two counting
 * signals serve every operation, as a typed launch's timeline does: the
 * barriers decrement "started" as they complete, the agent decrements
 * "ended" as operations end, and operation i of the queue is done once
 * "ended" is below its base - i. A state freed (aql_mpi_cancel(), or the
 * queue's destroy hook) leaves its signals to the next one, which counts
 * on from their values: completions handed out stay valid. One thread,
 * the agent, posts and tests the operations; it calls MPI only with the
 * agent's lock held, and libaql-mpi's other MPI calls on behalf of
 * queue-ordered work (datatypes at enqueue, and their release) take the
 * same lock, so MPI_THREAD_SERIALIZED is honoured.
 *
 * Chaining: an operation's two packets take consecutive slots (one
 * reservation). One whose start barrier is in the slot right after the
 * previous operation's BARRIER_VALUE packet follows that operation and
 * nothing else; since everything before that operation had completed
 * when it started, this one may start as soon as it has ended, without
 * waiting for the packet processor to run the two packets between. Its
 * barrier then has no completion signal ("started" counts the other
 * operations' barriers): it may end before the processor reaches that
 * barrier, and a counter written after its state is freed would be
 * wrong for the state that takes it next.
 *
 * Helped waits: the agent is not the only thread that moves operations.
 * Any thread that waits on a signal (the program in
 * aql_completion_wait(), a packet processor on an operation's
 * BARRIER_VALUE) runs help() (aql_wait_helper_register()), which takes the
 * agent's lock if it is free and makes the agent's own pass over the
 * pending operations; and an enqueue makes one pass too, so that a chained
 * operation whose previous one has ended is posted there and then. Each
 * pass is the agent's (progress()), under the same lock, so the order and
 * the thread levels hold whoever runs it. Only ending an operation in
 * failure is left to the agent's thread: aql_queue_set_error() stops the
 * queue's packet processor and waits for it to exit, which the processor
 * itself, helping, must not do.
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include <aql/graph.h>

#include "mpi/mpi_impl.h"
#include "util/clock.h"
#include "util/spin.h"

/* A fresh counter's value: room for 2^40 operations. */
#define COUNT0 (INT64_C(1) << 40)

/* The most the idle agent polls for new work before it sleeps. */
#define IDLE_SPIN_NS 50000u

/* The agent leaves the operations to a thread that helped this recently. */
#define HELPED_NS 10000u

/* The longest help() polls an operation's end, yielding the CPU every
 * HELP_PASSES passes. */
#define HELP_POLL_NS 50000u
#define HELP_PASSES 16u

enum op_kind { OP_SEND, OP_RECV, OP_ALLREDUCE };

struct qstate {
	struct qstate *next;
	aql_queue *queue;
	aql_signal *started, *ended;
	int64_t start0, end0;	/* their values before the first operation */
	pthread_mutex_t submit;	/* an operation's index and packets */
	uint64_t enqueued;	/* under submit */
	uint64_t barriers;	/* start barriers that decrement "started"; under submit */
	uint64_t after;		/* slot after the last operation's packets; under submit */
	uint32_t pending;	/* operations not yet ended; under the agent's lock */
};

struct op {
	struct op *next;
	struct qstate *qs;
	struct gop *g;		/* a run of a recorded operation, or NULL */
	uint64_t index;		/* in its queue; of a run: in its recorded operation's */
	uint64_t barrier;	/* not chained: its start barrier's, in "started" */
	enum op_kind kind;
	void *ptr;
	const void *send;	/* allreduce: MPI_IN_PLACE or the send storage */
	MPI_Datatype datatype;
	int count, derived, peer, tag, posted, cancel, cancelled;
	int chained;		/* right behind operation index - 1 of its queue */
	int failed, err;	/* a helper saw MPI fail with err: the agent ends it */
	MPI_Op mpi_op;
	MPI_Comm comm;
	MPI_Request req;
	const char *call;
	char name[96];
};

/*
 * An operation recorded in a graph. Its packets are a barrier whose
 * completion decrements "turn", then a BARRIER_VALUE that waits until
 * turn is even: turn starts even, a replay's barrier makes it odd (the
 * operation may start), and the agent makes it even again when the
 * operation ends, so the same two packets serve every replay. Each
 * replay arms one run (a struct op with g set) on the replaying queue
 * (aql_graph_record_hook()); the runs of one operation go one at a time,
 * in the order armed. The agent's lock guards all but tmpl.
 */
struct gop {
	struct op tmpl;		/* what each run does */
	aql_signal *turn;
	uint64_t armed, finished;	/* runs so far; runs ended */
	uint32_t runs;		/* armed and not ended */
	int released;		/* the graph and its executables are gone */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;	/* work, a cancel or a stop, for the agent */
	pthread_cond_t ended;	/* an operation ended, for aql_mpi_cancel() */
	struct op *head;
	struct qstate *queues;
	aql_signal **spare;	/* counters of freed states, for new ones */
	uint32_t nspare, spare_cap;
	pthread_t thread;
	int running, stop;
	uint64_t added;		/* operations handed over: written under the lock, polled without */
	uint32_t npending;	/* operations in head's list: written under the lock, read without */
	uint64_t helped_ns;	/* help()'s last pass, 0 once it gave up: atomic */
	int helping;		/* help() is registered */
	int handoff;		/* a helper left a failure to the agent */
	pthread_t self;		/* the agent's thread, and its own policy: */
	int policy;		/* written by it before its first holding */
	int holding;		/* the agent's thread holds the lock: set under it, read without */
	/* Clearing holding, and boosted with the class change it stands for. */
	pthread_mutex_t class_lock;
	int boosted;		/* a helper put the agent back in its own policy */
} agent = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
	    .ended = PTHREAD_COND_INITIALIZER, .class_lock = PTHREAD_MUTEX_INITIALIZER };

static const char *level_name(int level)
{
	switch (level) {
	case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
	case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
	case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
	default: return "MPI_THREAD_MULTIPLE";
	}
}

static void free_gop(struct gop *g)
{
	int finalized = 1;

	MPI_Finalized(&finalized);
	if (g->tmpl.derived && !finalized)
		MPI_Type_free(&g->tmpl.datatype);
	aql_signal_destroy(g->turn);
	free(g);
}

/* Under the lock: end o, into its queue's "ended" or its recorded
 * operation's turn; -1 where it failed. */
static void end_op(struct op *o, int ok)
{
	struct qstate *qs = o->qs;
	struct gop *g = o->g;
	aql_signal *s = g ? g->turn : qs->ended;

	if (o->derived)
		MPI_Type_free(&o->datatype);
	if (g) {
		g->finished++;
		g->runs--;
	}
	if (ok)
		aql_signal_sub(s, 1, AQL_RELEASE);
	else
		aql_signal_store(s, -1, AQL_RELEASE);
	if (g && g->released && !g->runs)
		free_gop(g);
	qs->pending--;
	__atomic_store_n(&agent.npending, agent.npending - 1, __ATOMIC_RELAXED);
	free(o);
	pthread_cond_broadcast(&agent.ended);
}

/* Under the lock: MPI failed o; the queue stops, with MPI's reason. */
static void fail_op(struct op *o, int err, const char *call)
{
	char why[512];

	aql_mpi_fail(err, call, o->name, o->comm, o->peer, o->tag);
	snprintf(why, sizeof(why), "%s", aql_error_message());
	/* Stopped first: the packets behind it must not see it end. */
	aql_queue_set_error(o->qs->queue, AQL_ERR_QUEUE_ERROR, why);
	end_op(o, 0);
}

static int post(struct op *o)
{
	switch (o->kind) {
	case OP_SEND:
		o->call = "MPI_Isend";
		return MPI_Isend(o->ptr, o->count, o->datatype, o->peer, o->tag, o->comm, &o->req);
	case OP_RECV:
		o->call = "MPI_Irecv";
		return MPI_Irecv(o->ptr, o->count, o->datatype, o->peer, o->tag, o->comm, &o->req);
	default:
		o->call = "MPI_Iallreduce";
		return MPI_Iallreduce(o->send, o->ptr, o->count, o->datatype, o->mpi_op, o->comm,
				      &o->req);
	}
}

/* Under the lock: whether o, not posted, may be: 1 yes, 0 not yet, -1
 * never (cancelled, or what it follows failed): it ends failed. A helper
 * (helper set) leaves a failed recorded operation's error to the agent. */
static int may_start(struct op *o, int helper)
{
	int64_t v;

	if (o->cancel)
		return -1;
	if (!o->g && o->chained) {
		/* The one before it failed, or the queue stopped since. */
		v = aql_signal_load(o->qs->ended, AQL_ACQUIRE);
		if (v < 0 || aql_queue_error(o->qs->queue, NULL) != AQL_OK)
			return -1;
		return v < o->qs->end0 - (int64_t)o->index + 1;
	}
	if (!o->g) {
		v = aql_signal_load(o->qs->started, AQL_ACQUIRE);
		/* Negative: the queue failed or was destroyed before it. */
		if (v < 0)
			return -1;
		return v < o->qs->start0 - (int64_t)o->barrier;
	}
	v = aql_signal_load(o->g->turn, AQL_ACQUIRE);
	if (v < 0 && helper) {
		agent.handoff = 1;
		return 0;
	}
	if (v < 0) {
		/* Its replay's barrier was dropped, or an earlier run failed. */
		aql_queue_set_error(o->qs->queue, AQL_ERR_QUEUE_ERROR,
				    "a queue-ordered MPI operation recorded in a graph failed in an earlier replay, or its replay was dropped");
		return -1;
	}
	/* Its turn: the runs before it ended, and its barrier completed. */
	return o->g->finished == o->index && (v & 1);
}

/*
 * Under the lock: MPI failed o (err, in o->call). The agent ends it, with
 * the queue's error; a helper leaves that to the agent (the top comment),
 * which finds it in its next pass. 1 once o has ended.
 */
static int failed(struct op *o, int err, int helper)
{
	if (helper) {
		o->failed = 1;
		o->err = err;
		agent.handoff = 1;
		return 0;
	}
	fail_op(o, err, o->call);
	return 1;
}

/* Under the lock: move o on; 1 once it has ended (and is freed). helper:
 * not on the agent's thread (failures are left to the agent). */
static int step(struct op *o, int helper)
{
	MPI_Status status;
	int err, flag = 0;

	if (o->failed)
		return failed(o, o->err, helper);
	if (!o->posted) {
		int go = may_start(o, helper);

		if (go < 0) {
			end_op(o, 0);
			return 1;
		}
		if (!go)
			return 0;
	}
	if (!o->posted) {
		err = post(o);
		if (err != MPI_SUCCESS)
			return failed(o, err, helper);
		o->posted = 1;
	}
	if (o->cancel && o->kind == OP_RECV && !o->cancelled) {
		MPI_Cancel(&o->req);
		o->cancelled = 1;
	}
	err = MPI_Test(&o->req, &flag, &status);
	if (err != MPI_SUCCESS)
		return failed(o, err, helper);
	if (!flag)
		return 0;
	if (o->cancelled) {
		MPI_Test_cancelled(&status, &flag);
		if (flag) {
			end_op(o, 0);
			return 1;
		}
	}
	end_op(o, 1);
	return 1;
}

/*
 * The agent's thread runs SCHED_IDLE (agent_main()): it gets the CPUs
 * that nothing else wants. On a machine whose cores all compute (an MPI
 * rank per core), its polling, and each wake-up from its sleeps, would
 * otherwise preempt the packet processors and the workers running the
 * kernels the operations wait for; there the threads that wait for
 * operations move them (help()). Its passes stay in that class too (run
 * in its own, they cost the Jacobi step of aql-bench --mpi a quarter).
 * But an idle-class thread preempted with the lock held keeps every
 * helper out until it runs again, which beside busy threads may take a
 * second: a helper that finds the lock taken while the agent holds it
 * puts the agent back in its own policy (priority inheritance, by hand,
 * only then), and the agent leaves it again once it has let go.
 */
static void agent_class(int idle)
{
	pthread_setschedparam(pthread_self(), idle ? SCHED_IDLE : agent.policy,
			      &(struct sched_param){ 0 });
}

/* Release: a helper that sees holding (acquire) may read self and policy. */
static void agent_lock(void)
{
	pthread_mutex_lock(&agent.lock);
	__atomic_store_n(&agent.holding, 1, __ATOMIC_RELEASE);
}

/*
 * The agent is letting go of the lock (unlocking, or sleeping on it): it
 * no longer holds it, and a boost is undone. Under class_lock, so that a
 * helper's boost either comes first and is undone here, or finds holding
 * clear; with atomics alone a boost could land just after the agent's
 * check and leave an idle agent out of the idle class for good.
 */
static void agent_let_go(void)
{
	pthread_mutex_lock(&agent.class_lock);
	__atomic_store_n(&agent.holding, 0, __ATOMIC_RELAXED);
	if (agent.boosted) {
		agent.boosted = 0;
		agent_class(1);
	}
	pthread_mutex_unlock(&agent.class_lock);
}

static void agent_unlock(void)
{
	agent_let_go();
	pthread_mutex_unlock(&agent.lock);
}

/* A helper kept out of the lock: if the agent holds it, boost it. */
static void boost_agent(void)
{
	if (!__atomic_load_n(&agent.holding, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&agent.class_lock);
	if (__atomic_load_n(&agent.holding, __ATOMIC_ACQUIRE) && !agent.boosted &&
	    (agent.policy == SCHED_OTHER || agent.policy == SCHED_BATCH)) {
		agent.boosted = 1;
		pthread_setschedparam(agent.self, agent.policy, &(struct sched_param){ 0 });
	}
	pthread_mutex_unlock(&agent.class_lock);
}

/* The lock, on a thread other than the agent's, if it is free (0): else
 * an idle-class agent that holds it is lifted. */
static int try_lock_agent(void)
{
	int busy = pthread_mutex_trylock(&agent.lock);

	if (busy)
		boost_agent();
	return busy;
}

/* The same, waiting for it. */
static void lock_agent(void)
{
	if (try_lock_agent())
		pthread_mutex_lock(&agent.lock);
}

/*
 * Under the lock, none pending: poll (without it) for work handed over,
 * up to a budget learnt from earlier waits, then sleep until woken. A
 * program that enqueues its next operation soon after the last ended
 * (a ping-pong) then finds the agent awake, and add_op()'s signal is a
 * check, not a futex wake.
 */
static void idle_wait(struct aql_spin *spin)
{
	uint64_t seen = agent.added, start = aql_now_ns(), now = start;
	uint64_t end = start + aql_spin_budget(spin, IDLE_SPIN_NS);

	agent_unlock();
	for (uint32_t i = 1;; i++) {
		/* Relaxed: the lock, taken below, orders what was handed over. */
		if (__atomic_load_n(&agent.added, __ATOMIC_RELAXED) != seen)
			break;
		if ((i & 63) == 1 && (now = aql_now_ns()) >= end)
			break;
		aql_cpu_relax();
	}
	agent_lock();
	if (!agent.head && !agent.stop) {
		agent_let_go();
		pthread_cond_wait(&agent.wake, &agent.lock);
		__atomic_store_n(&agent.holding, 1, __ATOMIC_RELEASE);
	}
	aql_spin_learn(spin, IDLE_SPIN_NS, aql_now_ns() - start);
}

/*
 * Under the lock: one pass over the pending operations, oldest first, so
 * that one chained behind another that ends in the pass is posted in it
 * too. Nonzero if one started or ended.
 */
static int progress(int helper)
{
	int moved = 0;

	for (struct op **pp = &agent.head; *pp;) {
		struct op *o = *pp, *next = o->next;
		int posted = o->posted;

		if (step(o, helper)) {
			*pp = next;
			moved = 1;
		} else {
			moved |= o->posted != posted;
			pp = &o->next;
		}
	}
	return moved;
}

/* Under the lock: whether signals hold a queue's "ended" with operations pending. */
static int waits_for_op(uint32_t n, aql_signal *const *signals)
{
	for (struct qstate *qs = agent.queues; qs; qs = qs->next)
		for (uint32_t i = 0; qs->pending && i < n; i++)
			if (signals[i] == qs->ended)
				return 1;
	return 0;
}

/*
 * The wait helper: a thread about to wait for a signal makes the agent's
 * pass itself when the lock is free, rather than wait for the agent's
 * thread to be scheduled (on a busy machine, a wake-up each time). It
 * runs for any wait while operations are pending, not only for waits on
 * an operation's "ended": a packet processor waiting for an operation's
 * hold and a launch waiting for its completion gain from it alike, and a
 * pass moves every queue's operations. The count is read relaxed: a pass
 * missed here is the agent's to make.
 */
static int help(const struct aql_wait_helper *h, uint32_t n, aql_signal *const *signals)
{
	uint64_t end, deadline;
	int moved;

	(void)h;
	if (!__atomic_load_n(&agent.npending, __ATOMIC_RELAXED))
		return 0;
	if (try_lock_agent())
		return 0;
	moved = progress(1);
	/*
	 * A wait for an operation's end: only a pass can end it (the agent
	 * keeps away while helped, below), so pass on, for HELP_POLL_NS and
	 * not past the wait's deadline, as MPI_Wait would poll. A waiter
	 * that sleeps sooner leaves the passes to the agent's idle-class
	 * thread, which beside the ranks' compute threads may sit on a busy
	 * CPU while the waiter's own idles: in aql-bench --mpi's Jacobi
	 * rounds the queued step then took twice as long, for a whole run.
	 * The poll renews helped_ns as it goes, so that the agent keeps out
	 * of it; one that gives up, or leaves a failure to the agent, clears
	 * it, so that the agent takes the passes over.
	 */
	end = moved ? 0 : aql_now_ns() + HELP_POLL_NS;
	deadline = aql_wait_helper_deadline();
	if (deadline < end)
		end = deadline;
	for (uint32_t i = 1; !moved && !agent.handoff && waits_for_op(n, signals); i++) {
		pthread_mutex_unlock(&agent.lock);
		if (i % HELP_PASSES) {
			aql_cpu_relax();
		} else {
			uint64_t now = aql_now_ns();

			__atomic_store_n(&agent.helped_ns, now < end ? now : 0, __ATOMIC_RELAXED);
			if (now >= end)
				return 0;
			sched_yield();
		}
		if (try_lock_agent())
			return 0;
		moved = progress(1);
	}
	__atomic_store_n(&agent.helped_ns, agent.handoff ? 0 : aql_now_ns(), __ATOMIC_RELAXED);
	pthread_mutex_unlock(&agent.lock);
	return moved;
}

/* Whether a thread helped within HELPED_NS: it makes the passes then. */
static int helped_lately(void)
{
	uint64_t helped = __atomic_load_n(&agent.helped_ns, __ATOMIC_RELAXED);

	return aql_now_ns() - helped < HELPED_NS;
}

static void *agent_main(void *arg)
{
	const struct timespec nap = { 0, 20000 };
	struct aql_spin spin = { 0 };
	unsigned idle = 0;

	(void)arg;
	/* Its idle sleeps below are 20 us; Linux's default timer slack of
	 * 50 us would make them 70, which a send queued behind a kernel
	 * waits out (aql-bench --mpi's mpi_trigger_ns). */
	prctl(PR_SET_TIMERSLACK, 1000ul, 0ul, 0ul, 0ul);
	/* Only from a policy of the fair class (as a thread made by a
	 * real-time one would keep its own); where it cannot (a seccomp
	 * filter), it polls as before. */
	agent.self = pthread_self();
	agent.policy = sched_getscheduler(0);
	if (agent.policy == SCHED_OTHER || agent.policy == SCHED_BATCH)
		agent_class(1);
	agent_lock();
	for (;;) {
		int helped;

		if (!agent.head) {
			if (agent.stop)
				break;
			idle_wait(&spin);
			continue;
		}
		/* A thread that helped lately makes the passes: keep out of its
		 * way (and its lock), unless it left a failure to end here. */
		helped = !agent.handoff && helped_lately();
		agent.handoff = 0;
		if (!helped && progress(0)) {
			idle = 0;
			continue;
		}
		/*
		 * Nothing moved: let the program's threads (and MPI's peers on
		 * the same cores) run, and sleep a little once it lasts. While
		 * helped, the same, without the lock, until the helping stops:
		 * a helper that found nothing to do sleeps in its wait, and a
		 * nap taken for the whole of a helped stretch would leave the
		 * operations unmoved (the CPU idle) after it, twice a step in
		 * aql-bench --mpi's Jacobi rounds whenever the waits had learnt
		 * to sleep early.
		 */
		agent_unlock();
		do {
			if (++idle < 1000)
				sched_yield();
			else
				nanosleep(&nap, NULL);
		} while (helped && helped_lately());
		agent_lock();
	}
	agent.running = 0;
	agent_unlock();
	return NULL;
}

/* Under the lock: the state of queue, or NULL. */
static struct qstate *find_state(aql_queue *queue)
{
	struct qstate *qs = agent.queues;

	while (qs && qs->queue != queue)
		qs = qs->next;
	return qs;
}

/* Under the lock: a counter and its value now, a spare one if any. */
static aql_status counter_take(aql_signal **out, int64_t *base)
{
	if (agent.nspare) {
		*out = agent.spare[--agent.nspare];
		*base = aql_signal_load(*out, AQL_ACQUIRE);
		return AQL_OK;
	}
	*base = COUNT0;
	return aql_signal_create(COUNT0, out);
}

/*
 * Under the lock: keep a freed state's counter for the next. Completions
 * handed out keep reading it, so it is never destroyed (the signal pool
 * would hand it out again, reset): one that failed (-1) stays as it is,
 * as a failed timeline signal does (aql/timeline.c).
 */
static void counter_retire(aql_signal *s)
{
	aql_signal **grown;

	if (aql_signal_load(s, AQL_ACQUIRE) < 0)
		return;
	if (agent.nspare == agent.spare_cap) {
		grown = realloc(agent.spare, (agent.spare_cap ? 2 * agent.spare_cap : 8) *
					     sizeof(*grown));
		if (!grown)
			return;
		agent.spare = grown;
		agent.spare_cap = agent.spare_cap ? 2 * agent.spare_cap : 8;
	}
	agent.spare[agent.nspare++] = s;
}

static void queue_gone(aql_queue *queue, void *user);

/* Under the lock: the state of queue, made on first use. */
static aql_status queue_state(aql_queue *queue, struct qstate **out)
{
	struct qstate *qs;
	aql_status st;

	*out = find_state(queue);
	if (*out)
		return AQL_OK;
	qs = calloc(1, sizeof(*qs));
	if (!qs)
		return aql_error_set(AQL_ERR_NOMEM, "aql_mpi_enqueue: out of memory");
	st = counter_take(&qs->started, &qs->start0);
	if (st == AQL_OK)
		st = counter_take(&qs->ended, &qs->end0);
	/* Destroying the queue cancels what is pending on it (queue_gone). */
	if (st == AQL_OK)
		st = aql_queue_add_destroy_hook(queue, queue_gone, NULL);
	if (st != AQL_OK) {
		if (qs->started)
			counter_retire(qs->started);
		if (qs->ended)
			counter_retire(qs->ended);
		free(qs);
		return st;
	}
	pthread_mutex_init(&qs->submit, NULL);
	/* No operation yet: none is chained, not even one in slot 0. */
	qs->after = UINT64_MAX;
	qs->queue = queue;
	qs->next = agent.queues;
	agent.queues = qs;
	*out = qs;
	return AQL_OK;
}

/* Under the lock: whether the agent may call MPI beside the program. */
static aql_status check_level(void)
{
	int level = MPI_THREAD_SINGLE, init = 0;

	MPI_Initialized(&init);
	if (!init)
		return aql_error_set(AQL_ERR_UNSUPPORTED,
				     "aql_mpi_enqueue: MPI is not initialised (MPI_Init_thread first)");
	MPI_Query_thread(&level);
	if (level < MPI_THREAD_SERIALIZED)
		return aql_error_set(AQL_ERR_UNSUPPORTED,
				     "aql_mpi_enqueue: MPI provides %s, where only the main thread may call MPI; queue-ordered operations call it from the communication agent's thread and need MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE (MPI_Init_thread)",
				     level_name(level));
	return AQL_OK;
}

/* Queue, on queue, the copy back of buf where an agent of its own holds it. */
static aql_status stage_out(aql_queue *queue, aql_buf *buf)
{
	aql_buf_info info;
	aql_agent_info ai;
	aql_status st;

	if (!buf)
		return AQL_OK;
	st = aql_buf_get_info(buf, &info);
	if (st != AQL_OK || !info.agent)
		return st;
	st = aql_agent_get_info(info.agent, &ai);
	if (st != AQL_OK || ai.unified_memory)
		return st;
	return aql_buf_to_host(buf, queue, &(aql_completion){ 0 });
}

/*
 * Under the lock: hand o to the agent, started on first use, last in the
 * list (oldest first: progress()). Unless wake is 0, the agent is woken;
 * an enqueue that passes 0 wakes it only if work is left after its own
 * pass, so that the agent never sleeps untimed with operations pending.
 */
static void add_op(struct op *o, int wake)
{
	static const struct aql_wait_helper helper = { help };
	struct op **pp = &agent.head;

	while (*pp)
		pp = &(*pp)->next;
	o->next = NULL;
	*pp = o;
	o->qs->pending++;
	__atomic_store_n(&agent.npending, agent.npending + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&agent.added, agent.added + 1, __ATOMIC_RELAXED);
	/* Without a place for it (all taken), the agent alone moves them. */
	if (!agent.helping)
		agent.helping = aql_wait_helper_register(&helper) == AQL_OK;
	if (!agent.running) {
		agent.stop = 0;
		if (pthread_create(&agent.thread, NULL, agent_main, NULL) == 0) {
			agent.running = 1;
			pthread_setname_np(agent.thread, "aql-mpi");
		} else {
			o->cancel = 1;
		}
	}
	if (wake)
		pthread_cond_signal(&agent.wake);
}

/* A replay of a recording with g: one run of it, on queue. */
static void gop_replayed(void *user, aql_queue *queue)
{
	struct gop *g = user;
	struct qstate *qs = NULL;
	struct op *o = malloc(sizeof(*o));

	lock_agent();
	if (!o || queue_state(queue, &qs) != AQL_OK) {
		/* The replay's hold would wait for ever: the queue stops. */
		aql_queue_set_error(queue, AQL_ERR_NOMEM,
				    "a queue-ordered MPI operation recorded in a graph: out of memory at its replay");
		pthread_mutex_unlock(&agent.lock);
		free(o);
		return;
	}
	*o = g->tmpl;
	o->derived = 0;		/* g's datatype, freed with g */
	o->qs = qs;
	o->g = g;
	o->index = g->armed++;
	g->runs++;
	add_op(o, 1);
	pthread_mutex_unlock(&agent.lock);
}

/* The recording and its executable graphs are gone: free g after its runs. */
static void gop_release(void *user)
{
	struct gop *g = user;

	lock_agent();
	g->released = 1;
	if (!g->runs)
		free_gop(g);
	pthread_mutex_unlock(&agent.lock);
}

/*
 * Record o on queue, which records a graph: its two packets, and the hook
 * that arms a run at each replay. Takes o (and its datatype).
 */
static aql_status record(aql_queue *queue, struct op *o, aql_barrier_packet *start,
			 aql_barrier_value_packet *hold)
{
	static const aql_graph_hook hook = { gop_replayed, gop_release };
	struct gop *g = calloc(1, sizeof(*g));
	aql_status st;

	if (!g || aql_signal_create(COUNT0, &g->turn) != AQL_OK) {
		lock_agent();
		if (o->derived)
			MPI_Type_free(&o->datatype);
		pthread_mutex_unlock(&agent.lock);
		free(g);
		free(o);
		return aql_error_set(AQL_ERR_NOMEM, "aql_mpi_enqueue: recording: out of memory");
	}
	g->tmpl = *o;
	g->tmpl.req = MPI_REQUEST_NULL;
	free(o);
	/* The hook first: from here release frees g, whatever else fails. */
	st = aql_graph_record_hook(queue, &hook, g);
	if (st != AQL_OK) {
		lock_agent();
		free_gop(g);
		pthread_mutex_unlock(&agent.lock);
		return st;
	}
	start->completion_signal = aql_signal_handle(g->turn);
	hold->signal = aql_signal_handle(g->turn);
	hold->mask = 1;
	hold->cond = AQL_COND_EQ;
	hold->value = 0;
	st = aql_graph_record_packet(queue, (const aql_packet *)start);
	if (st == AQL_OK)
		st = aql_graph_record_packet(queue, (const aql_packet *)hold);
	return st;
}

/* Under the lock: refused in a recording, where the buffer is on an
 * agent of its own memory (no staging at replay). */
static aql_status check_recordable(aql_buf *buf, const char *call)
{
	aql_buf_info info;
	aql_agent_info ai;

	if (!buf || aql_buf_get_info(buf, &info) != AQL_OK || !info.agent ||
	    aql_agent_get_info(info.agent, &ai) != AQL_OK || ai.unified_memory)
		return AQL_OK;
	return aql_error_set(AQL_ERR_UNSUPPORTED,
			     "%s: buffer '%s' is on agent '%s', which has memory of its own: a queue-ordered operation recorded in a graph uses the host storage as it is at each replay and stages nothing (bring it back before the replay, aql_buf_to_host())",
			     call, info.name, ai.name);
}

static aql_status enqueue(aql_queue *queue, struct op *o, aql_buf *buf, aql_buf *send,
			  const aql_mpi_layout *layout, const char *call, aql_completion *done)
{
	aql_barrier_packet start = {
		.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					    AQL_FENCE_SYSTEM),
	};
	aql_barrier_value_packet hold = {
		.header = { aql_packet_header(AQL_PACKET_VENDOR_SPECIFIC, 1, AQL_FENCE_SYSTEM,
					      AQL_FENCE_SYSTEM),
			    AQL_AMD_PACKET_BARRIER_VALUE, 0 },
		.mask = -1,
		.cond = AQL_COND_LT,
	};
	struct qstate *qs = NULL;
	aql_buf_info info;
	uint64_t first, id = 0;
	aql_status st;
	int started, recording;

	if (!queue || !buf) {
		free(o);
		return aql_error_set(AQL_ERR_INVALID_ARG, "%s: queue and buffer are required", call);
	}
	lock_agent();
	recording = aql_graph_is_recording(queue);
	st = check_level();
	if (st == AQL_OK && recording && done)
		st = aql_error_set(AQL_ERR_INVALID_ARG,
				   "%s: queue records a graph: pass done NULL (the replay's completion covers the operation)",
				   call);
	if (st == AQL_OK && recording)
		st = check_recordable(buf, call);
	if (st == AQL_OK && recording)
		st = check_recordable(send, call);
	if (st == AQL_OK)
		st = aql_buf_get_info(buf, &info);
	if (st == AQL_OK)
		st = aql_mpi_describe(buf, layout, &o->datatype, &o->count, &first, &o->derived);
	if (st == AQL_OK && o->kind == OP_ALLREDUCE && o->derived)
		st = aql_error_set(AQL_ERR_INVALID_ARG,
				   "%s: buffer '%s' holds %s: only built-in scalar types reduce", call,
				   info.name, info.type->name);
	if (st == AQL_OK && !recording)
		st = queue_state(queue, &qs);
	if (st != AQL_OK) {
		if (o->derived)
			MPI_Type_free(&o->datatype);
		pthread_mutex_unlock(&agent.lock);
		free(o);
		return st;
	}
	o->qs = qs;
	o->ptr = (char *)aql_buf_host_storage(buf) + first * info.type->size;
	snprintf(o->name, sizeof(o->name), "%s", info.name);
	pthread_mutex_unlock(&agent.lock);
	if (recording)
		return record(queue, o, &start, &hold);

	/* The index and the packets together, under the queue's own lock, so
	 * that operations from several threads get indices in their packets'
	 * order; not under the agent's, which must go on while a full queue
	 * makes this wait. */
	pthread_mutex_lock(&qs->submit);
	o->index = qs->enqueued;
	hold.value = qs->end0 - (int64_t)o->index;
	hold.signal = aql_signal_handle(qs->ended);
	/* What the operation reads comes back from an agent of its own
	 * first, in queue order; so does a buffer it writes only part of. */
	st = stage_out(queue, o->kind == OP_RECV ? NULL : send ? send : buf);
	if (st == AQL_OK && o->kind == OP_RECV && layout && layout->kind != AQL_MPI_WHOLE)
		st = stage_out(queue, buf);
	/* What it writes then counts as changed on the host: the next launch
	 * that reads it copies it to its agent, after the operation. */
	if (st == AQL_OK && o->kind != OP_SEND)
		st = aql_buf_host_written(buf, queue);
	/* Both slots at once: nothing comes between them (chaining). */
	if (st == AQL_OK)
		st = aql_queue_reserve(queue, 2, &id);
	started = st == AQL_OK;
	if (started) {
		qs->enqueued++;
		o->chained = id == qs->after;
		qs->after = id + 2;
		if (!o->chained) {
			o->barrier = qs->barriers++;
			start.completion_signal = aql_signal_handle(qs->started);
		}
		aql_packet_store(aql_queue_slot(queue, id + 1), (const aql_packet *)&hold);
		aql_packet_store(aql_queue_slot(queue, id), (const aql_packet *)&start);
		aql_queue_ring_doorbell(queue, id + 1);
	}
	pthread_mutex_unlock(&qs->submit);

	lock_agent();
	if (!started) {
		if (o->derived)
			MPI_Type_free(&o->datatype);
		pthread_mutex_unlock(&agent.lock);
		free(o);
		return st;
	}
	add_op(o, 0);
	if (done)
		*done = (aql_completion){ qs->ended, qs->end0 - (int64_t)o->index, NULL };
	/*
	 * Post at enqueue: the agent's pass, made here. A chained operation
	 * whose previous one has ended starts in it (MPI_Isend / _Irecv on
	 * this thread), with no hand-over to the agent: may_start() asks what
	 * the agent would ask, under the same lock. It is as sound here as
	 * there: o's barrier follows the previous operation's BARRIER_VALUE
	 * with nothing between, everything before that operation had
	 * completed when it started, and it has ended; a failed predecessor or
	 * a stopped queue fails it instead. One not chained waits for its
	 * barrier's completion ("started") as before: that the read index has
	 * passed the packets before it says only that they retired, and the
	 * CPU agent retires a packet before it signals its completion. The
	 * pass also tests what is pending, oldest first, so the previous
	 * operation may end in it, o then starting in the same pass. What is
	 * left wakes the agent (add_op()).
	 */
	progress(1);
	if (agent.head)
		pthread_cond_signal(&agent.wake);
	pthread_mutex_unlock(&agent.lock);
	return st;
}

static struct op *new_op(enum op_kind kind, int peer, int tag, MPI_Comm comm)
{
	struct op *o = calloc(1, sizeof(*o));

	if (o)
		*o = (struct op){ .kind = kind, .peer = peer, .tag = tag, .comm = comm,
				  .req = MPI_REQUEST_NULL, .send = MPI_IN_PLACE };
	return o;
}

aql_status aql_mpi_enqueue_send(aql_queue *queue, aql_buf *buf, const aql_mpi_layout *layout,
				int dest, int tag, MPI_Comm comm, aql_completion *done)
{
	struct op *o = new_op(OP_SEND, dest, tag, comm);

	if (!o)
		return aql_error_set(AQL_ERR_NOMEM, "aql_mpi_enqueue_send: out of memory");
	return enqueue(queue, o, buf, NULL, layout, "aql_mpi_enqueue_send", done);
}

aql_status aql_mpi_enqueue_recv(aql_queue *queue, aql_buf *buf, const aql_mpi_layout *layout,
				int source, int tag, MPI_Comm comm, aql_completion *done)
{
	struct op *o = new_op(OP_RECV, source, tag, comm);

	if (!o)
		return aql_error_set(AQL_ERR_NOMEM, "aql_mpi_enqueue_recv: out of memory");
	return enqueue(queue, o, buf, NULL, layout, "aql_mpi_enqueue_recv", done);
}

aql_status aql_mpi_enqueue_allreduce(aql_queue *queue, aql_buf *send, aql_buf *recv, MPI_Op op,
				     MPI_Comm comm, aql_completion *done)
{
	struct op *o = new_op(OP_ALLREDUCE, -1, -1, comm);
	aql_buf_info si, ri;

	if (!o)
		return aql_error_set(AQL_ERR_NOMEM, "aql_mpi_enqueue_allreduce: out of memory");
	o->mpi_op = op;
	if (send) {
		if (send == recv || aql_buf_get_info(send, &si) != AQL_OK ||
		    aql_buf_get_info(recv, &ri) != AQL_OK || si.type != ri.type ||
		    si.count != ri.count) {
			free(o);
			return aql_error_set(AQL_ERR_INVALID_ARG,
					     "aql_mpi_enqueue_allreduce: send and receive must be two buffers of one type and count (send NULL: in place)");
		}
		o->send = aql_buf_host_storage(send);
	}
	return enqueue(queue, o, recv, send, NULL, "aql_mpi_enqueue_allreduce", done);
}

/* Under the lock: cancel qs's operations and wait until none is left;
 * who names the caller in the queue's error. */
static void cancel_queue(struct qstate *qs, const char *who)
{
	char why[128];

	int cancelled = 0;

	for (struct op *o = agent.head; o; o = o->next) {
		if (o->qs == qs) {
			o->cancel = 1;
			cancelled = 1;
		}
	}
	if (cancelled) {
		/* The packets behind them must not run as if they had ended. */
		snprintf(why, sizeof(why), "queue-ordered MPI operations were cancelled (%s)", who);
		aql_queue_set_error(qs->queue, AQL_ERR_QUEUE_ERROR, why);
		pthread_cond_signal(&agent.wake);
	}
	while (qs->pending && agent.running)
		pthread_cond_wait(&agent.ended, &agent.lock);
}

static void free_state(struct qstate *qs)
{
	for (struct qstate **pp = &agent.queues; *pp; pp = &(*pp)->next) {
		if (*pp == qs) {
			*pp = qs->next;
			break;
		}
	}
	/* From the queue's destroy hook: removed already, a no-op. */
	aql_queue_remove_destroy_hook(qs->queue, queue_gone, NULL);
	counter_retire(qs->started);
	counter_retire(qs->ended);
	pthread_mutex_destroy(&qs->submit);
	free(qs);
}

/* The queue's destroy hook: what is pending on it ends before it goes. */
static void queue_gone(aql_queue *queue, void *user)
{
	struct qstate *qs;

	(void)user;
	lock_agent();
	qs = find_state(queue);
	if (qs) {
		cancel_queue(qs, "aql_queue_destroy");
		free_state(qs);
	}
	pthread_mutex_unlock(&agent.lock);
}

aql_status aql_mpi_cancel(aql_queue *queue)
{
	struct qstate *qs;

	if (!queue)
		return aql_error_set(AQL_ERR_INVALID_ARG, "aql_mpi_cancel: queue is NULL");
	lock_agent();
	qs = find_state(queue);
	if (qs) {
		cancel_queue(qs, "aql_mpi_cancel");
		free_state(qs);
	}
	pthread_mutex_unlock(&agent.lock);
	return AQL_OK;
}

void aql_mpi_shutdown(void)
{
	pthread_t thread;
	int running;

	lock_agent();
	while (agent.queues) {
		cancel_queue(agent.queues, "aql_mpi_shutdown");
		free_state(agent.queues);
	}
	agent.stop = 1;
	running = agent.running;
	thread = agent.thread;
	pthread_cond_signal(&agent.wake);
	pthread_mutex_unlock(&agent.lock);
	if (running)
		pthread_join(thread, NULL);
}
