/* SPDX-License-Identifier: MIT */
/*
 * Internal: how long a waiter polls before it sleeps, learnt from its own
 * waits. A poll pays only while the thread it waits for runs. With more
 * runnable threads than CPUs that thread is often descheduled, and each
 * nanosecond polled is taken from it or from the work beside it; worse,
 * the scheduler charges the poll to the poller, so that when it finally
 * sleeps and is woken it no longer preempts a busy thread at once.
 *
 * So the budget follows what the waits were: a wait that ended within
 * the largest budget (polling, or soon after going to sleep) doubles it,
 * since a longer poll would have caught it; a longer wait halves it, down
 * to AQL_SPIN_FLOOR_NS. On an idle machine waits for a running peer are
 * short and the budget stays whole; beside busy threads they are long
 * whenever the peer lost its CPU, and the waiter sleeps sooner.
 */
#ifndef AQL_INTERNAL_SPIN_H
#define AQL_INTERNAL_SPIN_H

#include <stdint.h>

#define AQL_SPIN_FLOOR_NS 500u

/* One waiter's state (a thread's, a packet processor's): zero is fresh. */
struct aql_spin {
	uint64_t ns;	/* the budget now; 0 before the first wait */
};

/* How long to poll now, at most max_ns. */
static inline uint64_t aql_spin_budget(const struct aql_spin *s, uint64_t max_ns)
{
	return s->ns && s->ns < max_ns ? s->ns : max_ns;
}

/* A wait that polled with a budget of at most max_ns took waited_ns. */
static inline void aql_spin_learn(struct aql_spin *s, uint64_t max_ns, uint64_t waited_ns)
{
	uint64_t ns = aql_spin_budget(s, max_ns);

	if (waited_ns <= max_ns)
		ns = ns > max_ns / 2 ? max_ns : 2 * ns;
	else
		ns = ns / 2 > AQL_SPIN_FLOOR_NS ? ns / 2 : AQL_SPIN_FLOOR_NS;
	s->ns = ns;
}

#endif
