/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

static __thread char message[512];

const char *aql_status_str(aql_status status)
{
	switch (status) {
	case AQL_OK: return "AQL_OK: success";
	case AQL_ERR_INVALID_ARG: return "AQL_ERR_INVALID_ARG: invalid argument";
	case AQL_ERR_NOMEM: return "AQL_ERR_NOMEM: out of memory";
	case AQL_ERR_TIMEOUT: return "AQL_ERR_TIMEOUT: wait timed out";
	case AQL_ERR_QUEUE_FULL: return "AQL_ERR_QUEUE_FULL: queue full";
	case AQL_ERR_QUEUE_ERROR: return "AQL_ERR_QUEUE_ERROR: queue stopped on an error";
	case AQL_ERR_UNSUPPORTED: return "AQL_ERR_UNSUPPORTED: not supported";
	case AQL_ERR_SYSTEM: return "AQL_ERR_SYSTEM: system call failed";
	case AQL_ERR_INVALID_CODE_OBJECT: return "AQL_ERR_INVALID_CODE_OBJECT: malformed code object";
	case AQL_ERR_NOT_FOUND: return "AQL_ERR_NOT_FOUND: not found";
	case AQL_ERR_BUSY: return "AQL_ERR_BUSY: in use by work in flight";
	case AQL_ERR_DEVICE: return "AQL_ERR_DEVICE: the device or its driver failed";
	}
	return "unknown status";
}

const char *aql_error_message(void)
{
	return message;
}

static void set_message(const char *fmt, va_list ap)
{
	vsnprintf(message, sizeof(message), fmt, ap);
}

aql_status aql_fail(aql_status status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_message(fmt, ap);
	va_end(ap);
	return status;
}

aql_status aql_error_set(aql_status status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_message(fmt, ap);
	va_end(ap);
	return status;
}

aql_status aql_fail_errno(aql_status status, int err, const char *fmt, ...)
{
	va_list ap;
	size_t len;

	va_start(ap, fmt);
	set_message(fmt, ap);
	va_end(ap);
	len = strlen(message);
	snprintf(message + len, sizeof(message) - len, ": %s", strerror(err));
	return status;
}

aql_status aql_keep_failure(struct aql_kept_failure *k, aql_status status)
{
	k->status = status;
	snprintf(k->message, sizeof(k->message), "%s", message);
	return status;
}

aql_status aql_fail_kept(const struct aql_kept_failure *k, const char *prefix)
{
	if (prefix)
		return aql_fail(k->status, "%s: %s", prefix, k->message);
	return aql_fail(k->status, "%s", k->message);
}

aql_status aql_fail_prefix(aql_status status, const char *prefix)
{
	size_t len = strlen(prefix), old = strlen(message);

	if (len + 2 >= sizeof(message))
		len = sizeof(message) - 3;
	if (old > sizeof(message) - len - 3)
		old = sizeof(message) - len - 3;
	memmove(message + len + 2, message, old + 1);
	message[len + 2 + old] = 0;
	memcpy(message, prefix, len);
	memcpy(message + len, ": ", 2);
	return status;
}
