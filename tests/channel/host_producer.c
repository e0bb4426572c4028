/* SPDX-License-Identifier: MIT */
/*
 * The device side of channels (aql/kernel_channel.h) run by a plain host
 * thread, so that ThreadSanitizer instruments the senders too. Kept apart
 * from the test's own file: aql/kernel.h is for kernel code and does not
 * mix with the host API headers.
 */
#include <aql/kernel.h>

#include "host_producer.h"
#include "msg.h"

uint32_t chan_host_produce(uint64_t channel, uint32_t producer, uint32_t count)
{
	aql_channel_dev *dev = (aql_channel_dev *)(uintptr_t)channel;
	uint32_t dropped = 0;

	for (uint32_t i = 0; i < count; i++) {
		struct chan_msg m;

		chan_msg_fill(&m, producer, i);
		if (AQL_CHANNEL_SEND(dev, m) != AQL_CHANNEL_SENT)
			dropped++;
	}
	return dropped;
}

uint32_t chan_host_ping(uint64_t channel, uint32_t count, uint32_t *ack)
{
	aql_channel_dev *dev = (aql_channel_dev *)(uintptr_t)channel;
	uint32_t i, v;

	for (i = 0; i < count; i++) {
		struct chan_msg m;

		chan_msg_fill(&m, 0, i);
		if (AQL_CHANNEL_SEND(dev, m) != AQL_CHANNEL_SENT)
			break;
		while ((v = __atomic_load_n(ack, __ATOMIC_ACQUIRE)) != i + 1)
			if (v == UINT32_MAX)
				return i + 1;
		/* 0 to about 100 us on a 3 GHz core, in a scrambled order. */
		for (uint32_t n = (i * 2654435761u) >> 14; n; n--)
			__asm__ __volatile__("" ::: "memory");
	}
	return i;
}
