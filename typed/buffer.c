/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/copy.h>
#include <aql/mem.h>

#include "aql/agent_impl.h"
#include "util/error.h"
#include "util/lock.h"
#include "aql/queue_impl.h"
#include "aql/timeline.h"
#include "typed/buffer_impl.h"

/* Records of work in flight a root keeps before dropping completed ones. */
#define PRUNE_AT 8u

static aql_lock buf_lock = AQL_LOCK_INIT;
static uint64_t next_id;

void aql_buf_lock(void)
{
	aql_lock_take(&buf_lock);
}

void aql_buf_unlock(void)
{
	aql_lock_release(&buf_lock);
}

static size_t bytes_of(const struct aql_buf_root *r, uint64_t count)
{
	return (size_t)count * r->type->size;
}

aql_status aql_buf_create(const aql_type *type, uint64_t count, enum aql_direction dir,
			  const aql_buf_config *config, aql_buf **out)
{
	struct aql_buf_root *r;
	aql_mem_pool *pool;
	aql_buf *b;
	uint64_t product = 1;
	uint32_t ndim = config ? config->ndim : 0;
	size_t bytes;
	aql_status st;

	if (!type || !out || !count)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_buf_create: a type, a non-zero count and out are required%s",
				type ? "" : " (is the struct type registered?)");
	if (dir < AQL_IN || dir > AQL_INOUT)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_buf_create: direction %d is unknown",
				(int)dir);
	if (count > SIZE_MAX / 2 / type->size)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_buf_create: %" PRIu64 " elements of %s (%u bytes) overflow",
				count, type->name, type->size);
	if (ndim > 4)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_buf_create: %u dimensions; at most 4",
				ndim);
	for (uint32_t i = 0; ndim > 1 && i < ndim; i++) {
		if (!config->shape[i] || product > UINT64_MAX / config->shape[i])
			return aql_fail(AQL_ERR_INVALID_ARG,
					"aql_buf_create: extent %u of the shape is %" PRIu64, i,
					config->shape[i]);
		product *= config->shape[i];
	}
	if (ndim > 1 && product != count)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_buf_create: the shape has %" PRIu64 " elements, count is %" PRIu64,
				product, count);
	bytes = (size_t)count * type->size;
	r = calloc(1, sizeof(*r));
	b = calloc(1, sizeof(*b));
	if (!r || !b) {
		free(r);
		free(b);
		return aql_fail(AQL_ERR_NOMEM, "aql_buf_create: out of memory");
	}
	st = aql_mem_pool_data(AQL_MEM_FINE_GRAINED, &pool);
	if (st == AQL_OK)
		st = aql_mem_alloc(pool, bytes, type->align > 64 ? type->align : 64, &r->host);
	if (st != AQL_OK) {
		free(r);
		free(b);
		return aql_fail_prefix(st, "aql_buf_create");
	}
	memset(r->host, 0, bytes);
	r->type = type;
	r->count = count;
	r->ndim = ndim > 1 ? ndim : 1;
	if (ndim > 1)
		memcpy(r->shape, config->shape, sizeof(r->shape));
	else
		r->shape[0] = count;
	if (config && config->name)
		snprintf(r->name, sizeof(r->name), "%s", config->name);
	else
		snprintf(r->name, sizeof(r->name), "buffer #%" PRIu64,
			 __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED));
	b->root = r;
	b->count = count;
	b->dir = dir;
	snprintf(b->name, sizeof(b->name), "%s", r->name);
	*out = b;
	return AQL_OK;
}

static void prune(struct aql_buf_root *r)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < r->ninflight; i++)
		if (!aql_completion_done(r->inflight[i].done))
			r->inflight[k++] = r->inflight[i];
	r->ninflight = k;
}

/* Under the lock (or with the root no longer shared): give up the storage
 * on the root's agent; the host's copy is all there is then. */
