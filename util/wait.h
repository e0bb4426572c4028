/* SPDX-License-Identifier: MIT */
/* Internal: the one wait loop behind every signal wait in the runtime. */
#ifndef AQL_INTERNAL_WAIT_H
#define AQL_INTERNAL_WAIT_H

#include <aql/signal.h>

/* Met when (value & mask) cond compare. */
struct aql_wait_cond {
	aql_signal *signal;
	int64_t mask;
	int64_t compare;
	enum aql_signal_condition cond;
};

/* Spin budget of AQL_WAIT_SPIN_BLOCK before sleeping. */
#define AQL_WAIT_SPIN_NS 20000u

/*
 * Wait until any condition is met: poll for spin_ns, then sleep on all the
 * signals at once. *index and *observed (either may be NULL) name the
 * first condition found met. The successful load has acquire order.
 * Returns AQL_OK or AQL_ERR_TIMEOUT at deadline_ns (no message is set:
 * callers word their own).
 */
aql_status aql_wait_conds(uint32_t n, const struct aql_wait_cond *conds,
			  uint64_t deadline_ns, uint64_t spin_ns,
			  uint32_t *index, int64_t *observed);

/*
 * A runtime thread that runs inside a driver's context (the CUDA agent's
 * host functions) waits without helpers: it must not run a CPU agent's
 * kernel there. Returns the previous setting, to put back.
 */
int aql_wait_help_off(int off);

/*
 * Driver events behind signals (aql/kfd/events.c), for stores the host
 * does not make: a device that writes a signal's value cannot bump its
 * futex word, but it can raise the event named in the signal's event_id
 * and event_mailbox_ptr. Once registered (one set per process), every
 * blocking wait and every wake goes through them; signals the pool did
 * not make (event_id 0: a queue's own stop signal) are the ops' to map.
 *
 * block: signals [0, n) of a block of the pool, new or (at registration)
 *	existing: set their event_id and event_mailbox_ptr (atomic stores).
 *	Called with the pool's lock held.
 * arm: the waiter announced itself (waiters++) and is about to check the
 *	values a last time: note where the signals' events stand, in
 *	ticket[0..n).
 * disarm: the wait ends after arm without sleeping (a value was met, or
 *	the deadline passed).
 * sleep: after arm: sleep until one of those events is set after arm, or
 *	deadline_ns (spurious returns allowed), and disarm. Returns 0 when
 *	it slept; otherwise a time up to which the caller sleeps on the
 *	futex words instead.
 * wake: a host store to signal found waiters (after the futex wake).
 */
struct aql_signal_events {
	void (*block)(aql_signal *block, uint32_t n);
	void (*arm)(uint32_t n, const struct aql_wait_cond *conds, uint64_t *ticket);
	void (*disarm)(uint32_t n, const struct aql_wait_cond *conds, const uint64_t *ticket);
	uint64_t (*sleep)(uint32_t n, const struct aql_wait_cond *conds, const uint64_t *ticket,
			  uint64_t deadline_ns);
	void (*wake)(aql_signal *signal);
};

/*
 * Route the blocking phase of every wait, and every wake of a host store,
 * through events (which must live until exit); events->block runs at once
 * for every block the pool has. AQL_OK, or AQL_ERR_BUSY when other ops
 * are registered. Thread safe.
 */
aql_status aql_signal_events_register(const struct aql_signal_events *events);

#endif
