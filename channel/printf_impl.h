/* SPDX-License-Identifier: MIT */
/* Internal: the format parser and record formatter behind aql/printf.h. */
#ifndef AQL_INTERNAL_PRINTF_H
#define AQL_INTERNAL_PRINTF_H

#include <stddef.h>
#include <stdint.h>

#include <aql/printf.h>
#include <aql/queue.h>

/* Widths and precisions above this are refused: bounded output. */
#define AQL_PRINTF_MAX_WIDTH 4096

/* A growing text buffer; nomem is set (and appends stop) if it cannot grow. */
struct aql_printf_text {
	char *p;
	size_t len, cap;
	int nomem;
};

/* Make room for n more bytes and a NUL; 0 if there is none. */
int aql_printf_text_reserve(struct aql_printf_text *t, size_t n);
void aql_printf_text_append(struct aql_printf_text *t, const char *s, size_t n);
void aql_printf_text_appendf(struct aql_printf_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* s (n bytes) as a C string literal's contents, at most max bytes of s. */
void aql_printf_text_quote(struct aql_printf_text *t, const char *s, size_t n, size_t max);

/* A format string, parsed once when it is added. */
struct aql_printf_fmt;

/*
 * Parse the format text (len bytes, copied). A format the service cannot
 * print is still parsed: the problem is kept and reported by every record
 * that uses it. NULL only when out of memory.
 */
struct aql_printf_fmt *aql_printf_fmt_parse(const char *text, size_t len);
void aql_printf_fmt_free(struct aql_printf_fmt *f);
/* The text as given (NUL-terminated) and its length. */
const char *aql_printf_fmt_text(const struct aql_printf_fmt *f, size_t *len);

/*
 * Append the text of the record (the message payload data, size bytes)
 * printed with format f to out; f is NULL when the record's id is
 * unknown. A record that cannot be printed appends one diagnostic line,
 * "[aql printf: ...]\n", instead, and returns 1; else 0. Reads nothing
 * outside [data, data + size).
 */
int aql_printf_fmt_record(const struct aql_printf_fmt *f, const void *data, size_t size,
			  struct aql_printf_text *out);

/*
 * The queue's printf channel (AQL_ARG_PRINTF()), made on agent with its
 * service and serve thread by the first call (channel/printf_queue.c).
 * Errors: those of making them. Thread safe.
 */
aql_status aql_printf_queue_channel(aql_queue *queue, aql_agent *agent, aql_channel **out);

#endif
