/* SPDX-License-Identifier: MIT */
/*
 * One error convention for all of libaql: every fallible call returns an
 * aql_status, and on failure leaves a human-readable reason that the same
 * thread can read with aql_error_message().
 */
#ifndef AQL_STATUS_H
#define AQL_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aql_status {
	AQL_OK = 0,
	AQL_ERR_INVALID_ARG,	/* a parameter is out of its documented range */
	AQL_ERR_NOMEM,		/* an allocation or mapping failed */
	AQL_ERR_TIMEOUT,	/* a wait ran past its deadline */
	AQL_ERR_QUEUE_FULL,	/* no slot became free before the deadline */
	AQL_ERR_QUEUE_ERROR,	/* the queue stopped on a malformed packet */
	AQL_ERR_UNSUPPORTED,	/* valid request this agent or system cannot do */
	AQL_ERR_SYSTEM,		/* an OS call failed; the message names it */
	AQL_ERR_INVALID_CODE_OBJECT,	/* malformed ELF, metadata or bundle */
	AQL_ERR_NOT_FOUND,	/* no kernel, symbol or file of that name */
	AQL_ERR_BUSY,		/* work in flight still uses it */
	AQL_ERR_DEVICE,		/* the device or its driver failed; the message names the call */
} aql_status;

/*
 * Short, static name of a status ("AQL_ERR_TIMEOUT: wait timed out").
 * Never NULL; unknown values give "unknown status". Thread safe.
 */
const char *aql_status_str(aql_status status);

/*
 * The reason for the last failure reported by a libaql call on this thread,
 * naming the object and the limit involved. Valid until the next failing
 * call on the same thread. Empty string when nothing failed yet. Thread safe
 * (the buffer is thread-local).
 */
const char *aql_error_message(void);

/*
 * Set this thread's aql_error_message() from printf-style arguments and
 * return status: for libraries built on libaql's public API (libaql-mpi),
 * so that their failures read like libaql's own. Thread safe.
 */
aql_status aql_error_set(aql_status status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
