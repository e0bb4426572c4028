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
 * "ended" is below END0 - i. One thread, the agent, posts and tests the
 * operations; it calls MPI only with the agent's lock held, and
 * libaql-mpi's other MPI calls on behalf of queue-ordered work (datatypes
 * at enqueue) take the same lock, so MPI_THREAD_SERIALIZED is honoured.
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "mpi/mpi_impl.h"

#define START0 (INT64_C(1) << 40)
#define END0 (INT64_C(1) << 40)

enum op_kind { OP_SEND, OP_RECV, OP_ALLREDUCE };

struct qstate {
	struct qstate *next;
	aql_queue *queue;
	aql_signal *started, *ended;
	pthread_mutex_t submit;	/* an operation's index and packets */
	uint64_t enqueued;	/* under submit */
	uint32_t pending;	/* operations not yet ended; under the agent's lock */
};

struct op {
	struct op *next;
	struct qstate *qs;
	uint64_t index;		/* in its queue */
	enum op_kind kind;
	void *ptr;
	const void *send;	/* allreduce: MPI_IN_PLACE or the send storage */
	MPI_Datatype datatype;
	int count, derived, peer, tag, posted, cancel, cancelled;
	MPI_Op mpi_op;
	MPI_Comm comm;
	MPI_Request req;
	const char *call;
	char name[96];
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;	/* work, a cancel or a stop, for the agent */
	pthread_cond_t ended;	/* an operation ended, for aql_mpi_cancel() */
	struct op *head;
	struct qstate *queues;
	pthread_t thread;
	int running, stop;
} agent = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
	    .ended = PTHREAD_COND_INITIALIZER };

static const char *level_name(int level)
{
	switch (level) {
	case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
	case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
	case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
	default: return "MPI_THREAD_MULTIPLE";
	}
}

/* Under the lock: end o with value into its queue's "ended" (0: done). */
static void end_op(struct op *o, int ok)
{
	struct qstate *qs = o->qs;

	if (o->derived)
		MPI_Type_free(&o->datatype);
	if (ok)
		aql_signal_sub(qs->ended, 1, AQL_RELEASE);
	else
		aql_signal_store(qs->ended, -1, AQL_RELEASE);
	qs->pending--;
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

/* Under the lock: move o on; 1 once it has ended (and is freed). */
static int step(struct op *o)
{
	MPI_Status status;
	int err, flag = 0;

	if (!o->posted) {
		int64_t s = aql_signal_load(o->qs->started, AQL_ACQUIRE);

		/* Negative: the queue failed or was destroyed before it. */
		if (o->cancel || s < 0) {
			end_op(o, 0);
			return 1;
		}
		if (s >= START0 - (int64_t)o->index)
			return 0;
		err = post(o);
		if (err != MPI_SUCCESS) {
			fail_op(o, err, o->call);
			return 1;
		}
		o->posted = 1;
	}
	if (o->cancel && o->kind == OP_RECV && !o->cancelled) {
		MPI_Cancel(&o->req);
		o->cancelled = 1;
	}
	err = MPI_Test(&o->req, &flag, &status);
	if (err != MPI_SUCCESS) {
		fail_op(o, err, o->call);
		return 1;
	}
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

static void *agent_main(void *arg)
{
	unsigned idle = 0;

	(void)arg;
	/* Its idle sleeps below are 20 us; Linux's default timer slack of
	 * 50 us would make them 70, which a send queued behind a kernel
	 * waits out (aql-bench --mpi's mpi_trigger_ns). */
	prctl(PR_SET_TIMERSLACK, 1000ul, 0ul, 0ul, 0ul);
	pthread_mutex_lock(&agent.lock);
	for (;;) {
		int moved = 0;

		if (!agent.head) {
			if (agent.stop)
				break;
			pthread_cond_wait(&agent.wake, &agent.lock);
			continue;
		}
		for (struct op **pp = &agent.head; *pp;) {
			struct op *o = *pp, *next = o->next;

			if (step(o)) {
				*pp = next;
				moved = 1;
			} else {
				pp = &o->next;
			}
		}
		if (moved) {
			idle = 0;
			continue;
		}
		/* Nothing moved: let the program's threads (and MPI's peers on
		 * the same cores) run, then sleep a little once it lasts. */
		pthread_mutex_unlock(&agent.lock);
		if (++idle < 1000) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 20000 };

			nanosleep(&ts, NULL);
		}
		pthread_mutex_lock(&agent.lock);
	}
	agent.running = 0;
	pthread_mutex_unlock(&agent.lock);
	return NULL;
}

