/* SPDX-License-Identifier: MIT */
/* senders.h on host threads: see host_sender.h. */
#include <aql/kernel.h>

#include "host_sender.h"
#include "senders.h"

uint32_t pf_host_seq(uint64_t channel, uint32_t producer, uint32_t count)
{
	return pf_send_seq((aql_channel_dev *)(uintptr_t)channel, producer, count);
}

int pf_host_types(uint64_t channel, int32_t i, uint32_t u, int64_t l, uint64_t ul, float f,
		  double d, int32_t *p)
{
	return pf_send_types((aql_channel_dev *)(uintptr_t)channel, i, u, l, ul, f, d, p);
}

int pf_host_tags(uint64_t channel, const volatile int *p, int *counter)
{
	aql_channel_dev *ch = (aql_channel_dev *)(uintptr_t)channel;
	int r = 0;

	r |= AQL_PRINTF(ch, 100, (char)-1, (signed char)-2, (unsigned char)250, (short)-3,
			(unsigned short)65535, (_Bool)1, -4, 4000000000u, -5l, 6ul, -7ll, 8ull);
	r |= AQL_PRINTF(ch, 101, 1.5f, -2.25, (void *)0, p, (*counter)++);
	r |= AQL_PRINTF(ch, 102);
	return r;
}

int pf_host_send_raw(uint64_t channel, const void *data, uint32_t bytes)
{
	return aql_channel_send((aql_channel_dev *)(uintptr_t)channel, AQL_CHANNEL_KIND_PRINTF,
				data, bytes);
}
