/* SPDX-License-Identifier: MIT */
/*
 * Internal: buffers as launches see them. A root owns the storage and the
 * state every view of it shares: which element ranges the agent's copy
 * lacks (the host changed them since), which ones the host's copy lacks
 * (a launch wrote them on the agent since), and the work in flight on
 * which ranges. A range is stale on one side at most. One process-wide
 * lock guards that state; launches take it after their queue's launch
 * lock.
 */
#ifndef AQL_INTERNAL_BUFFER_IMPL_H
#define AQL_INTERNAL_BUFFER_IMPL_H

#include <aql/buffer.h>

#include "typed/range.h"

struct aql_copy_plan;

struct aql_buf_access {
	uint64_t first, end;	/* elements of the root */
	int write;
	aql_completion done;
	const char *what;	/* the kernel's name (loaded while its work runs), or "copy" */
};

struct aql_buf_root {
	const aql_type *type;
	uint64_t count;
	void *host;
	void *agent_mem;	/* NULL until an agent uses it; host if unified */
	aql_agent *agent;
	int unified;
	struct aql_range_set agent_stale;
	struct aql_range_set host_stale;
	uint64_t moves_to_agent, moves_to_host;	/* copies of its ranges made */
	uint64_t bytes_to_agent, bytes_to_host;
	struct aql_buf_access *inflight;
	uint32_t ninflight, cap;
	uint32_t views;		/* live views, besides the root itself */
	uint32_t ndim;
	uint64_t shape[4];
	char name[64];
};

struct aql_buf {
	struct aql_buf_root *root;
	struct aql_buf *parent;	/* NULL for the root */
	uint64_t first, count;
	enum aql_direction dir;
	char name[96];
};

void aql_buf_lock(void);
void aql_buf_unlock(void);

/*
 * Under the lock: check that work submitted to queue, after the
 * completions in after[0..n), may use b's range (writing it if write):
 * no overlapping work in flight that is not ordered before it, where one
 * of the two writes. Errors: AQL_ERR_BUSY naming the range and the work.
 */
aql_status aql_buf_check(aql_buf *b, aql_queue *queue, int write, const aql_completion *after,
			 uint32_t n);

/*
 * Under the lock: give b's root storage on agent (none if unified) and
 * set *agent_ptr to b's first element there. A root with storage on
 * another agent moves: what only that agent holds is copied back to the
 * host first, and its storage there is freed. Errors: AQL_ERR_NOMEM,
 * AQL_ERR_BUSY (work in flight on the other agent uses the root), those
 * of aql_agent_copy().
 */
aql_status aql_buf_bind(aql_buf *b, aql_agent *agent, void **agent_ptr);

/* Copy packets one buffer's move to the agent writes at most. */
#define AQL_BUF_MAX_PIECES 4u

/*
 * Under the lock, after aql_buf_bind(): add to plan (aql/timeline.h) at
 * most AQL_BUF_MAX_PIECES copies, for the parts of b's range the agent's
 * copy lacks; more pieces than that are joined across gaps whose host
 * data is current (copied back first where no work in flight writes
 * them). Errors: AQL_ERR_BUSY (no gap can be joined), those of
 * aql_copy_plan_add() and aql_agent_copy(); nothing is added then.
 */
aql_status aql_buf_plan_in(aql_buf *b, struct aql_copy_plan *plan);

/*
 * Under the lock: room for n more records and for the splits that
 * aql_buf_mark_current() may make, so that nothing fails after packets
 * are submitted. Errors: AQL_ERR_NOMEM.
 */
aql_status aql_buf_reserve(aql_buf *b, uint32_t n);

/* Under the lock, once the work is submitted: the agent's copy of b's
 * range is current (copied in, or written whole by the kernel). */
aql_status aql_buf_mark_current(aql_buf *b);

/* Under the lock, once a launch that writes b's range is submitted: only
 * the agent's copy of it will be current. Room comes from aql_buf_reserve(). */
aql_status aql_buf_mark_written(aql_buf *b);

/* Under the lock, once the work is submitted: it uses b's range until done. */
aql_status aql_buf_track(aql_buf *b, int write, aql_completion done, const char *what);

#endif