static void release_agent(struct aql_buf_root *r)
{
	aql_agent *agent = r->agent;

	if (!agent)
		return;
	if (r->agent_mem && !r->unified)
		aql_agent_mem_free(agent, r->agent_mem);
	if (agent->copy_args && !r->unified)
		aql_agent_mem_unregister(agent, r->host, bytes_of(r, r->count));
	__atomic_fetch_sub(&agent->buffers, 1, __ATOMIC_RELEASE);
	r->agent_mem = NULL;
	r->agent_stale.n = 0;
	r->host_stale.n = 0;
	r->unified = 0;
	r->agent = NULL;
}

aql_status aql_buf_destroy(aql_buf *b)
{
	struct aql_buf_root *r;

	if (!b)
		return AQL_OK;
	r = b->root;
	aql_buf_lock();
	prune(r);
	if (!b->parent && (r->views || r->ninflight)) {
		aql_buf_unlock();
		return aql_fail(AQL_ERR_BUSY, "buffer '%s' still has %u view(s) and %u piece(s) of work in flight",
				b->name, r->views, r->ninflight);
	}
	if (b->parent) {
		r->views--;
		aql_buf_unlock();
		free(b);
		return AQL_OK;
	}
	aql_buf_unlock();
	/* What only the agent held goes with it: nobody asked for it. */
	release_agent(r);
	aql_mem_free(r->host);
	aql_range_free(&r->agent_stale);
	aql_range_free(&r->host_stale);
	free(r->inflight);
	free(r);
	free(b);
	return AQL_OK;
}

aql_status aql_buf_slice(aql_buf *b, uint64_t first, uint64_t count, aql_buf **out)
{
	aql_buf *v;

	if (!b || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_buf_slice: buffer and out are required");
	if (!count || first > b->count || count > b->count - first)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_buf_slice: elements [%" PRIu64 ", %" PRIu64 ") are not inside '%s' (%" PRIu64 " elements)",
				first, first + count, b->name, b->count);
	v = calloc(1, sizeof(*v));
	if (!v)
		return aql_fail(AQL_ERR_NOMEM, "aql_buf_slice: out of memory");
	v->root = b->root;
	v->parent = b;
	v->first = b->first + first;
	v->count = count;
	v->dir = b->dir;
	snprintf(v->name, sizeof(v->name), "%s[%" PRIu64 ":%" PRIu64 "]", b->root->name,
		 v->first, v->first + count);
	aql_buf_lock();
	b->root->views++;
	aql_buf_unlock();
	*out = v;
	return AQL_OK;
}

aql_status aql_buf_partition(aql_buf *b, uint32_t n, aql_buf **out)
{
	uint64_t first = 0, each, extra;
	aql_status st;

	if (!b || !out || !n || n > b->count)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_buf_partition: %u parts of '%s' (%" PRIu64 " elements): need 1 to %" PRIu64,
				n, b ? b->name : "(null)", b ? b->count : 0, b ? b->count : 0);
	each = b->count / n;
	extra = b->count % n;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t count = each + (i < extra);

		st = aql_buf_slice(b, first, count, &out[i]);
		if (st != AQL_OK) {
			while (i--)
				aql_buf_destroy(out[i]);
			return st;
		}
		first += count;
	}
	return AQL_OK;
}

