/* SPDX-License-Identifier: MIT */
/* Internal: sets of disjoint element ranges [first, end), kept sorted. */
#ifndef AQL_INTERNAL_RANGE_H
#define AQL_INTERNAL_RANGE_H

#include <stdint.h>
#include <aql/status.h>

struct aql_range {
	uint64_t first, end;
};

struct aql_range_set {
	struct aql_range *r;
	uint32_t n, cap;
};

/* Add [first, end), merging with what it touches. Errors: AQL_ERR_NOMEM. */
aql_status aql_range_add(struct aql_range_set *s, uint64_t first, uint64_t end);

/* Remove [first, end), splitting a range that spans it. Errors: AQL_ERR_NOMEM. */
aql_status aql_range_remove(struct aql_range_set *s, uint64_t first, uint64_t end);

/* Room for n ranges. Errors: AQL_ERR_NOMEM. */
aql_status aql_range_reserve(struct aql_range_set *s, uint32_t n);

/*
 * The next part of s inside [first, end), looking from s->r[*i] on, into
 * *out; *i moves past it. Returns 0 when no part is left.
 */
int aql_range_next(const struct aql_range_set *s, uint64_t first, uint64_t end, uint32_t *i,
		   struct aql_range *out);

/*
 * The parts of s inside [first, end), in order, into out (room for max);
 * returns how many there are (which may exceed max: then out[max - 1]
 * ends where the last part ends).
 */
uint32_t aql_range_intersect(const struct aql_range_set *s, uint64_t first, uint64_t end,
			     struct aql_range *out, uint32_t max);

void aql_range_free(struct aql_range_set *s);

#endif
