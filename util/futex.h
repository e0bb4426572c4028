/* SPDX-License-Identifier: MIT */
/*
 * Internal: sleeping on 32-bit words. Every blocking wait in the runtime
 * (signals, queue space, a parked packet processor) is a futex wait on a
 * sequence word that the waking side bumps before waking.
 */
#ifndef AQL_INTERNAL_FUTEX_H
#define AQL_INTERNAL_FUTEX_H

#include <stdint.h>

/*
 * Sleep while *word == expected, until deadline_ns (CLOCK_MONOTONIC,
 * UINT64_MAX for none). Returns early on wake-ups, signals and spurious
 * wake-ups: callers re-check their condition.
 */
void aql_futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns);

/*
 * Sleep while every words[i] == expected[i] (n <= 64), until deadline_ns.
 * Uses futex_waitv; on kernels without it (< 5.16) sleeps on words[0] for at
 * most 1 ms at a time, so the caller still notices the others by polling.
 */
void aql_futex_wait_many(uint32_t n, uint32_t *const *words,
			 const uint32_t *expected, uint64_t deadline_ns);

void aql_futex_wake_all(uint32_t *word);

/*
 * As aql_futex_wait() and aql_futex_wake_all(), for waiters whose bits
 * meet the waker's: a wake reaches only the waiters it concerns.
 */
void aql_futex_wait_bits(uint32_t *word, uint32_t expected, uint32_t bits,
			 uint64_t deadline_ns);
void aql_futex_wake_bits(uint32_t *word, uint32_t bits);
/* As aql_futex_wake_bits(), waking at most count of them, longest asleep
 * first (the kernel queues a futex's waiters of one priority in order). */
void aql_futex_wake_some(uint32_t *word, uint32_t bits, int count);

/*
 * The waking half of the protocol: the caller changed the state a waiter
 * checks, then found (with a seq_cst access) that someone waits.
 */
static inline void aql_futex_bump_and_wake(uint32_t *seq)
{
	__atomic_fetch_add(seq, 1, __ATOMIC_RELEASE);
	aql_futex_wake_all(seq);
}

#endif
