/* SPDX-License-Identifier: MIT */
/* Internal: record why a call failed, in the thread's message buffer. */
#ifndef AQL_INTERNAL_ERROR_H
#define AQL_INTERNAL_ERROR_H

#include <aql/status.h>

/* Set this thread's message from printf-style arguments; returns status. */
aql_status aql_fail(aql_status status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* As aql_fail(), appending ": strerror(err)". */
aql_status aql_fail_errno(aql_status status, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Put "prefix: " before this thread's message, e.g. a file name. */
aql_status aql_fail_prefix(aql_status status, const char *prefix);

/*
 * A failure kept to be reported again on every later call, on any thread:
 * a driver that could not load once stays unloaded, and each call says why.
 */
struct aql_kept_failure {
	aql_status status;
	char message[512];
};

/* Keep status and this thread's message in k; returns status. */
aql_status aql_keep_failure(struct aql_kept_failure *k, aql_status status);

/* Fail again with k: its status, and "prefix: message" (prefix may be NULL). */
aql_status aql_fail_kept(const struct aql_kept_failure *k, const char *prefix);

#endif