aql_status aql_buf_get_info(const aql_buf *b, aql_buf_info *out)
{
	const struct aql_buf_root *r;

	if (!b || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_buf_get_info: buffer and out are required");
	r = b->root;
	*out = (aql_buf_info){ .name = b->name, .type = r->type, .count = b->count,
			       .first = b->first, .ndim = b->parent ? 1 : r->ndim,
			       .dir = b->dir, .is_view = b->parent != NULL };
	if (b->parent)
		out->shape[0] = b->count;
	else
		memcpy(out->shape, r->shape, sizeof(out->shape));
	aql_buf_lock();
	out->agent = r->agent;
	out->moves_to_agent = r->moves_to_agent;
	out->moves_to_host = r->moves_to_host;
	out->bytes_to_agent = r->bytes_to_agent;
	out->bytes_to_host = r->bytes_to_host;
	aql_buf_unlock();
	return AQL_OK;
}

aql_status aql_buf_set_direction(aql_buf *b, enum aql_direction dir)
{
	if (!b || dir < AQL_IN || dir > AQL_INOUT)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_buf_set_direction: bad buffer or direction");
	__atomic_store_n(&b->dir, dir, __ATOMIC_RELAXED);
	return AQL_OK;
}

static int overlaps(const struct aql_buf_access *a, uint64_t first, uint64_t end)
{
	return a->first < end && first < a->end;
}

/*
 * Does work submitted to queue (NULL: the host) after the completions in
 * after[0..n) come after the work whose completion is d?
 */
static int ordered_after(aql_completion d, aql_queue *queue, const aql_completion *after,
			 uint32_t n)
{
	struct aql_timeline *t = queue ? __atomic_load_n(&aql_queue_impl(queue)->timeline,
							 __ATOMIC_ACQUIRE) : NULL;

	if (t && d.signal == t->signal)
		return 1;	/* the same queue's packets run in order */
	for (uint32_t i = 0; i < n; i++)
		if (after[i].signal == d.signal && after[i].below <= d.below)
			return 1;
	return 0;
}

/*
 * Under the lock: work in flight on b's range that an access (a write or
 * not) by queue (NULL: the host) after[0..n) would race with, or NULL.
 * The queue's own records are passed over before their signal is read:
 * its processor keeps writing that line, and aql_buf_track() supersedes
 * them anyway.
 */
static const struct aql_buf_access *conflict(struct aql_buf_root *r, const aql_buf *b,
					     int write, aql_queue *queue,
					     const aql_completion *after, uint32_t n)
{
	if (r->ninflight > PRUNE_AT)
		prune(r);
	for (uint32_t i = 0; i < r->ninflight; i++) {
		const struct aql_buf_access *a = &r->inflight[i];

		if (overlaps(a, b->first, b->first + b->count) && (write || a->write) &&
		    !ordered_after(a->done, queue, after, n) && !aql_completion_done(a->done))
			return a;
	}
	return NULL;
}

static aql_status fail_busy(const aql_buf *b, const struct aql_buf_access *a, const char *advice)
{
	return aql_fail(AQL_ERR_BUSY, "buffer '%s': elements [%" PRIu64 ", %" PRIu64 ") are %s by %s%s",
			b->name, a->first, a->end, a->write ? "written" : "read", a->what, advice);
}

/*
 * Under the lock, with no write in flight on [first, end): copy back to
 * the host, one piece at a time, the parts of it only the agent holds.
 * Pieces are copied exactly: a gap between two may hold the host's newer
 * data.
 */
static aql_status sync_host(struct aql_buf_root *r, const char *name, uint64_t first,
			    uint64_t end)
{
	struct aql_range p;
	aql_status st;

	if (!r->host_stale.n)
		return AQL_OK;
	/* Room for the split the removal below may make: it cannot fail then. */
	st = aql_range_reserve(&r->host_stale, r->host_stale.n + 1);
	for (uint32_t i = 0; st == AQL_OK && aql_range_next(&r->host_stale, first, end, &i, &p);) {
		size_t off = bytes_of(r, p.first);

		st = aql_agent_copy(r->agent, (char *)r->host + off, (const char *)r->agent_mem + off,
				    bytes_of(r, p.end - p.first));
		if (st == AQL_OK) {
			r->moves_to_host++;
			r->bytes_to_host += bytes_of(r, p.end - p.first);
		}
	}
	if (st != AQL_OK)
		return aql_fail_prefix(st, name);
	return aql_range_remove(&r->host_stale, first, end);
}

static void *host_access(aql_buf *b, const aql_type *type, int write)
{
	struct aql_buf_root *r;
	const struct aql_buf_access *a;
	aql_status st = AQL_OK;

	if (!b) {
		aql_fail(AQL_ERR_INVALID_ARG, "host access to a NULL buffer");
		return NULL;
	}
	r = b->root;
	if (type != r->type) {
		aql_fail(AQL_ERR_INVALID_ARG, "buffer '%s' holds %s, not %s", b->name,
			 r->type->name, type ? type->name : "(unregistered type)");
		return NULL;
	}
	aql_buf_lock();
	a = conflict(r, b, write, NULL, NULL, 0);
	if (a)
		st = fail_busy(b, a, " in flight; wait for its completion (aql_buf_wait)");
	else
		st = sync_host(r, b->name, b->first, b->first + b->count);
	if (st == AQL_OK && write && r->agent_mem && !r->unified)
		st = aql_range_add(&r->agent_stale, b->first, b->first + b->count);
	aql_buf_unlock();
	if (st != AQL_OK)
		return NULL;
	return (char *)r->host + bytes_of(r, b->first);
}

void *aql_buf_host_storage(aql_buf *b)
{
	return b ? (char *)b->root->host + bytes_of(b->root, b->first) : NULL;
}

/* Under the lock: b's range is replaced on the host, what only the agent
 * held with it. */
static aql_status host_replaces(aql_buf *b)
{
	struct aql_buf_root *r = b->root;
	aql_status st;

	if (!r->agent_mem || r->unified)
		return AQL_OK;
	st = aql_range_remove(&r->host_stale, b->first, b->first + b->count);
	return st == AQL_OK ? aql_range_add(&r->agent_stale, b->first, b->first + b->count) : st;
}

aql_status aql_buf_host_written(aql_buf *b, aql_queue *queue)
{
	aql_status st;

	if (!b || !queue)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_buf_host_written: buffer and queue are required");
	aql_buf_lock();
	st = aql_buf_check(b, queue, 1, NULL, 0);
	if (st == AQL_OK)
		st = host_replaces(b);
	aql_buf_unlock();
	return st;
}

void *aql_buf_host(aql_buf *b, const aql_type *type)
{
	return host_access(b, type, 1);
}

const void *aql_buf_host_const(aql_buf *b, const aql_type *type)
{
	return host_access(b, type, 0);
}

aql_status aql_buf_check(aql_buf *b, aql_queue *queue, int write, const aql_completion *after,
			 uint32_t n)
{
	const struct aql_buf_access *a = conflict(b->root, b, write, queue, after, n);

	if (!a)
		return AQL_OK;
	return fail_busy(b, a, " on another queue, and this work is not ordered after it"
			       " (pass its completion as a dependency)");
}

aql_status aql_buf_bind(aql_buf *b, aql_agent *agent, void **agent_ptr)
{
	struct aql_buf_root *r = b->root;
	aql_agent_info info;
	aql_status st;

	if (r->agent && r->agent != agent) {
		/* Moving to another agent goes through the host. */
		prune(r);
		if (r->ninflight)
			return aql_fail(AQL_ERR_BUSY,
					"buffer '%s' is on another agent, where %s uses elements [%" PRIu64 ", %" PRIu64 ") in flight; wait for its completion before using the buffer here",
					b->name, r->inflight[0].what, r->inflight[0].first,
					r->inflight[0].end);
		st = sync_host(r, b->name, 0, r->count);
		if (st != AQL_OK)
			return st;
		release_agent(r);
	}
	if (!r->agent) {
		st = aql_agent_get_info(agent, &info);
		if (st != AQL_OK)
			return st;
		if (info.unified_memory) {
			r->agent_mem = r->host;
			r->unified = 1;
		} else {
			int reg = 0;

			st = aql_agent_mem_alloc(agent, bytes_of(r, r->count), &r->agent_mem);
			/* An agent whose copies are kernels (copy_args) reads the
			 * host storage through the GPU's page tables. */
			if (st == AQL_OK && agent->copy_args &&
			    (st = aql_agent_mem_register(agent, r->host, bytes_of(r, r->count))) == AQL_OK)
				reg = 1;
			if (st == AQL_OK)
				st = aql_range_add(&r->agent_stale, 0, r->count);
			if (st != AQL_OK) {
				if (reg)
					aql_agent_mem_unregister(agent, r->host, bytes_of(r, r->count));
				aql_agent_mem_free(agent, r->agent_mem);
				r->agent_mem = NULL;
				return aql_fail_prefix(st, b->name);
			}
		}
		r->agent = agent;
		__atomic_fetch_add(&agent->buffers, 1, __ATOMIC_RELAXED);
	}
	*agent_ptr = (char *)r->agent_mem + bytes_of(r, b->first);
	return AQL_OK;
}

/*
 * Under the lock: may one host-to-agent copy span [first, end), the gap
 * between two pieces the agent lacks? Only if the host's copy of the gap
 * is current: copied back now where no work in flight writes it.
 */
static int joinable(struct aql_buf_root *r, const char *name, uint64_t first, uint64_t end)
{
	if (!aql_range_intersect(&r->host_stale, first, end, NULL, 0))
		return 1;
	for (uint32_t i = 0; i < r->ninflight; i++)
		if (r->inflight[i].write && overlaps(&r->inflight[i], first, end) &&
		    !aql_completion_done(r->inflight[i].done))
			return 0;
	return sync_host(r, name, first, end) == AQL_OK;
}

aql_status aql_buf_plan_in(aql_buf *b, struct aql_copy_plan *plan)
{
	struct aql_buf_root *r = b->root;
	struct aql_range pieces[AQL_BUF_MAX_PIECES + 1];
	struct aql_copy_plan before = *plan;
	uint64_t first = b->first, end = b->first + b->count;
	uint32_t n = 0, k;
	aql_status st = AQL_OK;

	for (uint32_t i = 0; aql_range_next(&r->agent_stale, first, end, &i, &pieces[n]);) {
		n++;
		if (n <= AQL_BUF_MAX_PIECES)
			continue;
		/* One piece too many: span a gap whose host data is current. */
		for (k = 0; k + 1 < n && !joinable(r, b->name, pieces[k].end, pieces[k + 1].first); k++)
			;
		if (k + 1 == n)
			return aql_fail(AQL_ERR_BUSY,
					"buffer '%s': the host changed more than %u pieces between results that work in flight still writes; wait for that work first",
					b->name, AQL_BUF_MAX_PIECES);
		pieces[k].end = pieces[k + 1].end;
		memmove(&pieces[k + 1], &pieces[k + 2], (n - k - 2) * sizeof(*pieces));
		n--;
	}
	for (uint32_t i = 0; i < n && st == AQL_OK; i++) {
		size_t off = bytes_of(r, pieces[i].first);

		st = aql_copy_plan_add(plan, (char *)r->agent_mem + off,
				       (const char *)r->host + off,
				       bytes_of(r, pieces[i].end - pieces[i].first));
	}
	if (st != AQL_OK)
		*plan = before;
	return st;
}

aql_status aql_buf_reserve(aql_buf *b, uint32_t n)
{
	struct aql_buf_root *r = b->root;
	struct aql_buf_access *grown;
	uint32_t cap = r->cap ? r->cap : 4;

	/* The launch path: room already there. */
	if (r->cap >= r->ninflight + n &&
	    (r->unified || (r->agent_stale.cap >= r->agent_stale.n + n &&
			    r->host_stale.cap >= r->host_stale.n + n)))
		return AQL_OK;
	while (cap < r->ninflight + n)
		cap *= 2;
	if (cap != r->cap) {
		grown = realloc(r->inflight, cap * sizeof(*grown));
		if (!grown)
			return aql_fail(AQL_ERR_NOMEM, "buffer '%s': out of memory", b->name);
		r->inflight = grown;
		r->cap = cap;
	}
	if (r->unified)
		return AQL_OK;
	if (aql_range_reserve(&r->agent_stale, r->agent_stale.n + n) != AQL_OK ||
	    aql_range_reserve(&r->host_stale, r->host_stale.n + n) != AQL_OK)
		return aql_fail(AQL_ERR_NOMEM, "buffer '%s': out of memory", b->name);
	return AQL_OK;
}

aql_status aql_buf_mark_current(aql_buf *b)
{
	return aql_range_remove(&b->root->agent_stale, b->first, b->first + b->count);
}

aql_status aql_buf_mark_written(aql_buf *b)
{
	return aql_range_add(&b->root->host_stale, b->first, b->first + b->count);
}

aql_status aql_buf_track(aql_buf *b, int write, aql_completion done, const char *what)
{
	struct aql_buf_root *r = b->root;
	struct aql_buf_access *a;
	uint32_t i;

	/* Later work of the same queue on the same range supersedes earlier. */
	for (i = 0; i < r->ninflight; i++) {
		a = &r->inflight[i];
		if (a->done.signal == done.signal && a->first == b->first &&
		    a->end == b->first + b->count && a->write <= write)
			break;
	}
	if (i == r->ninflight) {
		aql_status st = aql_buf_reserve(b, 1);

		if (st != AQL_OK)
			return st;
		r->ninflight++;
	}
	a = &r->inflight[i];
	*a = (struct aql_buf_access){ b->first, b->first + b->count, write, done, what };
	return AQL_OK;
}

/* The latest write in flight on b's range: what a reader must wait for. */
static aql_completion last_write(struct aql_buf_root *r, const aql_buf *b)
{
	aql_completion c = { 0 };

	prune(r);
	for (uint32_t i = 0; i < r->ninflight; i++)
		if (r->inflight[i].write && overlaps(&r->inflight[i], b->first, b->first + b->count))
			c = r->inflight[i].done;
	return c;
}

aql_status aql_buf_to_agent(aql_buf *b, aql_queue *queue, aql_completion *done)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	aql_packet packets[AQL_BUF_MAX_PIECES];
	struct aql_copy_plan plan = { .agent = q->agent, .out = packets };
	struct aql_timeline *t;
	aql_completion c = { 0 };
	void *args = NULL, *agent_ptr;
	aql_status st;

	if (!b || !queue)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_buf_to_agent: buffer and queue are required");
	st = aql_timeline_get(queue, &t);
	if (st != AQL_OK)
		return st;
	aql_lock_take(&t->lock);
	if (q->agent->copy_args)
		st = aql_timeline_kernarg(t, queue, AQL_BUF_MAX_PIECES * q->agent->copy_args,
					  &args);
	plan.args = args;
	aql_buf_lock();
	/* Filling the agent's copy writes it: no unordered reader may overlap. */
	if (st == AQL_OK)
		st = aql_buf_check(b, queue, 1, NULL, 0);
	if (st == AQL_OK)
		st = aql_buf_bind(b, q->agent, &agent_ptr);
	if (st == AQL_OK)
		st = aql_buf_reserve(b, 1);
	if (st == AQL_OK)
		st = aql_buf_plan_in(b, &plan);
	aql_timeline_sign(t, packets, plan.n);
	if (st == AQL_OK && plan.n)
		st = aql_timeline_emit(t, queue, packets, plan.n, &c);
	if (st == AQL_OK && plan.n) {
		t->stats.copies_in += plan.n;
		t->stats.bytes_in += plan.bytes;
		b->root->moves_to_agent += plan.n;
		b->root->bytes_to_agent += plan.bytes;
		aql_buf_mark_current(b);
		aql_buf_track(b, 1, c, "a copy to the agent");
	} else if (st == AQL_OK) {
		/* Nothing to copy; an earlier fill may still be on its way. */
		c = last_write(b->root, b);
	}
	if (args && st == AQL_OK && plan.n)
		aql_timeline_kernarg_commit(t, t->packets);
	else if (args)
		aql_timeline_kernarg_cancel(t);
	aql_buf_unlock();
	aql_lock_release(&t->lock);
	if (st != AQL_OK)
		return st;
	if (done)
		*done = c;
	return done ? AQL_OK : aql_completion_wait(c, AQL_TIMEOUT_INFINITE);
}

