/* SPDX-License-Identifier: MIT */
/* Internal: the one clock of the runtime (timeouts and profiling stamps). */
#ifndef AQL_INTERNAL_CLOCK_H
#define AQL_INTERNAL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns: a vDSO call, no system call. */
static inline uint64_t aql_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* now + timeout, saturating, so AQL_TIMEOUT_INFINITE stays infinite. */
static inline uint64_t aql_deadline(uint64_t timeout_ns)
{
	uint64_t now = aql_now_ns();

	return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

static inline void aql_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif
