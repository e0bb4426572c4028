/* SPDX-License-Identifier: MIT */
/*
 * Formatting printf records (aql/printf.h) on the host. A format string is
 * parsed once, when it is added, into literal text and conversions; a
 * record's values are then checked against the conversions (count, and
 * each value's type against what its conversion reads) and each
 * conversion is printed by the C library's snprintf with a format of its
 * own, so the output is exactly what printf would give on the host.
 *
 * Integer conversions read an int (no length modifier, h, hh) or a
 * 64-bit integer (l, ll, j, z, t: this host is LP64). A 64-bit value for
 * an int conversion is refused, as it would be cut; a 32-bit value for a
 * 64-bit conversion is printed whole. Signedness follows the conversion,
 * as in C.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel/printf_impl.h"

_Static_assert(sizeof(long) == 8 && sizeof(long long) == 8 && sizeof(size_t) == 8 &&
	       sizeof(void *) == 8, "printf records assume an LP64 host");

/* ---- text ------------------------------------------------------------- */

int aql_printf_text_reserve(struct aql_printf_text *t, size_t n)
{
	size_t cap;
	char *p;

	if (t->nomem)
		return 0;
	if (t->len + n + 1 <= t->cap)
		return 1;
	cap = t->cap ? t->cap : 256;
	while (cap < t->len + n + 1)
		cap *= 2;
	p = realloc(t->p, cap);
	if (!p) {
		t->nomem = 1;
		return 0;
	}
	t->p = p;
	t->cap = cap;
	return 1;
}

void aql_printf_text_append(struct aql_printf_text *t, const char *s, size_t n)
{
	if (!aql_printf_text_reserve(t, n))
		return;
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = 0;
}

void aql_printf_text_appendf(struct aql_printf_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!aql_printf_text_reserve(t, 128))
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= t->cap - t->len) {
		if (!aql_printf_text_reserve(t, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
	}
	t->len += (size_t)n;
}

void aql_printf_text_quote(struct aql_printf_text *t, const char *s, size_t n, size_t max)
{
	static const char esc[] = "\a\b\f\n\r\t\v\"\\";
	static const char name[] = "abfnrtv\"\\";

	for (size_t i = 0; i < n && i < max; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *e = c ? strchr(esc, c) : NULL;
		char b[5];

		if (e) {
			b[0] = '\\';
			b[1] = name[e - esc];
			aql_printf_text_append(t, b, 2);
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(b, sizeof(b), "\\x%02x", c);
			aql_printf_text_append(t, b, 4);
		} else {
			aql_printf_text_append(t, (const char *)&c, 1);
		}
	}
	if (n > max)
		aql_printf_text_append(t, "...", 3);
}

/* ---- parsing ---------------------------------------------------------- */

enum flag {
	F_MINUS = 1 << 0,
	F_PLUS = 1 << 1,
	F_SPACE = 1 << 2,
	F_HASH = 1 << 3,
	F_ZERO = 1 << 4,
	F_QUOTE = 1 << 5,	/* ' : thousands grouping (glibc) */
};

enum length { L_NONE, L_HH, L_H, L_L, L_LL, L_J, L_Z, L_T, L_BIG_L };

/* What a conversion reads. */
enum want { W_INT, W_DOUBLE, W_PTR };

#define NO_NUMBER (-1)
#define STAR (-2)

struct conv {
	uint32_t lit_off, lit_len;	/* literal text before it, in lits */
	uint32_t spec_off, spec_len;	/* the conversion as written, in text */
	int32_t width, prec;		/* a number, NO_NUMBER or STAR */
	uint8_t flags;			/* enum flag */
	uint8_t length;			/* enum length */
	uint8_t want;			/* enum want */
	uint8_t wide;			/* an integer conversion of 64 bits */
	char conv;
};

struct aql_printf_fmt {
	char *text;		/* as given, NUL-terminated */
	size_t text_len;
	char *lits;		/* literal pieces, %% as % */
	struct conv *convs;
	uint32_t conv_count;
	uint32_t tail_off, tail_len;	/* literal text after the last conversion */
	uint32_t values;	/* values the conversions read, '*' included */
	char *problem;		/* why it cannot be printed, or NULL */
};

static const char *const length_names[] = { "", "hh", "h", "l", "ll", "j", "z", "t", "L" };

/* Record the format's first problem; spec is the conversion at fault. */
__attribute__((format(printf, 4, 5)))
static void problem(struct aql_printf_fmt *f, const char *spec, size_t spec_len,
		    const char *fmt, ...)
{
	struct aql_printf_text t = { 0 };
	va_list ap;
	int n;

	if (f->problem)
		return;
	if (!aql_printf_text_reserve(&t, 256))
		return;
	va_start(ap, fmt);
	n = vsnprintf(t.p, t.cap, fmt, ap);
	va_end(ap);
	t.len = n < 0 ? 0 : (size_t)n < t.cap ? (size_t)n : t.cap - 1;
	if (spec) {
		aql_printf_text_append(&t, " (in \"", 6);
		aql_printf_text_quote(&t, spec, spec_len, 40);
		aql_printf_text_append(&t, "\")", 2);
	}
	if (t.nomem) {
		free(t.p);
		return;
	}
	f->problem = t.p;
}

/* A decimal number at *p (advanced); -1 past limit. */
static int32_t number(const char **p, const char *end)
{
	int64_t v = 0;

	while (*p < end && **p >= '0' && **p <= '9') {
		if (v <= AQL_PRINTF_MAX_WIDTH)
			v = v * 10 + (**p - '0');
		(*p)++;
	}
	return v > AQL_PRINTF_MAX_WIDTH ? -1 : (int32_t)v;
}

/*
 * Parse one conversion at s (just after the '%'); returns where it ends.
 * Problems are recorded in f; the conversion is still returned, so that
 * parsing goes on (and the count of values stays meaningful).
 */
static const char *parse_conv(struct aql_printf_fmt *f, const char *s, const char *end,
			      struct conv *c)
{
	const char *spec = s - 1, *p = s, *q;
	const char *flag_chars = "-+ #0'";
	int32_t v;

	c->width = c->prec = NO_NUMBER;
	c->flags = 0;
	c->length = L_NONE;
	/* Positional arguments: digits then '$'. */
	for (q = p; q < end && *q >= '0' && *q <= '9'; q++)
		;
	if (q > p && q < end && *q == '$') {
		problem(f, spec, (size_t)(q + 1 - spec),
			"positional arguments (n$) are not supported");
		c->conv = 0;
		return q + 1;
	}
	for (; p < end && *p && strchr(flag_chars, *p); p++)
		c->flags |= (uint8_t)(1u << (strchr(flag_chars, *p) - flag_chars));
	if (p < end && *p == '*') {
		c->width = STAR;
		p++;
	} else if (p < end && *p >= '0' && *p <= '9') {
		q = p;
		v = number(&p, end);
		if (v < 0)
			problem(f, spec, (size_t)(p - spec), "a width of %.*s is above the limit of %d",
				(int)(p - q), q, AQL_PRINTF_MAX_WIDTH);
		c->width = v < 0 ? 0 : v;
	}
	if (p < end && *p == '.') {
		p++;
		if (p < end && *p == '*') {
			c->prec = STAR;
			p++;
		} else {
			q = p;
			v = number(&p, end);
			if (v < 0)
				problem(f, spec, (size_t)(p - spec),
					"a precision of %.*s is above the limit of %d", (int)(p - q), q,
					AQL_PRINTF_MAX_WIDTH);
			c->prec = v < 0 ? 0 : v;
		}
	}
	if (p < end) {
		switch (*p) {
		case 'h':
			c->length = p + 1 < end && p[1] == 'h' ? L_HH : L_H;
			break;
		case 'l':
			c->length = p + 1 < end && p[1] == 'l' ? L_LL : L_L;
			break;
		case 'j': c->length = L_J; break;
		case 'z': c->length = L_Z; break;
		case 't': c->length = L_T; break;
		case 'L': c->length = L_BIG_L; break;
		}
		p += c->length == L_NONE ? 0 : c->length == L_HH || c->length == L_LL ? 2 : 1;
	}
	if (p >= end) {
		problem(f, spec, (size_t)(end - spec), "the format ends inside a conversion");
		c->conv = 0;
		return end;
	}
	c->conv = *p++;
	c->spec_off = (uint32_t)(spec - f->text);
	c->spec_len = (uint32_t)(p - spec);
	c->wide = 0;
	switch (c->conv) {
	case 'd': case 'i': case 'u': case 'o': case 'x': case 'X':
		c->want = W_INT;
		if (c->length == L_BIG_L)
			problem(f, spec, c->spec_len, "length modifier 'L' does not apply to %%%c",
				c->conv);
		c->wide = c->length >= L_L && c->length <= L_T;
		break;
	case 'c':
		c->want = W_INT;
		if (c->length == L_L)
			problem(f, spec, c->spec_len, "%%lc (a wide character) is not supported");
		else if (c->length != L_NONE)
			problem(f, spec, c->spec_len, "length modifier '%s' does not apply to %%c",
				length_names[c->length]);
		break;
	case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': case 'a': case 'A':
		c->want = W_DOUBLE;
		if (c->length != L_NONE && c->length != L_L && c->length != L_BIG_L)
			problem(f, spec, c->spec_len, "length modifier '%s' does not apply to %%%c",
				length_names[c->length], c->conv);
		break;
	case 'p':
		c->want = W_PTR;
		if (c->length != L_NONE)
			problem(f, spec, c->spec_len, "length modifier '%s' does not apply to %%p",
				length_names[c->length]);
		break;
	case 's':
		problem(f, spec, c->spec_len,
			"%%s is not supported: strings cannot be sent from the device");
		c->want = W_PTR;
		break;
	case 'n':
		problem(f, spec, c->spec_len,
			"%%n is not supported: the device has nothing to store the count in");
		c->want = W_PTR;
		break;
	case '%':
		/* Only a bare %% is text; anything between is a mistake. */
		problem(f, spec, c->spec_len, "%%%% takes no flags, width, precision or length");
		c->want = W_INT;
		break;
	default:
		if ((unsigned char)c->conv >= 0x20 && (unsigned char)c->conv < 0x7f)
			problem(f, spec, c->spec_len, "unknown conversion '%c'", c->conv);
		else
			problem(f, spec, c->spec_len, "unknown conversion '\\x%02x'",
				(unsigned char)c->conv);
		c->want = W_INT;
		break;
	}
	return p;
}

struct aql_printf_fmt *aql_printf_fmt_parse(const char *text, size_t len)
{
	struct aql_printf_fmt *f = calloc(1, sizeof(*f));
	const char *p, *end;
	uint32_t nconv = 0, lits = 0;

	if (!f)
		return NULL;
	f->text = malloc(len + 1);
	f->lits = malloc(len + 1);
	/* At most one conversion per two bytes of text. */
	f->convs = calloc(len / 2 + 1, sizeof(*f->convs));
	if (!f->text || !f->lits || !f->convs) {
		aql_printf_fmt_free(f);
		return NULL;
	}
	memcpy(f->text, text, len);
	f->text[len] = 0;
	f->text_len = len;
	p = f->text;
	end = f->text + len;
	f->tail_off = 0;
	while (p < end) {
		const char *pct = memchr(p, '%', (size_t)(end - p));
		struct conv *c;

		if (!pct)
			break;
		/* Literal text up to the '%'. */
		memcpy(f->lits + lits, p, (size_t)(pct - p));
		lits += (uint32_t)(pct - p);
		if (pct + 1 < end && pct[1] == '%') {
			f->lits[lits++] = '%';
			p = pct + 2;
			continue;
		}
		c = &f->convs[nconv];
		c->lit_off = f->tail_off;
		c->lit_len = lits - f->tail_off;
		p = parse_conv(f, pct + 1, end, c);
		if (!c->conv)
			break;
		if (c->conv == '%') {
			/* Printed as text after the problem is reported. */
			f->lits[lits++] = '%';
			continue;
		}
		f->tail_off = lits;
		f->values += 1 + (c->width == STAR) + (c->prec == STAR);
		nconv++;
	}
	if (p < end) {
		memcpy(f->lits + lits, p, (size_t)(end - p));
		lits += (uint32_t)(end - p);
	}
	f->tail_len = lits - f->tail_off;
	f->conv_count = nconv;
	if (f->values > AQL_PRINTF_MAX_ARGS)
		problem(f, NULL, 0, "the format reads %u values; a record carries at most %u",
			f->values, AQL_PRINTF_MAX_ARGS);
	return f;
}

void aql_printf_fmt_free(struct aql_printf_fmt *f)
{
	if (!f)
		return;
	free(f->text);
	free(f->lits);
	free(f->convs);
	free(f->problem);
	free(f);
}

const char *aql_printf_fmt_text(const struct aql_printf_fmt *f, size_t *len)
{
	if (len)
		*len = f->text_len;
	return f->text;
}

/* ---- records ---------------------------------------------------------- */

static const char *tag_name(uint32_t tag)
{
	switch (tag) {
	case AQL_PRINTF_TAG_I32: return "a 32-bit integer";
	case AQL_PRINTF_TAG_U32: return "a 32-bit unsigned integer";
	case AQL_PRINTF_TAG_I64: return "a 64-bit integer";
	case AQL_PRINTF_TAG_U64: return "a 64-bit unsigned integer";
	case AQL_PRINTF_TAG_F64: return "a double";
	case AQL_PRINTF_TAG_PTR: return "a pointer";
	}
	return "of an unknown type";
}

static int tag_is_int(uint32_t tag)
{
	return tag >= AQL_PRINTF_TAG_I32 && tag <= AQL_PRINTF_TAG_U64;
}

static int tag_is_wide(uint32_t tag)
{
	return tag == AQL_PRINTF_TAG_I64 || tag == AQL_PRINTF_TAG_U64;
}

/* A record being printed: its header, values and where its text began. */
struct rec {
	const struct aql_printf_fmt *f;
	uint32_t id, count;
	const uint8_t *tags;
	const uint8_t *values;	/* count unaligned 64-bit values */
	struct aql_printf_text *out;
	size_t start;
};

static uint64_t value(const struct rec *r, uint32_t i)
{
	uint64_t v;

	memcpy(&v, r->values + 8 * (size_t)i, sizeof(v));
	return v;
}

/* Replace the record's text so far with a diagnostic; returns 1. */
__attribute__((format(printf, 2, 3)))
static int diagnose(const struct rec *r, const char *fmt, ...)
{
	struct aql_printf_text *t = r->out;
	va_list ap;
	char msg[400];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	t->len = r->start;
	if (t->p)
		t->p[t->len] = 0;
	aql_printf_text_appendf(t, "[aql printf: %s]\n", msg);
	return 1;
}

/* The conversion as written, for messages. */
static const char *spec_of(const struct rec *r, const struct conv *c, char *buf, size_t n)
{
	struct aql_printf_text t = { 0 };

	aql_printf_text_quote(&t, r->f->text + c->spec_off, c->spec_len, 32);
	snprintf(buf, n, "%s", t.p ? t.p : "%");
	free(t.p);
	return buf;
}

/* The int that a '*' takes from value *i; 0 and a diagnostic if it cannot. */
static int star(const struct rec *r, const struct conv *c, uint32_t *i, const char *what,
		int32_t *out)
{
	uint32_t tag = r->tags[*i];
	int64_t v = (int64_t)value(r, *i);
	char spec[64];

	if (!tag_is_int(tag) || tag_is_wide(tag))
		return !diagnose(r, "format %u: argument %u (the %s of %s) is %s; '*' wants an int",
				 r->id, *i + 1, what, spec_of(r, c, spec, sizeof(spec)),
				 tag_name(tag));
	if (tag == AQL_PRINTF_TAG_U32)
		v = (int64_t)(uint32_t)v;
	if (v > AQL_PRINTF_MAX_WIDTH || v < -AQL_PRINTF_MAX_WIDTH)
		return !diagnose(r, "format %u: argument %u (the %s of %s) is %lld, beyond the limit of %d",
				 r->id, *i + 1, what, spec_of(r, c, spec, sizeof(spec)),
				 (long long)v, AQL_PRINTF_MAX_WIDTH);
	*out = (int32_t)v;
	(*i)++;
	return 1;
}

/* Append printf(fmt, ...) of one conversion to out; 0 if snprintf failed. */
static int emitf(struct aql_printf_text *out, const char *fmt, ...)
{
	va_list ap, again;
	int n;

	if (!aql_printf_text_reserve(out, 64))
		return 0;
	va_start(ap, fmt);
	va_copy(again, ap);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	n = vsnprintf(out->p + out->len, out->cap - out->len, fmt, ap);
	if (n >= 0 && (size_t)n >= out->cap - out->len && aql_printf_text_reserve(out, (size_t)n))
		n = vsnprintf(out->p + out->len, out->cap - out->len, fmt, again);
#pragma GCC diagnostic pop
	va_end(again);
	va_end(ap);
	if (n < 0 || (size_t)n >= out->cap - out->len)
		return 0;
	out->len += (size_t)n;
	return 1;
}

/*
 * Print conversion c of value v with a width (if has_width; negative:
 * left-justified, as a '*' width does) and a precision (if prec >= 0).
 */
static int emit(const struct rec *r, const struct conv *c, uint64_t v, int has_width,
		int32_t width, int32_t prec)
{
	const char *flag_chars = "-+ #0'";
	char fmt[48], *p = fmt;
	double d;

	*p++ = '%';
	for (int b = 0; b < 6; b++)
		if ((c->flags & (1u << b)) || (b == 0 && has_width && width < 0))
			*p++ = flag_chars[b];
	if (has_width)
		p += snprintf(p, 12, "%d", width < 0 ? -width : width);
	if (prec >= 0)
		p += snprintf(p, 13, ".%d", prec);
	if (c->want == W_INT && c->conv != 'c') {
		/* 64-bit conversions all print a long long: the same digits. */
		const char *len = c->wide ? "ll" : length_names[c->length];

		memcpy(p, len, strlen(len));
		p += strlen(len);
	} else if (c->length == L_BIG_L) {
		*p++ = 'L';
	}
	*p++ = c->conv;
	*p = 0;
	switch (c->want) {
	case W_DOUBLE:
		memcpy(&d, &v, sizeof(d));
		/* %La shows a long double's own digits: give it one. */
		return c->length == L_BIG_L ? emitf(r->out, fmt, (long double)d)
					    : emitf(r->out, fmt, d);
	case W_PTR:
		return emitf(r->out, fmt, (void *)(uintptr_t)v);
	default:
		/* Senders extended 32-bit values to 64 bits as their type says. */
		if (c->wide)
			return c->conv == 'd' || c->conv == 'i' ? emitf(r->out, fmt, (long long)v)
				: emitf(r->out, fmt, (unsigned long long)v);
		return c->conv == 'd' || c->conv == 'i' || c->conv == 'c'
			? emitf(r->out, fmt, (int)(int32_t)(uint32_t)v)
			: emitf(r->out, fmt, (unsigned int)(uint32_t)v);
	}
}

static const char *want_name(const struct conv *c)
{
	switch (c->want) {
	case W_DOUBLE: return "a double";
	case W_PTR: return "a pointer";
	default: return c->conv == 'c' ? "an integer (a character)" : "an integer";
	}
}

static int fmt_record(const struct aql_printf_fmt *f, const void *data, size_t size,
		      struct aql_printf_text *out)
{
	const uint8_t *b = data;
	struct rec r = { .f = f, .out = out, .start = out->len };
	uint32_t i = 0, reserved;
	char spec[64];

	if (size < 4)
		return diagnose(&r, "a record of %zu bytes, shorter than its %u-byte header",
				size, AQL_PRINTF_HEADER_BYTES);
	memcpy(&r.id, b, 4);
	if (size < AQL_PRINTF_HEADER_BYTES)
		return diagnose(&r, "format %u: a record of %zu bytes, shorter than its %u-byte header",
				r.id, size, AQL_PRINTF_HEADER_BYTES);
	memcpy(&r.count, b + 4, 4);
	memcpy(&reserved, b + 20, 4);
	r.tags = b + 8;
	r.values = b + AQL_PRINTF_HEADER_BYTES;
	if (r.count > AQL_PRINTF_MAX_ARGS)
		return diagnose(&r, "format %u: the record says %u arguments; at most %u fit",
				r.id, r.count, AQL_PRINTF_MAX_ARGS);
	if (size != AQL_PRINTF_RECORD_BYTES(r.count))
		return diagnose(&r, "format %u: a record of %zu bytes; %u arguments take %u",
				r.id, size, r.count, AQL_PRINTF_RECORD_BYTES(r.count));
	if (reserved)
		return diagnose(&r, "format %u: the record's reserved word is 0x%x, not 0",
				r.id, reserved);
	for (uint32_t k = 0; k < r.count; k++)
		if (r.tags[k] < AQL_PRINTF_TAG_I32 || r.tags[k] > AQL_PRINTF_TAG_PTR)
			return diagnose(&r, "format %u: argument %u has the unknown type tag %u",
					r.id, k + 1, r.tags[k]);
	if (!f)
		return diagnose(&r, "unknown format %u (a record of %u arguments)", r.id, r.count);
	if (f->problem)
		return diagnose(&r, "format %u: %s", r.id, f->problem);
	if (r.count != f->values)
		return diagnose(&r, "format %u reads %u argument%s; the record has %u", r.id,
				f->values, f->values == 1 ? "" : "s", r.count);

	for (uint32_t k = 0; k < f->conv_count; k++) {
		const struct conv *c = &f->convs[k];
		int32_t width = c->width, prec = c->prec;
		int has_width = width != NO_NUMBER;
		uint32_t tag;

		aql_printf_text_append(out, f->lits + c->lit_off, c->lit_len);
		if (width == STAR && !star(&r, c, &i, "width", &width))
			return 1;
		if (prec == STAR && !star(&r, c, &i, "precision", &prec))
			return 1;
		tag = r.tags[i];
		if ((c->want == W_INT && !tag_is_int(tag)) ||
		    (c->want == W_DOUBLE && tag != AQL_PRINTF_TAG_F64) ||
		    (c->want == W_PTR && tag != AQL_PRINTF_TAG_PTR))
			return diagnose(&r, "format %u: argument %u is %s, %s wants %s", r.id, i + 1,
					tag_name(tag), spec_of(&r, c, spec, sizeof(spec)),
					want_name(c));
		if (c->want == W_INT && !c->wide && tag_is_wide(tag))
			return diagnose(&r, "format %u: argument %u is %s, %s wants an int (32 bits; use %%l for 64)",
					r.id, i + 1, tag_name(tag),
					spec_of(&r, c, spec, sizeof(spec)));
		if (!emit(&r, c, value(&r, i), has_width, width, prec))
			return diagnose(&r, "format %u: argument %u: snprintf failed for %s", r.id,
					i + 1, spec_of(&r, c, spec, sizeof(spec)));
		i++;
	}
	aql_printf_text_append(out, f->lits + f->tail_off, f->tail_len);
	return 0;
}

/* An AQL_PRINTF_INLINE record is printed with the text after its values. */
int aql_printf_fmt_record(const struct aql_printf_fmt *f, const void *data, size_t size,
			  struct aql_printf_text *out)
{
	struct rec r = { .out = out, .start = out->len, .id = AQL_PRINTF_INLINE };
	const char *text = (const char *)data + AQL_PRINTF_HEADER_BYTES;
	struct aql_printf_fmt *own;
	size_t at, len;
	uint32_t id, count;
	int bad;

	if (size < AQL_PRINTF_HEADER_BYTES)
		return fmt_record(f, data, size, out);
	memcpy(&id, data, 4);
	memcpy(&count, (const uint8_t *)data + 4, 4);
	at = AQL_PRINTF_RECORD_BYTES(count);
	if (id != AQL_PRINTF_INLINE || count > AQL_PRINTF_MAX_ARGS || size <= at)
		return fmt_record(f, data, size, out);
	text += at - AQL_PRINTF_HEADER_BYTES;
	len = strnlen(text, size - at);
	if (len + 1 != size - at)
		return diagnose(&r, len == size - at
				? "an inline format of %zu bytes without its NUL (at most %u with it)"
				: "an inline format of %zu bytes and %u more after its NUL",
				len, len == size - at ? AQL_PRINTF_MAX_FORMAT
						       : (unsigned)(size - at - len - 1));
	own = aql_printf_fmt_parse(text, len);
	if (!own) {
		out->nomem = 1;
		return 1;
	}
	bad = fmt_record(own, data, at, out);
	aql_printf_fmt_free(own);
	return bad;
}
