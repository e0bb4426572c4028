/* SPDX-License-Identifier: MIT */
/* Internal: the one wait loop behind every signal wait in the runtime. */
#ifndef AQL_INTERNAL_WAIT_H
#define AQL_INTERNAL_WAIT_H

#include <aql/signal.h>

/* Met when (value & mask) cond compare. */
struct aql_wait_cond {
	aql_signal *signal;
	int64_t mask;
	int64_t compare;
	enum aql_signal_condition cond;
};

/* Spin budget of AQL_WAIT_SPIN_BLOCK before sleeping. */
#define AQL_WAIT_SPIN_NS 20000u

/*
 * Wait until any condition is met: poll for spin_ns, then sleep on all the
 * signals at once. *index and *observed (either may be NULL) name the
 * first condition found met. The successful load has acquire order.
 * Returns AQL_OK or AQL_ERR_TIMEOUT at deadline_ns (no message is set:
 * callers word their own).
 */
aql_status aql_wait_conds(uint32_t n, const struct aql_wait_cond *conds,
			  uint64_t deadline_ns, uint64_t spin_ns,
			  uint32_t *index, int64_t *observed);

#endif
