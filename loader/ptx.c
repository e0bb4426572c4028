/* SPDX-License-Identifier: MIT */
/*
 * PTX entry parsing: a tokenizer over the text, the module directives and
 * the `.entry` headers; every body is skipped by brace depth. While
 * parsing, names are spans of the text; at the end everything is copied
 * into one allocation.
 */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include <aql/ptx.h>

/* Per entry: CUDA allows 32764 bytes of parameters, so this is generous. */
#define MAX_PARAMS 32768u
#define MAX_ALIGN 65536u
#define SHOW 40			/* characters of a token quoted in a message */

enum tok_kind { T_END, T_WORD, T_STRING, T_PUNCT };

struct tok {
	enum tok_kind kind;
	const char *p;
	size_t len;
	uint32_t line;
};

struct span {
	const char *p;
	size_t len;
};

struct param_tmp {
	struct span name, type;
	aql_ptx_param v;
};

struct entry_tmp {
	struct span name;
	uint32_t first_param;
	aql_ptx_entry v;
};

struct parser {
	const char *p, *end;
	uint32_t line;
	struct tok tok;
	struct entry_tmp *entries;
	uint32_t n_entries, cap_entries;
	struct param_tmp *params;
	uint32_t n_params, cap_params;
	uint32_t version[2], address_size;
	struct span target;
};

/* A token for a message: its first SHOW characters, or "end of text". */
static const char *show(const struct tok *t, char buf[SHOW + 1])
{
	size_t n;

	if (t->kind == T_END)
		return "end of text";
	n = t->len < SHOW ? t->len : SHOW;
	memcpy(buf, t->p, n);
	buf[n] = 0;
	return buf;
}

static int is_word_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%' || c == '.';
}

static int at_end(const struct parser *P)
{
	return P->p == P->end || *P->p == 0;
}

/* Skip blanks and comments. */
static aql_status skip_space(struct parser *P)
{
	while (!at_end(P)) {
		unsigned char c = (unsigned char)*P->p;

		if (c == '\n') {
			P->line++;
			P->p++;
		} else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
			P->p++;
		} else if (c == '/' && P->end - P->p > 1 && P->p[1] == '/') {
			while (!at_end(P) && *P->p != '\n')
				P->p++;
		} else if (c == '/' && P->end - P->p > 1 && P->p[1] == '*') {
			uint32_t open = P->line;

			P->p += 2;
			for (;;) {
				if (at_end(P))
					return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
							"PTX line %u: comment never closed", open);
				if (*P->p == '*' && P->end - P->p > 1 && P->p[1] == '/')
					break;
				P->line += *P->p == '\n';
				P->p++;
			}
			P->p += 2;
		} else {
			break;
		}
	}
	return AQL_OK;
}

/* The next token into P->tok. */
static aql_status next(struct parser *P)
{
	struct tok *t = &P->tok;
	aql_status st = skip_space(P);
	unsigned char c;

	if (st != AQL_OK)
		return st;
	t->line = P->line;
	t->p = P->p;
	if (at_end(P)) {
		t->kind = T_END;
		t->len = 0;
		return AQL_OK;
	}
	c = (unsigned char)*P->p;
	if (c == '"') {
		P->p++;
		while (!at_end(P) && *P->p != '"' && *P->p != '\n') {
			if (*P->p == '\\' && P->end - P->p > 1 && P->p[1] && P->p[1] != '\n')
				P->p++;
			P->p++;
		}
		if (at_end(P) || *P->p != '"')
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: string not closed on its line", t->line);
		P->p++;
		t->kind = T_STRING;
	} else if (is_word_char(c)) {
		while (!at_end(P) && is_word_char((unsigned char)*P->p))
			P->p++;
		t->kind = T_WORD;
	} else if (c < 0x20 || c >= 0x7f) {
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"PTX line %u: byte 0x%02x is not PTX text", t->line, c);
	} else {
		P->p++;
		t->kind = T_PUNCT;
	}
	t->len = (size_t)(P->p - t->p);
	return AQL_OK;
}

static int is(const struct tok *t, const char *word)
{
	size_t n = strlen(word);

	return t->kind != T_END && t->len == n && memcmp(t->p, word, n) == 0;
}

static int is_punct(const struct tok *t, char c)
{
	return t->kind == T_PUNCT && *t->p == c;
}

/* A PTX identifier: [A-Za-z][A-Za-z0-9_$]* or [_$%][A-Za-z0-9_$]+. */
static int is_identifier(const struct tok *t)
{
	unsigned char c;

	if (t->kind != T_WORD || (t->p[0] >= '0' && t->p[0] <= '9') || t->p[0] == '.')
		return 0;
	if ((t->p[0] == '_' || t->p[0] == '$' || t->p[0] == '%') && t->len < 2)
		return 0;
	for (size_t i = 1; i < t->len; i++) {
		c = (unsigned char)t->p[i];
		if (c == '.' || c == '%')
			return 0;
	}
	return 1;
}

/* A decimal or 0x-hex integer word that fits in 32 bits. */
static int number(const struct tok *t, uint32_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	unsigned base = 10;

	if (t->kind != T_WORD || t->len == 0)
		return 0;
	if (t->len > 2 && t->p[0] == '0' && (t->p[1] == 'x' || t->p[1] == 'X')) {
		base = 16;
		i = 2;
	}
	for (; i < t->len; i++) {
		char c = t->p[i];
		unsigned d;

		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			return 0;
		v = v * base + d;
		if (v > UINT32_MAX)
			return 0;
	}
	*out = (uint32_t)v;
	return 1;
}

/* Element size of a parameter type, or 0 if t is not one. */
static uint32_t type_size(const struct tok *t)
{
	static const struct { const char *name; uint32_t size; } types[] = {
		{ ".u8", 1 }, { ".s8", 1 }, { ".b8", 1 },
		{ ".u16", 2 }, { ".s16", 2 }, { ".b16", 2 }, { ".f16", 2 }, { ".bf16", 2 },
		{ ".u32", 4 }, { ".s32", 4 }, { ".b32", 4 }, { ".f32", 4 },
		{ ".f16x2", 4 }, { ".bf16x2", 4 },
		{ ".u64", 8 }, { ".s64", 8 }, { ".b64", 8 }, { ".f64", 8 },
		{ ".b128", 16 },
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (is(t, types[i].name))
			return types[i].size;
	return 0;
}

static aql_status grow(void **array, uint32_t *cap, uint32_t count, size_t elem)
{
	uint32_t n;
	void *p;

	if (count < *cap)
		return AQL_OK;
	n = *cap ? *cap * 2 : 16;
	p = realloc(*array, (size_t)n * elem);
	if (!p)
		return aql_fail(AQL_ERR_NOMEM, "PTX: no memory for %u entries or parameters", n);
	*array = p;
	*cap = n;
	return AQL_OK;
}

/* .align N: the next token must be a power of two up to MAX_ALIGN. */
static aql_status read_align(struct parser *P, const struct span *entry, uint32_t *out)
{
	char b[SHOW + 1];
	aql_status st = next(P);
	uint32_t v;

	if (st != AQL_OK)
		return st;
	if (!number(&P->tok, &v) || v == 0 || v > MAX_ALIGN || (v & (v - 1)))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"PTX line %u: entry '%.*s': .align needs a power of two up to %u, found '%s'",
				P->tok.line, (int)entry->len, entry->p, MAX_ALIGN, show(&P->tok, b));
	*out = v;
	return AQL_OK;
}

/*
 * One parameter, P->tok being its .param:
 *   .param [.align N] [.vK] .type [.ptr [.space] [.align N]] name [N]...
 * Leaves P->tok on the token after it.
 */
static aql_status parse_param(struct parser *P, const struct span *entry,
			      struct param_tmp *out)
{
	aql_ptx_param *v = &out->v;
	uint32_t elem = 0, vec = 1, align = 0, n;
	uint64_t count = 1, size;
	char b[SHOW + 1];
	aql_status st;

	memset(out, 0, sizeof(*out));
	v->line = P->tok.line;
	for (;;) {
		const struct tok *t = &P->tok;
		uint32_t sz;

		if ((st = next(P)) != AQL_OK)
			return st;
		if (is(t, ".align")) {
			if (v->is_pointer) {
				if ((st = read_align(P, entry, &n)) != AQL_OK)
					return st;
				v->pointee_align = (uint16_t)(n > UINT16_MAX ? UINT16_MAX : n);
			} else if ((st = read_align(P, entry, &align)) != AQL_OK) {
				return st;
			}
		} else if (is(t, ".ptr") && elem && !v->is_pointer) {
			v->is_pointer = 1;
		} else if (v->is_pointer && !v->space &&
			   (is(t, ".global") || is(t, ".const") || is(t, ".shared") ||
			    is(t, ".local"))) {
			v->space = is(t, ".global") ? AQL_PTX_SPACE_GLOBAL
				 : is(t, ".const") ? AQL_PTX_SPACE_CONST
				 : is(t, ".shared") ? AQL_PTX_SPACE_SHARED : AQL_PTX_SPACE_LOCAL;
		} else if (!elem && vec == 1 && (is(t, ".v2") || is(t, ".v4") || is(t, ".v8"))) {
			vec = (uint32_t)(t->p[2] - '0');
		} else if (!elem && (sz = type_size(t))) {
			elem = sz;
			out->type = (struct span){ t->p, t->len };
		} else if (t->kind == T_WORD && t->p[0] == '.') {
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: entry '%.*s': %s '%s' in a parameter",
					t->line, (int)entry->len, entry->p,
					elem ? "unexpected" : "unknown parameter type", show(t, b));
		} else {
			break;
		}
	}
	if (!elem)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"PTX line %u: entry '%.*s': parameter without a type before '%s'",
				P->tok.line, (int)entry->len, entry->p, show(&P->tok, b));
	if (!is_identifier(&P->tok))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"PTX line %u: entry '%.*s': expected a parameter name, found '%s'",
				P->tok.line, (int)entry->len, entry->p, show(&P->tok, b));
	out->name = (struct span){ P->tok.p, P->tok.len };
	if ((st = next(P)) != AQL_OK)
		return st;
	while (is_punct(&P->tok, '[')) {
		if ((st = next(P)) != AQL_OK)
			return st;
		if (!number(&P->tok, &n) || n == 0)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: entry '%.*s': parameter '%.*s' needs a positive array size, found '%s'",
					P->tok.line, (int)entry->len, entry->p, (int)out->name.len,
					out->name.p, show(&P->tok, b));
		count *= n;
		if (count > UINT32_MAX)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: entry '%.*s': parameter '%.*s' has over 2^32 elements",
					P->tok.line, (int)entry->len, entry->p, (int)out->name.len,
					out->name.p);
		if ((st = next(P)) != AQL_OK)
			return st;
		if (!is_punct(&P->tok, ']'))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: entry '%.*s': expected ']' in parameter '%.*s', found '%s'",
					P->tok.line, (int)entry->len, entry->p, (int)out->name.len,
					out->name.p, show(&P->tok, b));
		if ((st = next(P)) != AQL_OK)
			return st;
	}
	size = count * elem * vec;
	if (size > UINT32_MAX)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"PTX line %u: entry '%.*s': parameter '%.*s' is over 4 GiB",
				v->line, (int)entry->len, entry->p, (int)out->name.len, out->name.p);
	v->size = (uint32_t)size;
	v->count = (uint32_t)count;
	v->align = align ? align : elem * vec;
	return AQL_OK;
}

/* Up to three comma-separated numbers after .maxntid or .reqntid. */
static aql_status read_dims(struct parser *P, const struct span *entry, uint32_t dims[3])
{
	char b[SHOW + 1];
	aql_status st;

	for (int i = 0; i < 3; i++) {
		if ((st = next(P)) != AQL_OK)
			return st;
		if (!number(&P->tok, &dims[i]))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: entry '%.*s': expected a number, found '%s'",
					P->tok.line, (int)entry->len, entry->p, show(&P->tok, b));
		if ((st = next(P)) != AQL_OK)
			return st;
		if (!is_punct(&P->tok, ','))
			return AQL_OK;
	}
	return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			"PTX line %u: entry '%.*s': more than three dimensions",
			P->tok.line, (int)entry->len, entry->p);
}

/* Directives between the parameter list and the body. */
static aql_status parse_performance(struct parser *P, struct entry_tmp *e, uint32_t line)
{
	const struct span *name = &e->name;
	char b[SHOW + 1];
	uint32_t scratch[3];
	aql_status st;

	while (!is_punct(&P->tok, '{') && !is_punct(&P->tok, ';')) {
		const struct tok *t = &P->tok;

		if (t->kind == T_END) {
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: entry '%.*s' has no body",
					line, (int)name->len, name->p);
		} else if (is(t, ".maxntid")) {
			st = read_dims(P, name, e->v.maxntid);
		} else if (is(t, ".reqntid")) {
			st = read_dims(P, name, e->v.reqntid);
		} else if (is(t, ".reqnctapercluster") || is(t, ".minnctapersm") ||
			   is(t, ".maxnreg") || is(t, ".maxclusterrank")) {
			st = read_dims(P, name, scratch);
		} else if (is(t, ".noreturn") || is(t, ".explicitcluster")) {
			st = next(P);
		} else {
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: entry '%.*s': unexpected '%s' before its body",
					t->line, (int)name->len, name->p, show(t, b));
		}
		if (st != AQL_OK)
			return st;
	}
	return AQL_OK;
}

/* Offsets by natural (or given) alignment, in order. */
static aql_status lay_out(struct parser *P, struct entry_tmp *e)
{
	uint64_t at = 0;

	e->v.param_align = 1;
	for (uint32_t i = e->first_param; i < P->n_params; i++) {
		aql_ptx_param *v = &P->params[i].v;

		at = (at + v->align - 1) & ~(uint64_t)(v->align - 1);
		v->offset = (uint32_t)at;
		at += v->size;
		if (at > UINT32_MAX)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: entry '%.*s': parameters take over 4 GiB",
					v->line, (int)e->name.len, e->name.p);
		if (v->align > e->v.param_align)
			e->v.param_align = v->align;
	}
	e->v.param_size = (uint32_t)at;
	return AQL_OK;
}

/*
 * An entry, P->tok being its .entry. Sets *body when a '{' follows, which
 * the caller then skips.
 */
static aql_status parse_entry(struct parser *P, enum aql_ptx_linkage linkage, int *body)
{
	uint32_t line = P->tok.line;
	struct entry_tmp e = { .v.linkage = linkage, .v.line = line };
	char b[SHOW + 1];
	aql_status st;

	*body = 0;
	if ((st = next(P)) != AQL_OK)
		return st;
	if (!is_identifier(&P->tok))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"PTX line %u: .entry needs a name, found '%s'",
				P->tok.line, show(&P->tok, b));
	e.name = (struct span){ P->tok.p, P->tok.len };
	e.first_param = P->n_params;
	if ((st = next(P)) != AQL_OK)
		return st;
	if (is_punct(&P->tok, '(')) {
		if ((st = next(P)) != AQL_OK)
			return st;
		while (!is_punct(&P->tok, ')')) {
			if (!is(&P->tok, ".param"))
				return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						"PTX line %u: entry '%.*s': expected .param or ')', found '%s'",
						P->tok.line, (int)e.name.len, e.name.p, show(&P->tok, b));
			if (P->n_params - e.first_param >= MAX_PARAMS)
				return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						"PTX line %u: entry '%.*s' has over %u parameters",
						P->tok.line, (int)e.name.len, e.name.p, MAX_PARAMS);
			if ((st = grow((void **)&P->params, &P->cap_params, P->n_params,
				       sizeof(*P->params))) != AQL_OK ||
			    (st = parse_param(P, &e.name, &P->params[P->n_params])) != AQL_OK)
				return st;
			P->n_params++;
			if (is_punct(&P->tok, ',')) {
				if ((st = next(P)) != AQL_OK)
					return st;
				continue;
			}
			if (!is_punct(&P->tok, ')'))
				return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						"PTX line %u: entry '%.*s': expected ',' or ')' after parameter '%.*s', found '%s'",
						P->tok.line, (int)e.name.len, e.name.p,
						(int)P->params[P->n_params - 1].name.len,
						P->params[P->n_params - 1].name.p, show(&P->tok, b));
		}
		if ((st = next(P)) != AQL_OK)
			return st;
	}
	if ((st = parse_performance(P, &e, line)) != AQL_OK)
		return st;
	if (is_punct(&P->tok, ';')) {
		/* A declaration: the definition, if any, is elsewhere. */
		P->n_params = e.first_param;
		return AQL_OK;
	}
	*body = 1;
	if ((st = lay_out(P, &e)) != AQL_OK ||
	    (st = grow((void **)&P->entries, &P->cap_entries, P->n_entries,
		       sizeof(*P->entries))) != AQL_OK)
		return st;
	e.v.param_count = P->n_params - e.first_param;
	P->entries[P->n_entries++] = e;
	return AQL_OK;
}

/* .version M.m */
static aql_status parse_version(struct parser *P)
{
	char b[SHOW + 1];
	const char *dot;
	struct tok t;
	aql_status st = next(P);

	if (st != AQL_OK)
		return st;
	dot = P->tok.kind == T_WORD ? memchr(P->tok.p, '.', P->tok.len) : NULL;
	if (dot) {
		t = P->tok;
		t.len = (size_t)(dot - P->tok.p);
		if (number(&t, &P->version[0])) {
			t.p = dot + 1;
			t.len = P->tok.len - (size_t)(dot + 1 - P->tok.p);
			if (number(&t, &P->version[1]))
				return AQL_OK;
		}
	}
	return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			"PTX line %u: .version needs major.minor, found '%s'",
			P->tok.line, show(&P->tok, b));
}

static int cmp_entry(const void *a, const void *b)
{
	const struct entry_tmp *x = *(struct entry_tmp *const *)a;
	const struct entry_tmp *y = *(struct entry_tmp *const *)b;
	size_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
	int c = memcmp(x->name.p, y->name.p, n);

	if (c)
		return c;
	return x->name.len < y->name.len ? -1 : x->name.len > y->name.len;
}

static aql_status check_duplicates(struct parser *P)
{
	struct entry_tmp **sorted;
	aql_status st = AQL_OK;

	if (P->n_entries < 2)
		return AQL_OK;
	sorted = malloc(P->n_entries * sizeof(*sorted));
	if (!sorted)
		return aql_fail(AQL_ERR_NOMEM, "PTX: no memory to sort %u entries", P->n_entries);
	for (uint32_t i = 0; i < P->n_entries; i++)
		sorted[i] = &P->entries[i];
	qsort(sorted, P->n_entries, sizeof(*sorted), cmp_entry);
	for (uint32_t i = 1; i < P->n_entries && st == AQL_OK; i++)
		if (cmp_entry(&sorted[i - 1], &sorted[i]) == 0) {
			const struct entry_tmp *a = sorted[i - 1], *b = sorted[i];

			st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				      "PTX line %u: entry '%.*s' is already defined on line %u",
				      a->v.line > b->v.line ? a->v.line : b->v.line,
				      (int)a->name.len, a->name.p,
				      a->v.line > b->v.line ? b->v.line : a->v.line);
		}
	free(sorted);
	return st;
}

static char *copy_span(char **pool, struct span s)
{
	char *p = *pool;

	memcpy(p, s.p, s.len);
	p[s.len] = 0;
	*pool += s.len + 1;
	return p;
}

/* Everything into one allocation. */
static aql_status pack(struct parser *P, aql_ptx_module **out)
{
	size_t bytes = sizeof(aql_ptx_module) + P->n_entries * sizeof(aql_ptx_entry) +
		       P->n_params * sizeof(aql_ptx_param) + P->target.len + 1;
	aql_ptx_module *m;
	aql_ptx_entry *entries;
	aql_ptx_param *params;
	char *pool;

	for (uint32_t i = 0; i < P->n_entries; i++)
		bytes += P->entries[i].name.len + 1;
	for (uint32_t i = 0; i < P->n_params; i++)
		bytes += P->params[i].name.len + P->params[i].type.len + 2;
	m = calloc(1, bytes);
	if (!m)
		return aql_fail(AQL_ERR_NOMEM, "PTX: no memory for %zu bytes of entries", bytes);
	entries = (aql_ptx_entry *)(m + 1);
	params = (aql_ptx_param *)(entries + P->n_entries);
	pool = (char *)(params + P->n_params);
	m->version[0] = P->version[0];
	m->version[1] = P->version[1];
	m->address_size = P->address_size;
	m->target = P->target.p ? copy_span(&pool, P->target) : NULL;
	m->entry_count = P->n_entries;
	m->entries = P->n_entries ? entries : NULL;
	for (uint32_t i = 0; i < P->n_params; i++) {
		params[i] = P->params[i].v;
		params[i].name = copy_span(&pool, P->params[i].name);
		params[i].type = copy_span(&pool, P->params[i].type);
	}
	for (uint32_t i = 0; i < P->n_entries; i++) {
		entries[i] = P->entries[i].v;
		entries[i].name = copy_span(&pool, P->entries[i].name);
		entries[i].params = entries[i].param_count ? params + P->entries[i].first_param
							   : NULL;
	}
	*out = m;
	return AQL_OK;
}