aql_status aql_buf_to_host(aql_buf *b, aql_queue *queue, aql_completion *done)
{
	struct aql_queue_impl *q;
	struct aql_buf_root *r;
	struct aql_copy_plan plan = { 0 };
	struct aql_range p;
	aql_packet *packets = NULL;
	struct aql_timeline *t;
	aql_completion c = { 0 };
	void *args = NULL;
	uint32_t n = 0, room = 0;	/* pieces to copy, pieces packets were taken for */
	aql_status st;

	if (!b || !queue)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_buf_to_host: buffer and queue are required");
	q = aql_queue_impl(queue);
	r = b->root;
	st = aql_timeline_get(queue, &t);
	if (st != AQL_OK)
		return st;
	aql_lock_take(&t->lock);
	aql_buf_lock();
	for (;;) {
		if (st == AQL_OK && r->agent && r->agent != q->agent)
			st = aql_fail(AQL_ERR_INVALID_ARG,
				      "aql_buf_to_host: buffer '%s' is on another agent than the queue's",
				      b->name);
		if (st == AQL_OK && !r->unified)
			n = aql_range_intersect(&r->host_stale, b->first, b->first + b->count, NULL, 0);
		if (st != AQL_OK || n <= room)
			break;
		/* Packets and kernarg for n pieces, taken unlocked as aql_launch()
		 * takes its kernarg: it may wait for older launches. Others may
		 * add pieces meanwhile: count again. */
		aql_buf_unlock();
		if (args)
			aql_timeline_kernarg_cancel(t);
		args = NULL;
		free(packets);
		room = n;
		if (!(packets = malloc(n * sizeof(*packets))))
			st = aql_fail(AQL_ERR_NOMEM, "aql_buf_to_host: out of memory");
		else if (q->agent->copy_args)
			st = aql_timeline_kernarg(t, queue, (size_t)n * q->agent->copy_args, &args);
		aql_buf_lock();
	}
	/* Filling the host's copy writes it: no unordered reader may overlap. */
	if (st == AQL_OK && n)
		st = aql_buf_check(b, queue, 1, NULL, 0);
	if (st == AQL_OK && n)
		st = aql_buf_reserve(b, 1);
	plan = (struct aql_copy_plan){ .agent = q->agent, .out = packets, .args = args };
	/* Each piece exactly, as sync_host() copies them. */
	for (uint32_t i = 0; st == AQL_OK && n &&
			    aql_range_next(&r->host_stale, b->first, b->first + b->count, &i, &p);) {
		size_t off = bytes_of(r, p.first);

		st = aql_copy_plan_add(&plan, (char *)r->host + off, (const char *)r->agent_mem + off,
				       bytes_of(r, p.end - p.first));
	}
	if (st == AQL_OK && n) {
		aql_timeline_sign(t, packets, plan.n);
		st = aql_timeline_emit(t, queue, packets, plan.n, &c);
	}
	if (st == AQL_OK && n) {
		t->stats.copies_out += plan.n;
		t->stats.bytes_out += plan.bytes;
		r->moves_to_host += plan.n;
		r->bytes_to_host += plan.bytes;
		/* Reserved above: neither fails. */
		aql_range_remove(&r->host_stale, b->first, b->first + b->count);
		aql_buf_track(b, 1, c, "a copy to the host");
	} else if (st == AQL_OK) {
		/* Nothing to copy; an earlier copy back may still be on its way. */
		c = last_write(r, b);
	}
	if (args && st == AQL_OK && n)
		aql_timeline_kernarg_commit(t, t->packets);
	else if (args)
		aql_timeline_kernarg_cancel(t);
	aql_buf_unlock();
	aql_lock_release(&t->lock);
	free(packets);
	if (st != AQL_OK)
		return st;
	if (done)
		*done = c;
	return done ? AQL_OK : aql_completion_wait(c, AQL_TIMEOUT_INFINITE);
}