/* Under the lock: the state of queue, made on first use. */
static aql_status queue_state(aql_queue *queue, struct qstate **out)
{
	struct qstate *qs;

	for (qs = agent.queues; qs; qs = qs->next) {
		if (qs->queue == queue) {
			*out = qs;
			return AQL_OK;
		}
	}
	qs = calloc(1, sizeof(*qs));
	if (!qs)
		return aql_error_set(AQL_ERR_NOMEM, "aql_mpi_enqueue: out of memory");
	if (aql_signal_create(START0, &qs->started) != AQL_OK ||
	    aql_signal_create(END0, &qs->ended) != AQL_OK) {
		aql_signal_destroy(qs->started);
		free(qs);
		return AQL_ERR_NOMEM;
	}
	pthread_mutex_init(&qs->submit, NULL);
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

/* Under the lock: where buf's data is, for a use by queue-ordered work. */
static aql_status check_place(aql_buf *buf, int write, const char *call)
{
	aql_buf_info info;
	aql_agent_info ai;
	aql_status st = aql_buf_get_info(buf, &info);

	if (st != AQL_OK)
		return aql_error_set(st, "%s: a buffer is required", call);
	if (!write || !info.agent)
		return AQL_OK;
	st = aql_agent_get_info(info.agent, &ai);
	if (st != AQL_OK)
		return st;
	if (!ai.unified_memory)
		return aql_error_set(AQL_ERR_UNSUPPORTED,
				     "%s: buffer '%s' is on agent '%s', which has memory of its own: a queue-ordered receive into it is not built in this version (receive with aql_mpi_recv())",
				     call, info.name, ai.name);
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
	uint64_t first;
	aql_status st;
	int started;

	if (!queue || !buf) {
		free(o);
		return aql_error_set(AQL_ERR_INVALID_ARG, "%s: queue and buffer are required", call);
	}
	pthread_mutex_lock(&agent.lock);
	st = check_level();
	if (st == AQL_OK)
		st = check_place(buf, o->kind != OP_SEND, call);
	if (st == AQL_OK && send)
		st = check_place(send, 0, call);
	if (st == AQL_OK)
		st = aql_buf_get_info(buf, &info);
	if (st == AQL_OK)
		st = aql_mpi_describe(buf, layout, &o->datatype, &o->count, &first, &o->derived);
	if (st == AQL_OK && o->kind == OP_ALLREDUCE && o->derived)
		st = aql_error_set(AQL_ERR_INVALID_ARG,
				   "%s: buffer '%s' holds %s: only built-in scalar types reduce", call,
				   info.name, info.type->name);
	if (st == AQL_OK)
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

	/* The index and the packets together, under the queue's own lock, so
	 * that operations from several threads get indices in their packets'
	 * order; not under the agent's, which must go on while a full queue
	 * makes this wait. */
	pthread_mutex_lock(&qs->submit);
	o->index = qs->enqueued;
	hold.value = END0 - (int64_t)o->index;
	hold.signal = aql_signal_handle(qs->ended);
	start.completion_signal = aql_signal_handle(qs->started);
	st = stage_out(queue, o->kind == OP_RECV ? NULL : send ? send : buf);
	if (st == AQL_OK)
		st = aql_queue_submit(queue, (const aql_packet *)&start);
	started = st == AQL_OK;
	if (started) {
		/* The start barrier is in: from here the operation counts. */
		qs->enqueued++;
		st = aql_queue_submit(queue, (const aql_packet *)&hold);
	}
	pthread_mutex_unlock(&qs->submit);

	pthread_mutex_lock(&agent.lock);
	if (!started) {
		if (o->derived)
			MPI_Type_free(&o->datatype);
		pthread_mutex_unlock(&agent.lock);
		free(o);
		return st;
	}
	qs->pending++;
	o->next = agent.head;
	agent.head = o;
	if (!agent.running) {
		agent.stop = 0;
		if (pthread_create(&agent.thread, NULL, agent_main, NULL) == 0)
			agent.running = 1;
		else
			o->cancel = 1;
	}
	pthread_cond_signal(&agent.wake);
	if (done)
		*done = (aql_completion){ qs->ended, END0 - (int64_t)o->index, NULL };
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

/* Under the lock: cancel qs's operations and wait until none is left. */
static void cancel_queue(struct qstate *qs)
{
	int cancelled = 0;

	for (struct op *o = agent.head; o; o = o->next) {
		if (o->qs == qs) {
			o->cancel = 1;
			cancelled = 1;
		}
	}
	if (cancelled) {
		/* The packets behind them must not run as if they had ended. */
		aql_queue_set_error(qs->queue, AQL_ERR_QUEUE_ERROR,
				    "queue-ordered MPI operations were cancelled (aql_mpi_cancel)");
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
	aql_signal_destroy(qs->started);
	aql_signal_destroy(qs->ended);
	pthread_mutex_destroy(&qs->submit);
	free(qs);
}

aql_status aql_mpi_cancel(aql_queue *queue)
{
	if (!queue)
		return aql_error_set(AQL_ERR_INVALID_ARG, "aql_mpi_cancel: queue is NULL");
	pthread_mutex_lock(&agent.lock);
	for (struct qstate *qs = agent.queues; qs; qs = qs->next) {
		if (qs->queue == queue) {
			cancel_queue(qs);
			free_state(qs);
			break;
		}
	}
	pthread_mutex_unlock(&agent.lock);
	return AQL_OK;
}

void aql_mpi_shutdown(void)
{
	pthread_t thread;
	int running;

	pthread_mutex_lock(&agent.lock);
	while (agent.queues) {
		cancel_queue(agent.queues);
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
