/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/futex.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

/* struct futex_waitv from linux/futex.h (5.16), spelled out for older headers. */
struct waitv {
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t reserved;
};

#define WAITV_FLAGS (0x02 /* FUTEX2_SIZE_U32 */ | 128 /* FUTEX2_PRIVATE */)

static int have_waitv = 1;

static struct timespec abs_timespec(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	return ts;
}

void aql_futex_wait_bits(uint32_t *word, uint32_t expected, uint32_t bits,
			 uint64_t deadline_ns)
{
	struct timespec ts = abs_timespec(deadline_ns);

	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline, so a
	 * wait restarted after a signal does not stretch the timeout. */
	syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected,
		deadline_ns == UINT64_MAX ? NULL : &ts, NULL, bits);
}

void aql_futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns)
{
	aql_futex_wait_bits(word, expected, FUTEX_BITSET_MATCH_ANY, deadline_ns);
}

void aql_futex_wait_many(uint32_t n, uint32_t *const *words,
			 const uint32_t *expected, uint64_t deadline_ns)
{
	struct waitv w[64];
	struct timespec ts = abs_timespec(deadline_ns);
	uint64_t slice;

	if (n == 1)
		return aql_futex_wait(words[0], expected[0], deadline_ns);
	if (__atomic_load_n(&have_waitv, __ATOMIC_RELAXED)) {
		for (uint32_t i = 0; i < n; i++)
			w[i] = (struct waitv){ expected[i], (uint64_t)(uintptr_t)words[i],
					       WAITV_FLAGS, 0 };
		if (syscall(SYS_futex_waitv, w, n, 0,
			    deadline_ns == UINT64_MAX ? NULL : &ts,
			    CLOCK_MONOTONIC) >= 0 || errno != ENOSYS)
			return;
		__atomic_store_n(&have_waitv, 0, __ATOMIC_RELAXED);
	}
	slice = aql_deadline(1000000);
	aql_futex_wait(words[0], expected[0], slice < deadline_ns ? slice : deadline_ns);
}

void aql_futex_wake_some(uint32_t *word, uint32_t bits, int count)
{
	syscall(SYS_futex, word, FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG, count, NULL, NULL,
		bits);
}

void aql_futex_wake_bits(uint32_t *word, uint32_t bits)
{
	aql_futex_wake_some(word, bits, INT_MAX);
}

void aql_futex_wake_all(uint32_t *word)
{
	aql_futex_wake_bits(word, FUTEX_BITSET_MATCH_ANY);
}
