/* SPDX-License-Identifier: MIT */
/*
 * What the printf producers of test_printf send, as inline functions that
 * the kernels (kernels.c) and the host threads (host_sender.c) share.
 * Include aql/kernel.h first.
 */
#ifndef AQL_TEST_PRINTF_SENDERS_H
#define AQL_TEST_PRINTF_SENDERS_H

#include <aql/kernel_printf.h>

#include "formats.h"

/* count records "wi <producer> seq <i>"; returns how many were not sent. */
static inline uint32_t pf_send_seq(aql_global aql_channel_dev *ch, uint32_t producer,
				   uint32_t count)
{
	uint32_t bad = 0;

	for (uint32_t i = 0; i < count; i++)
		bad += AQL_PRINTF(ch, PF_SEQ, producer, i) != AQL_CHANNEL_SENT;
	return bad;
}

/*
 * Values of every type a record carries, 0 and 12 values, two pointers
 * (p and one to private memory) and a double for a %d; returns the
 * results of the sends or'ed.
 */
static inline int pf_send_types(aql_global aql_channel_dev *ch, int32_t i, uint32_t u,
				int64_t l, uint64_t ul, float f, double d,
				aql_global int32_t *p)
{
	int8_t c = (int8_t)i;
	uint16_t s = (uint16_t)u;
	int32_t private_value = i;
	int r = 0;

	r |= AQL_PRINTF(ch, PF_TYPES, i, u, l, ul, f, d, c, s);
	r |= AQL_PRINTF(ch, PF_TWELVE, 1, 2u, 3l, 4ul, 5.0f, 6.0, (int8_t)-7, (uint8_t)8,
			(int16_t)-9, (uint16_t)10, 'k', i);
	r |= AQL_PRINTF(ch, PF_NONE);
	r |= AQL_PRINTF(ch, PF_PTR, p, &private_value);
	r |= AQL_PRINTF(ch, PF_MISMATCH, d);
	return r + private_value - i;
}

#endif
