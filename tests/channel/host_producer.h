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

/*
 * Send count messages as producer 0, one at a time: after message i, wait
 * until *ack is i + 1 (UINT32_MAX: stop), then idle for a while that
 * changes from one message to the next, so that the next send finds the
 * consumer spinning, announcing its sleep or asleep. Returns the messages
 * sent.
 */
uint32_t chan_host_ping(uint64_t channel, uint32_t count, uint32_t *ack);

#endif
