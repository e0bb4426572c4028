/* SPDX-License-Identifier: MIT */
/*
 * Checks of the messages tests/channel/kernels.c sends, shared by
 * test_channel and test_channel_stress: a drain callback that keeps each
 * producer's next sequence number.
 */
#ifndef AQL_TEST_CHANNEL_VERIFY_H
#define AQL_TEST_CHANNEL_VERIFY_H

#include <stdio.h>
#include <stdlib.h>
#include <aql/channel.h>

#include "msg.h"

struct chan_verify {
	uint32_t producers;
	int gaps;		/* drop mode: sequence numbers may skip */
	uint32_t *next;		/* per producer: the next sequence number */
	uint64_t received;
	uint64_t errors;
	char first_error[160];
};

static inline void chan_verify_init(struct chan_verify *v, uint32_t producers, int gaps)
{
	*v = (struct chan_verify){ .producers = producers, .gaps = gaps };
	v->next = calloc(producers, sizeof(*v->next));
	if (!v->next)
		abort();
}

static inline void chan_verify_fini(struct chan_verify *v)
{
	free(v->next);
	v->next = NULL;
}

static inline void chan_verify_error(struct chan_verify *v, const aql_channel_msg *m,
				     const char *what)
{
	if (!v->errors++)
		snprintf(v->first_error, sizeof(v->first_error), "ticket %llu: %s",
			 (unsigned long long)m->ticket, what);
}

/* aql_channel_fn: one struct chan_msg per message, in each producer's order. */
static inline int chan_verify_msg(const aql_channel_msg *m, void *ctx)
{
	struct chan_verify *v = ctx;
	struct chan_msg c;

	v->received++;
	if (m->size != sizeof(c) || m->kind != AQL_CHANNEL_KIND_DATA) {
		chan_verify_error(v, m, "wrong size or kind");
		return 0;
	}
	__builtin_memcpy(&c, m->data, sizeof(c));
	if (c.producer >= v->producers) {
		chan_verify_error(v, m, "unknown producer");
		return 0;
	}
	if (c.seq < v->next[c.producer] || (!v->gaps && c.seq != v->next[c.producer])) {
		chan_verify_error(v, m, c.seq < v->next[c.producer] ? "duplicate or out of order"
								 : "a message is missing");
		return 0;
	}
	if (c.check != chan_check(c.producer, c.seq) || c.fill[4] != c.check + 4) {
		chan_verify_error(v, m, "checksum");
		return 0;
	}
	v->next[c.producer] = c.seq + 1;
	return 0;
}

#endif