aql_status aql_buf_wait(aql_buf *b, uint64_t timeout_ns)
{
	struct aql_buf_root *r;
	struct aql_buf_access *seen = NULL;
	aql_status st, first = AQL_OK;
	uint32_t n;

	if (!b)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_buf_wait: buffer is NULL");
	r = b->root;
	/* Failed work counts as done; wait on each record before pruning, so
	 * that its failure is reported once. */
	for (;;) {
		aql_buf_lock();
		n = 0;
		free(seen);
		seen = malloc((r->ninflight ? r->ninflight : 1) * sizeof(*seen));
		for (uint32_t i = 0; seen && i < r->ninflight; i++)
			if (overlaps(&r->inflight[i], b->first, b->first + b->count))
				seen[n++] = r->inflight[i];
		/* Nothing uses the range: bring the host's copy up to date. */
		if (seen && !n && (st = sync_host(r, b->name, b->first, b->first + b->count)) != AQL_OK &&
		    first == AQL_OK)
			first = st;
		aql_buf_unlock();
		if (!seen)
			return aql_fail(AQL_ERR_NOMEM, "aql_buf_wait: out of memory");
		if (!n)
			break;
		for (uint32_t i = 0; i < n; i++) {
			st = aql_completion_wait(seen[i].done, timeout_ns);
			if (st == AQL_ERR_TIMEOUT) {
				st = aql_fail(st, "buffer '%s': %s still uses elements [%" PRIu64 ", %" PRIu64 ")",
					      b->name, seen[i].what, seen[i].first, seen[i].end);
				free(seen);
				return st;
			}
			if (st != AQL_OK && first == AQL_OK)
				first = aql_fail(st, "buffer '%s': %s on elements [%" PRIu64 ", %" PRIu64 ") failed or was cancelled",
						 b->name, seen[i].what, seen[i].first, seen[i].end);
		}
		aql_buf_lock();
		prune(r);
		aql_buf_unlock();
	}
	free(seen);
	return first;
}

