/* SPDX-License-Identifier: MIT */
/*
 * aql-bench --channel's peer: DPDK's rte_ring carrying the same checked
 * 64-byte messages as the channel (channel.c). Built only when meson
 * finds libdpdk.
 *
 * The ring is set up with rte_ring_init() on memory allocated here
 * (rte_ring_get_memsize_elem() bytes, cache-line aligned): the ring code
 * needs neither rte_eal_init() nor huge pages. 4096 entries of 64 bytes
 * (4095 usable, as rte_ring keeps one free). The ring's flags pick the
 * mode (RING_F_SP_ENQ | RING_F_SC_DEQ, or RING_F_SC_DEQ alone for MP/SC:
 * there is one consumer, as for a channel) and the generic
 * rte_ring_enqueue_elem() / rte_ring_dequeue_burst_elem() follow them. Producers are plain pthreads, unpinned; the consumer is
 * the calling thread. rte_ring has no way to sleep: a full or empty ring
 * makes its side back off as the channel's senders do (a few rounds of
 * rte_pause, then sched_yield), so that a side spinning on a shared
 * core does not keep the other from running; with spin, both just
 * rte_pause, the usual DPDK loop. A round stops at limit_ns: the
 * MP ring with more producer threads than cores can stall for
 * minutes behind a preempted producer (each waits for the ones before it
 * to update the tail), and then the rate is what arrived by the limit.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>
#include <rte_version.h>

#include "bench.h"

#define ESIZE		64u
#define ENTRIES		4096u
#define BURST		32u

struct dpdk_prod {
	pthread_t thread;
	struct rte_ring *ring;
	uint32_t id, per;
	bool spin;
	int *go, *stop;
};

static struct rte_ring *ring_new(unsigned flags, char *why, size_t len)
{
	ssize_t sz = rte_ring_get_memsize_elem(ESIZE, ENTRIES);
	struct rte_ring *r;
	int rc;

	if (sz < 0) {
		snprintf(why, len, "DPDK rte_ring_get_memsize_elem: %s", strerror((int)-sz));
		return NULL;
	}
	r = aligned_alloc(RTE_CACHE_LINE_SIZE,
			  ((size_t)sz + RTE_CACHE_LINE_SIZE - 1) & ~(size_t)(RTE_CACHE_LINE_SIZE - 1));
	if (!r) {
		snprintf(why, len, "DPDK ring: out of memory");
		return NULL;
	}
	rc = rte_ring_init(r, "aql-bench", ENTRIES, flags);
	if (rc) {
		snprintf(why, len, "DPDK rte_ring_init without EAL: %s", strerror(-rc));
		free(r);
		return NULL;
	}
	return r;
}

int chan_dpdk_probe(char *why, size_t len)
{
	uint64_t in[ESIZE / 8] = { 42 }, out[ESIZE / 8] = { 0 };
	struct rte_ring *r = ring_new(0, why, len);

	if (!r)
		return 0;	/* why says it: the peer is skipped */
	if (rte_ring_enqueue_elem(r, in, ESIZE) ||
	    rte_ring_dequeue_elem(r, out, ESIZE) || out[0] != 42)
		snprintf(why, len, "DPDK rte_ring without EAL does not pass one element");
	free(r);
	return 0;
}

const char *chan_dpdk_version(void)
{
	return rte_version();
}

/* The round-th wait in a row: spin a little, then give the core away. */
static void backoff(uint32_t round)
{
	if (round < 16)
		for (uint32_t i = 0; i < (1u << (round / 2)); i++)
			rte_pause();
	else
		sched_yield();
}

static void *producer_main(void *arg)
{
	struct dpdk_prod *p = arg;
	uint64_t w[ESIZE / 8];
	uint32_t round;

	while (!__atomic_load_n(p->go, __ATOMIC_ACQUIRE)) {
		if (__atomic_load_n(p->stop, __ATOMIC_RELAXED))
			return NULL;
		sched_yield();
	}
	for (uint32_t s = 0; s < p->per; s++) {
		if (__atomic_load_n(p->stop, __ATOMIC_RELAXED))
			return NULL;
		chan_msg_fill(w, ESIZE, p->id, s);
		round = 0;
		while (rte_ring_enqueue_elem(p->ring, w, ESIZE)) {
			if (__atomic_load_n(p->stop, __ATOMIC_RELAXED))
				return NULL;
			if (p->spin)
				rte_pause();
			else
				backoff(round++);
		}
	}
	return NULL;
}

int chan_dpdk_round(uint32_t producers, uint32_t per, bool multi, bool spin, uint64_t limit_ns,
		    struct chan_check *c, uint64_t *ns, uint64_t *received)
{
	struct dpdk_prod prod[8];
	uint64_t buf[BURST * ESIZE / 8], total = (uint64_t)producers * per, got = 0, t0 = 0, t;
	struct rte_ring *r;
	char why[160];
	uint32_t started = 0, polls = 0, round = 0;
	int go = 0, stop = 0, rc = -1, err;

	if (producers > ARRAY_SIZE(prod))
		return fail_errno("DPDK peer producers", EINVAL);
	r = ring_new(multi ? RING_F_SC_DEQ : RING_F_SP_ENQ | RING_F_SC_DEQ, why, sizeof(why));
	if (!r) {
		progress_clear();
		fprintf(stderr, "aql-bench: %s\n", why);
		return -1;
	}
	for (; started < producers; started++) {
		prod[started] = (struct dpdk_prod){ .ring = r, .id = started, .per = per,
						     .spin = spin, .go = &go, .stop = &stop };
		err = pthread_create(&prod[started].thread, NULL, producer_main, &prod[started]);
		if (err) {
			fail_errno("pthread_create (DPDK peer)", err);
			break;
		}
	}
	if (started < producers) {
		__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
		goto join;
	}
	t0 = now_ns();
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	t = t0;
	while (got < total) {
		unsigned n = rte_ring_dequeue_burst_elem(r, buf, ESIZE, BURST, NULL);

		/* A stalled MP ring can take minutes: stop at the limit. */
		if ((!n || !(++polls & 255)) && (t = now_ns()) - t0 > limit_ns)
			break;
		if (!n) {
			if (spin)
				rte_pause();
			else
				backoff(round++);
			continue;
		}
		round = 0;
		for (unsigned i = 0; i < n; i++)
			if (chan_msg_check(c, buf + i * (ESIZE / 8), ESIZE)) {
				__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
				goto join;
			}
		got += n;
	}
	if (got == total)
		t = now_ns();
	*ns = t - t0;
	*received = got;
	rc = 0;
join:
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(prod[i].thread, NULL);
	if (rc == 0 && got == total && rte_ring_count(r)) {
		progress_clear();
		fprintf(stderr, "aql-bench: DPDK ring holds %u messages more than were sent\n",
			rte_ring_count(r));
		rc = -1;
	}
	free(r);
	return rc;
}
