/* SPDX-License-Identifier: MIT */
/*
 * Internal: the lock of the launch path (a queue's timeline, the buffers'
 * state). Uncontended, taking and releasing it is one atomic exchange and
 * one atomic exchange, inline, without the call and the type dispatch of
 * a pthread mutex; that is a fifth of a typed launch's budget. Contended,
 * a waiter spins briefly and then sleeps on a futex, since the holder may
 * be waiting for queue space or a kernarg segment.
 *
 * States: 0 free, 1 held, 2 held and someone may sleep on it.
 */
#ifndef AQL_INTERNAL_LOCK_H
#define AQL_INTERNAL_LOCK_H

#include <stdint.h>

#include "util/futex.h"

typedef struct aql_lock {
	uint32_t state;
} aql_lock;

#define AQL_LOCK_INIT { 0 }
#define AQL_LOCK_SPINS 100u

static inline void aql_lock_take(aql_lock *l)
{
	uint32_t free_ = 0;

	/* Acquire: what the previous holder wrote before releasing is seen. */
	if (__atomic_compare_exchange_n(&l->state, &free_, 1, 0, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED))
		return;
	for (unsigned i = 0; i < AQL_LOCK_SPINS; i++) {
		free_ = 0;
		if (__atomic_load_n(&l->state, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&l->state, &free_, 1, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	/* Mark it contended; sleep until an exchange finds it free. */
	while (__atomic_exchange_n(&l->state, 2, __ATOMIC_ACQUIRE) != 0)
		aql_futex_wait(&l->state, 2, UINT64_MAX);
}

static inline void aql_lock_release(aql_lock *l)
{
	/* Release; a 2 means a waiter may sleep: wake it. */
	if (__atomic_exchange_n(&l->state, 0, __ATOMIC_RELEASE) == 2)
		aql_futex_wake_all(&l->state);
}

#endif
