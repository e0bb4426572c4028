/* SPDX-License-Identifier: MIT */
/*
 * The messages of tests/channel/kernels.c, shared by the kernels and the
 * tests that check them; plain C that also compiles as OpenCL C.
 */
#ifndef AQL_TEST_CHANNEL_MSG_H
#define AQL_TEST_CHANNEL_MSG_H

#define CHAN_SIZES_MAX 700u	/* largest message chan_sizes sends */
#define CHAN_OP_MUL 7u

/* 56 bytes: with the 8-byte header, one 64-byte slot. */
struct chan_msg {
	uint32_t producer;
	uint32_t seq;
	uint64_t check;
	uint64_t fill[5];
};

static inline uint64_t chan_check(uint32_t producer, uint32_t seq)
{
	uint64_t x = ((uint64_t)producer << 32 | seq) * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 29);
}

static inline void chan_msg_fill(struct chan_msg *m, uint32_t producer, uint32_t seq)
{
	m->producer = producer;
	m->seq = seq;
	m->check = chan_check(producer, seq);
	for (int i = 0; i < 5; i++)
		m->fill[i] = m->check + (uint64_t)i;
}

static inline uint32_t chan_size_of(uint32_t producer, uint32_t i, uint32_t max)
{
	return (producer * 131u + i * 57u) % (max + 1);
}

static inline uint8_t chan_byte(uint32_t producer, uint32_t i, uint32_t j)
{
	return (uint8_t)(producer * 7u + i * 13u + j);
}

#endif
