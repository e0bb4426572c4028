/* SPDX-License-Identifier: MIT */
#ifndef AQL_TEST_CHANNEL_HOST_PRODUCER_H
#define AQL_TEST_CHANNEL_HOST_PRODUCER_H

#include <stdint.h>

/*
 * Send count struct chan_msg of producer through the channel whose device
 * address is channel, from the calling thread; returns how many were
 * dropped.
 */
uint32_t chan_host_produce(uint64_t channel, uint32_t producer, uint32_t count);

#endif