static aql_status parse(struct parser *P)
{
	enum aql_ptx_linkage linkage = AQL_PTX_LINKAGE_NONE;
	uint64_t depth = 0;
	uint32_t open_line = 0;
	char b[SHOW + 1];
	aql_status st;
	int body;

	for (;;) {
		const struct tok *t = &P->tok;
		enum aql_ptx_linkage pending = AQL_PTX_LINKAGE_NONE;

		if ((st = next(P)) != AQL_OK)
			return st;
		if (t->kind == T_END)
			break;
		if (depth) {
			depth += is_punct(t, '{');
			depth -= is_punct(t, '}');
			continue;
		}
		if (is_punct(t, '{')) {
			depth = 1;
			open_line = t->line;
		} else if (is_punct(t, '}')) {
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: '}' without a matching '{'", t->line);
		} else if (is(t, ".visible")) {
			pending = AQL_PTX_LINKAGE_VISIBLE;
		} else if (is(t, ".weak")) {
			pending = AQL_PTX_LINKAGE_WEAK;
		} else if (is(t, ".entry")) {
			open_line = t->line;
			if ((st = parse_entry(P, linkage, &body)) != AQL_OK)
				return st;
			depth = (uint64_t)body;
		} else if (is(t, ".version")) {
			if ((st = parse_version(P)) != AQL_OK)
				return st;
		} else if (is(t, ".target")) {
			if ((st = next(P)) != AQL_OK)
				return st;
			if (t->kind != T_WORD || !is_identifier(t))
				return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						"PTX line %u: .target needs a name, found '%s'",
						t->line, show(t, b));
			if (!P->target.p)
				P->target = (struct span){ t->p, t->len };
		} else if (is(t, ".address_size")) {
			if ((st = next(P)) != AQL_OK)
				return st;
			if (!number(t, &P->address_size) ||
			    (P->address_size != 32 && P->address_size != 64))
				return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						"PTX line %u: .address_size must be 32 or 64, found '%s'",
						t->line, show(t, b));
		}
		linkage = pending;
	}
	if (depth)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"PTX line %u: the body opened here is never closed", open_line);
	return check_duplicates(P);
}

aql_status aql_ptx_parse(const char *text, size_t size, aql_ptx_module **out)
{
	struct parser P = { .p = text, .end = text + size, .line = 1 };
	aql_status st;

	if (!out || (!text && size))
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_ptx_parse: NULL %s",
				out ? "text" : "out");
	*out = NULL;
	if (!text)
		P.p = P.end = "";
	st = parse(&P);
	if (st == AQL_OK)
		st = pack(&P, out);
	free(P.entries);
	free(P.params);
	return st;
}

void aql_ptx_free(aql_ptx_module *module)
{
	free(module);
}

aql_status aql_ptx_entry_find(const aql_ptx_module *module, const char *name,
			      const aql_ptx_entry **out)
{
	if (!module || !name || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_ptx_entry_find: NULL %s",
				!module ? "module" : !name ? "name" : "out");
	*out = NULL;
	for (uint32_t i = 0; i < module->entry_count; i++)
		if (strcmp(module->entries[i].name, name) == 0) {
			*out = &module->entries[i];
			return AQL_OK;
		}
	return aql_fail(AQL_ERR_NOT_FOUND, "PTX module has no entry '%s' (%u entries)", name,
			module->entry_count);
}
