/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "typed/range.h"

aql_status aql_range_reserve(struct aql_range_set *s, uint32_t n)
{
	struct aql_range *grown;
	uint32_t cap = s->cap ? s->cap : 4;

	if (n <= s->cap)
		return AQL_OK;
	while (cap < n)
		cap *= 2;
	grown = realloc(s->r, cap * sizeof(*grown));
	if (!grown)
		return aql_fail(AQL_ERR_NOMEM, "buffer range set: out of memory");
	s->r = grown;
	s->cap = cap;
	return AQL_OK;
}

aql_status aql_range_add(struct aql_range_set *s, uint64_t first, uint64_t end)
{
	uint32_t i = 0, j;
	aql_status st;

	if (first >= end)
		return AQL_OK;
	while (i < s->n && s->r[i].end < first)
		i++;
	/* r[i..j) touch or overlap [first, end): they become one range. */
	for (j = i; j < s->n && s->r[j].first <= end; j++) {
		if (s->r[j].first < first)
			first = s->r[j].first;
		if (s->r[j].end > end)
			end = s->r[j].end;
	}
	if (j == i) {
		st = aql_range_reserve(s, s->n + 1);
		if (st != AQL_OK)
			return st;
		memmove(&s->r[i + 1], &s->r[i], (s->n - i) * sizeof(*s->r));
		s->n++;
	} else {
		memmove(&s->r[i + 1], &s->r[j], (s->n - j) * sizeof(*s->r));
		s->n -= j - i - 1;
	}
	s->r[i] = (struct aql_range){ first, end };
	return AQL_OK;
}

aql_status aql_range_remove(struct aql_range_set *s, uint64_t first, uint64_t end)
{
	aql_status st;

	if (first >= end)
		return AQL_OK;
	for (uint32_t i = 0; i < s->n; i++) {
		struct aql_range *r = &s->r[i];

		if (r->end <= first || r->first >= end)
			continue;
		if (r->first < first && r->end > end) {
			/* [first, end) is strictly inside: split in two. */
			st = aql_range_reserve(s, s->n + 1);
			if (st != AQL_OK)
				return st;
			r = &s->r[i];
			memmove(&s->r[i + 1], r, (s->n - i) * sizeof(*s->r));
			s->n++;
			s->r[i].end = first;
			s->r[i + 1].first = end;
			return AQL_OK;
		}
		if (r->first < first) {
			r->end = first;
		} else if (r->end > end) {
			r->first = end;
		} else {
			memmove(r, r + 1, (s->n - i - 1) * sizeof(*s->r));
			s->n--;
			i--;
		}
	}
	return AQL_OK;
}

int aql_range_next(const struct aql_range_set *s, uint64_t first, uint64_t end, uint32_t *i,
		   struct aql_range *out)
{
	while (*i < s->n) {
		const struct aql_range *r = &s->r[(*i)++];

		out->first = r->first > first ? r->first : first;
		out->end = r->end < end ? r->end : end;
		if (out->first < out->end)
			return 1;
	}
	return 0;
}

uint32_t aql_range_intersect(const struct aql_range_set *s, uint64_t first, uint64_t end,
			     struct aql_range *out, uint32_t max)
{
	struct aql_range p;
	uint32_t k = 0;

	for (uint32_t i = 0; aql_range_next(s, first, end, &i, &p); k++) {
		if (k < max)
			out[k] = p;
		else if (max)
			out[max - 1].end = p.end;	/* the last slot spans the rest */
	}
	return k;
}

void aql_range_free(struct aql_range_set *s)
{
	free(s->r);
	s->r = NULL;
	s->n = s->cap = 0;
}
