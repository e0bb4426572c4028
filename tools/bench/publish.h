/* SPDX-License-Identifier: MIT */
/*
 * The producer of dispatch_throughput_hsa and of its native peer
 * dispatch_throughput_so: one thread publishing packets on a SINGLE queue
 * as an HSA program does (write index loaded and stored, the read index
 * looked at again only when the ring looks full, the body copied, header
 * and setup stored last with release, the doorbell rung). Written once,
 * for hsa.c and native_so.c, so that the two rows differ only in the
 * calls that reach the queue: the HSA library's functions there, aql's
 * own atomics (folded in, since the ops are constants and these
 * functions are inlined) and aql_queue_load_read_index() here.
 */
#ifndef AQL_BENCH_PUBLISH_H
#define AQL_BENCH_PUBLISH_H

#include <stdint.h>
#include <aql/packet.h>

#include "util/clock.h"

struct publish_ops {
	uint64_t (*load_write)(void *q);		/* relaxed */
	void (*store_write)(void *q, uint64_t id);	/* relaxed */
	uint64_t (*load_read)(void *q);			/* acquire */
	void (*ring)(void *q, uint64_t id);		/* the doorbell, release */
};

struct publish_queue {
	void *q;		/* what the ops take */
	aql_packet *ring;
	uint32_t size;		/* packets, a power of two */
	uint64_t read;		/* the read index last seen */
};

#define PUBLISH_INLINE static inline __attribute__((always_inline))

/*
 * Until the ring has a slot for id. The read index is looked at again
 * after a pause, as aql_queue_reserve() spins, not in a tight loop: it sits
 * on the line the processor writes after every packet, and each look takes
 * that line from it. The clock is read every 1024 looks. 0, or -1 when the
 * ring stays full for timeout_ns.
 */
PUBLISH_INLINE int publish_wait(struct publish_queue *pq, uint64_t id,
				const struct publish_ops *ops, uint64_t timeout_ns)
{
	uint64_t t0 = aql_now_ns();

	for (uint32_t looks = 1;; looks++) {
		aql_cpu_relax();
		pq->read = ops->load_read(pq->q);
		if (id - pq->read < pq->size)
			return 0;
		if (looks % 1024 == 0 && aql_now_ns() - t0 > timeout_ns)
			return -1;
	}
}

/* Publish one packet; 0, or -1 when the ring stays full for timeout_ns. */
PUBLISH_INLINE int publish_packet(struct publish_queue *pq, const aql_packet *p,
				  const struct publish_ops *ops, uint64_t timeout_ns)
{
	uint64_t id = ops->load_write(pq->q);

	if (id - pq->read >= pq->size && publish_wait(pq, id, ops, timeout_ns))
		return -1;
	ops->store_write(pq->q, id + 1);
	aql_packet_store(pq->ring + (id & (pq->size - 1)), p);
	ops->ring(pq->q, id);
	return 0;
}

#endif
