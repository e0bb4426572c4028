/* SPDX-License-Identifier: MIT */
/*
 * Channel producers for test_channel and test_channel_stress: run on the
 * CPU agent, and built for the GPU targets as a compile check of
 * aql/kernel_channel.h.
 */
#include <aql/kernel.h>

#include "msg.h"

/* Each work-item sends count numbered, checksummed messages. */
AQL_KERNEL(chan_seq, (aql_global aql_channel_dev *, ch), (uint32_t, count),
	   (aql_global uint32_t *, drops))
{
	uint32_t id = aql_global_id(0);
	uint32_t lost = 0;

	for (uint32_t i = 0; i < count; i++) {
		struct chan_msg m;

		chan_msg_fill(&m, id, i);
		if (AQL_CHANNEL_SEND(ch, m) != AQL_CHANNEL_SENT)
			lost++;
	}
	drops[id] = lost;
}

/*
 * Messages of every size from 0 to max bytes, in turn: byte j of message
 * i of work-item id is chan_byte(id, i, j).
 */
AQL_KERNEL(chan_sizes, (aql_global aql_channel_dev *, ch), (uint32_t, count),
	   (uint32_t, max), (aql_global uint32_t *, results))
{
	uint32_t id = aql_global_id(0);
	uint8_t buf[CHAN_SIZES_MAX];
	uint32_t bad = 0;

	for (uint32_t i = 0; i < count; i++) {
		uint32_t n = chan_size_of(id, i, max);

		for (uint32_t j = 0; j < n; j++)
			buf[j] = chan_byte(id, i, j);
		if (aql_channel_send(ch, AQL_CHANNEL_KIND_USER + (id & 7), buf, n) !=
		    AQL_CHANNEL_SENT)
			bad++;
	}
	results[id] = bad;
}

/* One message past the channel's limit, then one at it. */
AQL_KERNEL(chan_limit, (aql_global aql_channel_dev *, ch), (uint32_t, max),
	   (aql_global int32_t *, results))
{
	uint8_t buf[CHAN_SIZES_MAX + 1];

	for (uint32_t j = 0; j <= max && j <= CHAN_SIZES_MAX; j++)
		buf[j] = (uint8_t)j;
	results[0] = aql_channel_send(ch, AQL_CHANNEL_KIND_DATA, buf, max + 1);
	results[1] = aql_channel_send(ch, AQL_CHANNEL_KIND_DATA, buf, max);
}

/* Work-group aggregated sends: rounds messages per work-item. */
AQL_KERNEL_LDS(chan_group, uint64_t, (aql_global aql_channel_dev *, ch), (uint32_t, rounds),
	       (aql_global uint32_t *, drops))
{
	uint32_t id = aql_global_id(0);
	uint32_t lost = 0;

	for (uint32_t i = 0; i < rounds; i++) {
		struct chan_msg m;

		chan_msg_fill(&m, id, i);
		if (aql_channel_send_group(ch, lds, AQL_CHANNEL_KIND_DATA, &m, sizeof(m)) !=
		    AQL_CHANNEL_SENT)
			lost++;
	}
	drops[id] = lost;
}

/*
 * count calls of opcode CHAN_OP_MUL each: the host multiplies the two
 * words of the request; results[id] counts wrong replies.
 */
AQL_KERNEL(chan_rpc, (aql_global aql_channel_dev *, ch), (uint32_t, count),
	   (uint32_t, opcode), (aql_global int32_t *, results))
{
	uint32_t id = aql_global_id(0);
	int32_t bad = 0, last = 0;

	for (uint32_t i = 0; i < count; i++) {
		uint32_t req[2] = { id + 1, i + 3 };
		uint64_t reply = 0;
		uint32_t bytes = 0;
		int32_t r = aql_channel_call(ch, opcode, req, sizeof(req), &reply,
					     sizeof(reply), &bytes);

		if (r < 0) {
			last = r;
			bad++;
		} else if (r != (int32_t)id || bytes != sizeof(reply) ||
			   reply != (uint64_t)(id + 1) * (i + 3)) {
			bad++;
		}
	}
	results[2 * id] = bad;
	results[2 * id + 1] = last;
}

/* times copies of the bytes at data, each as one message. */
AQL_KERNEL(chan_send_buf, (aql_global aql_channel_dev *, ch),
	   (aql_global const uint8_t *, data), (uint32_t, bytes), (uint32_t, times))
{
	uint8_t buf[CHAN_SIZES_MAX];

	for (uint32_t j = 0; j < bytes && j < CHAN_SIZES_MAX; j++)
		buf[j] = data[j];
	for (uint32_t i = 0; i < times; i++)
		aql_channel_send(ch, AQL_CHANNEL_KIND_DATA, buf, bytes);
}