aql_status aql_buf_read_file(aql_buf *b, const char *path, uint64_t offset,
			     const aql_file_read_options *opts, aql_signal *completion,
			     aql_file_read_op **op)
{
	aql_file_read_options o = opts ? *opts : (aql_file_read_options){ 0 };
	struct aql_buf_root *r;
	const struct aql_buf_access *a;
	aql_status st = AQL_OK;
	size_t bytes;

	if (!b || !path || (completion && !op))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_buf_read_file: buffer, path (and op with a completion) are required");
	r = b->root;
	bytes = bytes_of(r, b->count);
	if (o.length && o.length != bytes)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_buf_read_file: length %" PRIu64 " is not the %zu bytes of '%s'",
				o.length, bytes, b->name);
	o.length = bytes;
	aql_buf_lock();
	a = conflict(r, b, 1, NULL, NULL, 0);
	if (a)
		st = fail_busy(b, a, " in flight; wait for its completion (aql_buf_wait)");
	/* The file's data replaces what only the agent held. */
	else
		st = host_replaces(b);
	/* A background read is work in flight from the moment it starts. */
	if (st == AQL_OK && completion) {
		st = aql_file_read_async(path, (char *)r->host + bytes_of(r, b->first), bytes, offset,
					 &o, completion, op);
		if (st == AQL_OK)
			st = aql_buf_track(b, 1, aql_completion_of_signal(completion), "a file read");
	}
	aql_buf_unlock();
	if (st != AQL_OK || completion)
		return st;
	return aql_file_read(path, (char *)r->host + bytes_of(r, b->first), bytes, offset, &o,
			     NULL);
}
