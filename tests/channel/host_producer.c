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
