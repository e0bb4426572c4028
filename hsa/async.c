/* SPDX-License-Identifier: MIT */
/*
 * AMD's asynchronous handlers and functions, run on one thread of the
 * layer's own, started on first use. It sleeps in aql_signal_wait_any()
 * on every registered signal plus a wake signal that registration bumps,
 * so up to 63 handlers wait at once. A handler that returns true is
 * registered again (and runs again at once if its condition still holds,
 * as ROCr's does).
 */
#include <stdlib.h>
#include <aql/signal.h>

#include "hsa_impl.h"

#define MAX_HANDLERS 63u

struct handler {
	aql_signal *signal;
	enum aql_signal_condition cond;
	int64_t value;
	hsa_amd_signal_handler fn;
	void *arg;
};

struct call {
	void (*fn)(void *arg);
	void *arg;
};

static struct {
	pthread_mutex_t lock;
	pthread_t thread;
	int running, stopping;
	aql_signal *wake;		/* bumped on every change */
	uint32_t count;
	uint32_t calling;		/* 1 while a handler runs: its slot is kept */
	struct handler handlers[MAX_HANDLERS];
	struct call *calls;		/* functions to run, in order */
	size_t ncalls, calls_cap;
} async = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* One function to run, or 0 when there is none; under the lock. */
static int take_call(struct call *c)
{
	if (!async.ncalls)
		return 0;
	*c = async.calls[0];
	for (size_t i = 1; i < async.ncalls; i++)
		async.calls[i - 1] = async.calls[i];
	async.ncalls--;
	return 1;
}

static void *run(void *unused)
{
	aql_signal *signals[MAX_HANDLERS + 1];
	enum aql_signal_condition conds[MAX_HANDLERS + 1];
	int64_t compares[MAX_HANDLERS + 1], observed;
	struct handler snapshot[MAX_HANDLERS];
	uint32_t n, index;
	struct call c;

	(void)unused;
	for (;;) {
		pthread_mutex_lock(&async.lock);
		if (async.stopping) {
			pthread_mutex_unlock(&async.lock);
			return NULL;
		}
		if (take_call(&c)) {
			pthread_mutex_unlock(&async.lock);
			c.fn(c.arg);
			continue;
		}
		/* The wake value is read under the lock, so no bump is missed. */
		signals[0] = async.wake;
		conds[0] = AQL_COND_NE;
		compares[0] = aql_signal_load(async.wake, AQL_ACQUIRE);
		n = async.count;
		for (uint32_t i = 0; i < n; i++) {
			snapshot[i] = async.handlers[i];
			signals[i + 1] = snapshot[i].signal;
			conds[i + 1] = snapshot[i].cond;
			compares[i + 1] = snapshot[i].value;
		}
		pthread_mutex_unlock(&async.lock);
		if (aql_signal_wait_any(n + 1, signals, conds, compares, AQL_TIMEOUT_INFINITE,
					AQL_WAIT_BLOCKED, &index, &observed) != AQL_OK || !index)
			continue;

		/* Unregister it (unless that happened meanwhile), then call it. */
		struct handler h = snapshot[index - 1];
		int found = 0;

		pthread_mutex_lock(&async.lock);
		for (uint32_t i = 0; i < async.count && !found; i++) {
			struct handler *e = &async.handlers[i];

			if (e->signal == h.signal && e->fn == h.fn && e->arg == h.arg &&
			    e->cond == h.cond && e->value == h.value) {
				*e = async.handlers[--async.count];
				found = 1;
			}
		}
		async.calling = (uint32_t)found;
		pthread_mutex_unlock(&async.lock);
		if (!found)
			continue;
		found = h.fn(observed, h.arg);
		pthread_mutex_lock(&async.lock);
		if (found)
			async.handlers[async.count++] = h;
		async.calling = 0;
		pthread_mutex_unlock(&async.lock);
	}
}

/* Start the thread if it is not running; under the lock. */
static hsa_status_t start(void)
{
	aql_status st;
	int err;

	if (async.running)
		return HSA_STATUS_SUCCESS;
	st = aql_signal_create(0, &async.wake);
	if (st != AQL_OK)
		return hsa_rt_from_aql(st, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
	err = pthread_create(&async.thread, NULL, run, NULL);
	if (err) {
		aql_signal_destroy(async.wake);
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES,
				   "cannot start the handler thread (error %d)", err);
	}
	async.running = 1;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_signal_async_handler(hsa_signal_t signal, hsa_signal_condition_t cond,
					  hsa_signal_value_t value,
					  hsa_amd_signal_handler handler, void *arg)
{
	hsa_status_t st;

	HSA_RT_CHECK_INIT();
	if (!hsa_rt_signal_live(signal))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_SIGNAL, "0x%llx is not a live signal",
				   (unsigned long long)signal.handle);
	if (!handler || (unsigned)cond > HSA_SIGNAL_CONDITION_GTE)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "handler is NULL or condition %u is unknown", (unsigned)cond);
	pthread_mutex_lock(&async.lock);
	st = start();
	if (st == HSA_STATUS_SUCCESS && async.count + async.calling == MAX_HANDLERS)
		st = hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES,
				 "%u handlers wait already, as many as aql waits on at once",
				 MAX_HANDLERS);
	if (st == HSA_STATUS_SUCCESS) {
		async.handlers[async.count++] = (struct handler){
			aql_signal_from_handle(signal.handle), (enum aql_signal_condition)cond,
			value, handler, arg };
		aql_signal_add(async.wake, 1, AQL_RELEASE);
	}
	pthread_mutex_unlock(&async.lock);
	return st;
}

hsa_status_t hsa_amd_async_function(void (*callback)(void *arg), void *arg)
{
	hsa_status_t st;

	HSA_RT_CHECK_INIT();
	if (!callback)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "callback is NULL");
	pthread_mutex_lock(&async.lock);
	st = start();
	if (st == HSA_STATUS_SUCCESS && async.ncalls == async.calls_cap) {
		size_t cap = async.calls_cap ? async.calls_cap * 2 : 16;
		struct call *calls = realloc(async.calls, cap * sizeof(*calls));

		if (calls) {
			async.calls = calls;
			async.calls_cap = cap;
		} else {
			st = hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES,
					 "no memory to queue the function");
		}
	}
	if (st == HSA_STATUS_SUCCESS) {
		async.calls[async.ncalls++] = (struct call){ callback, arg };
		aql_signal_add(async.wake, 1, AQL_RELEASE);
	}
	pthread_mutex_unlock(&async.lock);
	return st;
}

/* Before the signals: handlers waiting are dropped, functions not run. */
void hsa_rt_release_async(void)
{
	pthread_mutex_lock(&async.lock);
	if (!async.running) {
		pthread_mutex_unlock(&async.lock);
		return;
	}
	async.stopping = 1;
	aql_signal_add(async.wake, 1, AQL_RELEASE);
	pthread_mutex_unlock(&async.lock);
	pthread_join(async.thread, NULL);
	pthread_mutex_lock(&async.lock);
	aql_signal_destroy(async.wake);
	free(async.calls);
	async.calls = NULL;
	async.ncalls = async.calls_cap = 0;
	async.count = 0;
	async.stopping = 0;
	async.running = 0;
	pthread_mutex_unlock(&async.lock);
}
