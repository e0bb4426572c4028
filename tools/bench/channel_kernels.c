/* SPDX-License-Identifier: MIT */
/*
 * Producers for aql-bench --channel (tools/bench/channel.c), built for the
 * host with aql-kcc and embedded in aql-bench. Each work-item is one
 * producer; the bench launches one per work-group.
 *
 * A message is bytes/8 little-endian words (bytes a multiple of 8, 24..64):
 *   w[0]        producer | seq << 32
 *   w[1]        send time (chan_ping), else 0
 *   w[2..n-2]   CHAN_WORD(w[0], i)
 *   w[n-1]      CHAN_CHECK of every word but w[1]
 * channel.c builds and checks the same layout; keep the two in step.
 *
 * Addresses of host memory the bench owns come as uint64_t: a CPU agent
 * shares the host's address space.
 */
#include <aql/kernel.h>

#define CHAN_MAX_WORDS 8u
#define CHAN_WORD(w0, i) ((w0) * 0x9e3779b97f4a7c15ull + (i))
#define CHAN_CHECK_STEP(h, x) (((h) ^ (x)) * 0x100000001b3ull)
#define CHAN_CHECK_SEED 0xcbf29ce484222325ull

/* The time stamp counter the bench calibrates against CLOCK_MONOTONIC. */
AQL_INLINE uint64_t chan_ticks(void)
{
#if defined(AQL_KERNEL_TARGET_HOST) && defined(__x86_64__)
	uint32_t aux;

	/* rdtscp waits for earlier instructions: the message is built. */
	return __builtin_ia32_rdtscp(&aux);
#elif defined(AQL_KERNEL_TARGET_HOST) && defined(__aarch64__)
	uint64_t v;

	__asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v)::"memory");
	return v;
#else
	return 0;	/* no clock the bench can calibrate: latency reads 0 */
#endif
}

AQL_INLINE void chan_relax(void)
{
#if defined(AQL_KERNEL_TARGET_HOST) && defined(__x86_64__)
	__builtin_ia32_pause();
#elif defined(AQL_KERNEL_TARGET_HOST) && defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Fill w[] for (producer, seq) except the time stamp; n words. */
AQL_INLINE void chan_fill(uint64_t *w, uint32_t n, uint32_t producer, uint32_t seq)
{
	uint64_t h = CHAN_CHECK_SEED;

	w[0] = (uint64_t)producer | (uint64_t)seq << 32;
	w[1] = 0;
	h = CHAN_CHECK_STEP(h, w[0]);
	for (uint32_t i = 2; i + 1 < n; i++) {
		w[i] = CHAN_WORD(w[0], i);
		h = CHAN_CHECK_STEP(h, w[i]);
	}
	w[n - 1] = h;
}

/* Back off while waiting for the others: spin, then yield (libaql's). */
AQL_INLINE void chan_backoff(uint32_t round)
{
#if defined(AQL_KERNEL_TARGET_HOST)
	aql_channel_host_pause(round);
#else
	(void)round;
#endif
}

/*
 * Throughput: work-items 0 .. producers-1 each send count messages of
 * bytes bytes with seq 0..count-1; the rest return at once (the grid is
 * padded so that the CPU agent hands the groups to its workers).
 * sync points to two words of host memory: each producer adds 1 to the
 * first, then waits until the bench stores 1 to the second, so that all
 * start together however late their threads woke up. spans[2p],
 * spans[2p+1] get the first and last send time, so the bench can tell
 * whether the producers ran at once; fails[0] counts sends that did not
 * return AQL_CHANNEL_SENT (the bench then fails the run).
 */
AQL_KERNEL_NO_BARRIER(chan_produce, (aql_global aql_channel_dev *, ch), (uint32_t, producers),
		      (uint32_t, count), (uint32_t, bytes), (uint64_t, sync), (uint64_t, spans),
		      (uint64_t, fails))
{
	uint32_t p = aql_global_id(0), n = bytes / 8, round = 0;
	aql_global uint32_t *go = (aql_global uint32_t *)(uintptr_t)sync;
	aql_global uint64_t *span = (aql_global uint64_t *)(uintptr_t)spans;
	uint64_t w[CHAN_MAX_WORDS];

	if (p >= producers)
		return;
	aql_atomic_add_u32(&go[0], 1, AQL_SEQ_CST);
	while (!aql_atomic_load_u32(&go[1], AQL_SEQ_CST))
		chan_backoff(round++);
	if (n < 3 || n > CHAN_MAX_WORDS || bytes % 8) {
		aql_atomic_add_u32((aql_global uint32_t *)(uintptr_t)fails, 1, AQL_SEQ_CST);
		return;
	}
	span[2 * p] = chan_ticks();
	for (uint32_t s = 0; s < count; s++) {
		chan_fill(w, n, p, s);
		if (aql_channel_send(ch, AQL_CHANNEL_KIND_DATA, w, bytes) != AQL_CHANNEL_SENT)
			aql_atomic_add_u32((aql_global uint32_t *)(uintptr_t)fails, 1, AQL_SEQ_CST);
	}
	span[2 * p + 1] = chan_ticks();
}

/*
 * Latency, unloaded: send message seq with the time just before the send,
 * then wait (spinning) until the consumer stores seq + 1 to *ack (UINT32_MAX
 * there: stop), then gap more ticks, before the next. rtts[seq] gets send
 * to ack seen, on this thread's clock.
 */
AQL_KERNEL_NO_BARRIER(chan_ping, (aql_global aql_channel_dev *, ch), (uint32_t, count),
		      (uint32_t, bytes), (uint64_t, ack), (uint64_t, rtts), (uint64_t, fails),
		      (uint64_t, gap))
{
	aql_global uint32_t *a = (aql_global uint32_t *)(uintptr_t)ack;
	aql_global uint64_t *rtt = (aql_global uint64_t *)(uintptr_t)rtts;
	uint32_t n = bytes / 8, v;
	uint64_t w[CHAN_MAX_WORDS], t0, t1;

	if (n < 3 || n > CHAN_MAX_WORDS || bytes % 8) {
		aql_atomic_add_u32((aql_global uint32_t *)(uintptr_t)fails, 1, AQL_SEQ_CST);
		return;
	}
	for (uint32_t s = 0; s < count; s++) {
		chan_fill(w, n, 0, s);
		t0 = chan_ticks();
		w[1] = t0;
		if (aql_channel_send(ch, AQL_CHANNEL_KIND_DATA, w, bytes) != AQL_CHANNEL_SENT) {
			aql_atomic_add_u32((aql_global uint32_t *)(uintptr_t)fails, 1, AQL_SEQ_CST);
			return;
		}
		while ((v = aql_atomic_load_u32(a, AQL_SEQ_CST)) != s + 1) {
			if (v == UINT32_MAX)
				return;	/* the bench gave up */
			chan_relax();
		}
		t1 = chan_ticks();
		rtt[s] = t1 - t0;
		while (gap && chan_ticks() - t1 < gap)
			chan_relax();
	}
}
