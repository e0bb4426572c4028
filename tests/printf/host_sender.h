/* SPDX-License-Identifier: MIT */
/*
 * The printf producers of senders.h run by plain host threads, kept apart
 * from test_printf.c as aql/kernel.h is for kernel code. channel is
 * aql_channel_device_address() of a channel of the CPU agent.
 */
#ifndef AQL_TEST_PRINTF_HOST_SENDER_H
#define AQL_TEST_PRINTF_HOST_SENDER_H

#include <stdint.h>

uint32_t pf_host_seq(uint64_t channel, uint32_t producer, uint32_t count);
int pf_host_types(uint64_t channel, int32_t i, uint32_t u, int64_t l, uint64_t ul, float f,
		  double d, int32_t *p);
/*
 * Records 100 (twelve integers of every C type), 101 (float, double, two
 * pointers, and (*counter)++, which must be evaluated once) and 102 (no
 * values), for a check of the tags and values AQL_PRINTF() sends. The
 * results of the sends or'ed.
 */
int pf_host_tags(uint64_t channel, const volatile int *p, int *counter);

/* One message of kind AQL_CHANNEL_KIND_PRINTF: bytes at data, as they are. */
int pf_host_send_raw(uint64_t channel, const void *data, uint32_t bytes);

#endif
