/* SPDX-License-Identifier: MIT */
/*
 * Completions: the end of a piece of asynchronous work (a launch, a copy,
 * a file read), as a value. A completion is a signal and a threshold: the
 * work is done once the signal's value drops below the threshold. Typed
 * launches on one queue share a timeline signal that every packet they
 * write decrements by one, so their completions need no allocation and
 * can be copied, kept and waited on by any number of threads.
 *
 * A negative signal value means the work failed or was cancelled: the
 * packet processor stores -1 into the signal of a packet it rejects, and
 * queue destruction stores -1 into the signals of packets never started.
 */
#ifndef AQL_COMPLETION_H
#define AQL_COMPLETION_H

#include <stdint.h>
#include <aql/signal.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aql_queue aql_queue;

typedef struct aql_completion {
	aql_signal *signal;	/* NULL: complete from the start */
	int64_t below;		/* done once the value is below this */
	aql_queue *queue;	/* the queue it runs on, or NULL */
} aql_completion;

/*
 * The completion of work that ends by decrementing signal from 1 to 0 (an
 * aql_file_read_async() signal, or any packet's completion signal set to 1).
 */
static inline aql_completion aql_completion_of_signal(aql_signal *signal)
{
	aql_completion c = { signal, 1, 0 };

	return c;
}

/*
 * Ask for the completion to be made: an agent may hold completion stores
 * back until someone asks for them (a CUDA queue collects the stores of
 * typed launches and puts them on its stream in batches, when asked, or
 * within a short bound: tens of microseconds after launches stop, at
 * most a fraction of a millisecond). aql_completion_done() and
 * aql_completion_wait() ask; call it before waiting on c.signal any other
 * way (aql_signal_wait(), a packet's dependency) to see the completion
 * without that delay. A no-op when c.queue is NULL or has been destroyed.
 * Thread safe.
 */
void aql_completion_request(aql_completion c);

/*
 * Non-zero once the work has ended, successfully or not; while it has
 * not, asks for the completion (aql_completion_request()). Acquire order:
 * what the work wrote is visible after a non-zero result. Thread safe.
 */
static inline int aql_completion_done(aql_completion c)
{
	if (!c.signal || aql_signal_load(c.signal, AQL_ACQUIRE) < c.below)
		return 1;
	if (!c.queue)
		return 0;
	aql_completion_request(c);
	return aql_signal_load(c.signal, AQL_ACQUIRE) < c.below;
}

/*
 * Wait until the work has ended or timeout_ns (AQL_TIMEOUT_INFINITE: no
 * limit) passes, sleeping after a short spin; asks for the completion
 * first. Errors: AQL_ERR_TIMEOUT,
 * AQL_ERR_QUEUE_ERROR when the work failed or was cancelled (the message
 * gives the queue's reason when there is one). Thread safe.
 */
aql_status aql_completion_wait(aql_completion c, uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif

#endif
