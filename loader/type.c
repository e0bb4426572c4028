/* SPDX-License-Identifier: MIT */
/* Element types: the built-in scalars and a registry of user structs. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/buffer.h>

#include "util/error.h"
#include "loader/type.h"

const aql_type aql_type_i8 = { "int8_t", 1, 1, AQL_TYPE_SIGNED };
const aql_type aql_type_u8 = { "uint8_t", 1, 1, AQL_TYPE_UNSIGNED };
const aql_type aql_type_i16 = { "int16_t", 2, 2, AQL_TYPE_SIGNED };
const aql_type aql_type_u16 = { "uint16_t", 2, 2, AQL_TYPE_UNSIGNED };
const aql_type aql_type_i32 = { "int32_t", 4, 4, AQL_TYPE_SIGNED };
const aql_type aql_type_u32 = { "uint32_t", 4, 4, AQL_TYPE_UNSIGNED };
const aql_type aql_type_i64 = { "int64_t", 8, 8, AQL_TYPE_SIGNED };
const aql_type aql_type_u64 = { "uint64_t", 8, 8, AQL_TYPE_UNSIGNED };
const aql_type aql_type_f32 = { "float", 4, 4, AQL_TYPE_FLOAT };
const aql_type aql_type_f64 = { "double", 8, 8, AQL_TYPE_FLOAT };

/* C and OpenCL spellings of the scalars, as metadata .type_name has them. */
static const struct {
	const char *name;
	const aql_type *type;
} scalar_names[] = {
	{ "int8_t", &aql_type_i8 }, { "char", &aql_type_i8 },
	{ "signed char", &aql_type_i8 }, { "uint8_t", &aql_type_u8 },
	{ "unsigned char", &aql_type_u8 }, { "uchar", &aql_type_u8 },
	{ "int16_t", &aql_type_i16 }, { "short", &aql_type_i16 },
	{ "uint16_t", &aql_type_u16 }, { "unsigned short", &aql_type_u16 },
	{ "ushort", &aql_type_u16 }, { "int32_t", &aql_type_i32 },
	{ "int", &aql_type_i32 }, { "uint32_t", &aql_type_u32 },
	{ "unsigned int", &aql_type_u32 }, { "unsigned", &aql_type_u32 },
	{ "uint", &aql_type_u32 }, { "int64_t", &aql_type_i64 },
	{ "long", &aql_type_i64 }, { "long long", &aql_type_i64 },
	{ "uint64_t", &aql_type_u64 }, { "unsigned long", &aql_type_u64 },
	{ "unsigned long long", &aql_type_u64 }, { "ulong", &aql_type_u64 },
	{ "size_t", &aql_type_u64 }, { "float", &aql_type_f32 },
	{ "double", &aql_type_f64 },
};

struct registered {
	struct registered *next;
	aql_type type;
	char name[];
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct registered *registry;

static const aql_type *find_locked(const char *name)
{
	for (struct registered *r = registry; r; r = r->next)
		if (!strcmp(r->type.name, name))
			return &r->type;
	return NULL;
}

static const aql_type *find_scalar(const char *name)
{
	for (size_t i = 0; i < sizeof(scalar_names) / sizeof(scalar_names[0]); i++)
		if (!strcmp(scalar_names[i].name, name))
			return scalar_names[i].type;
	return NULL;
}

const aql_type *aql_type_find(const char *name)
{
	const aql_type *t;

	if (!name)
		return NULL;
	t = find_scalar(name);
	if (t)
		return t;
	pthread_mutex_lock(&registry_lock);
	t = find_locked(name);
	pthread_mutex_unlock(&registry_lock);
	return t;
}

aql_status aql_type_register(const char *name, size_t size, size_t align,
			     const aql_type **out)
{
	const aql_type *old;
	struct registered *r;
	size_t len;

	if (!name || !*name || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "type registration needs a name and out");
	if (!align || (align & (align - 1)) || align > 4096)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"type '%s': alignment %zu is not a power of two up to 4096",
				name, align);
	if (!size || size % align || size > UINT32_MAX)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"type '%s': size %zu is not a non-zero multiple of its alignment %zu",
				name, size, align);
	old = find_scalar(name);
	pthread_mutex_lock(&registry_lock);
	if (!old)
		old = find_locked(name);
	if (old) {
		pthread_mutex_unlock(&registry_lock);
		if (old->size != size || old->align != align)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"type '%s' is already registered with size %u and alignment %u, not %zu and %zu",
					name, old->size, old->align, size, align);
		*out = old;
		return AQL_OK;
	}
	len = strlen(name);
	r = malloc(sizeof(*r) + len + 1);
	if (!r) {
		pthread_mutex_unlock(&registry_lock);
		return aql_fail(AQL_ERR_NOMEM, "type '%s': out of memory", name);
	}
	memcpy(r->name, name, len + 1);
	r->type = (aql_type){ r->name, (uint32_t)size, (uint32_t)align, AQL_TYPE_STRUCT };
	r->next = registry;
	registry = r;
	pthread_mutex_unlock(&registry_lock);
	*out = &r->type;
	return AQL_OK;
}

/* Is word (len bytes at s) one that says where or how, not what? */
static int is_qualifier(const char *s, size_t len)
{
	static const char *const words[] = {
		"const", "volatile", "restrict", "__restrict", "__restrict__",
		"aql_global", "__global", "global", "__constant", "constant",
		"struct", "__attribute__",
	};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strlen(words[i]) == len && !memcmp(words[i], s, len))
			return 1;
	return 0;
}

size_t aql_type_base_name(const char *type_name, char *out, size_t size, int *pointer)
{
	size_t n = 0;
	const char *s = type_name;

	*pointer = 0;
	if (!size)
		return 0;
	out[0] = 0;
	if (!s)
		return 0;
	while (*s) {
		const char *w = s;

		if (*s == '*') {
			(*pointer)++;
			s++;
			continue;
		}
		if (*s == ' ' || *s == '\t') {
			s++;
			continue;
		}
		while (*s && *s != ' ' && *s != '\t' && *s != '*')
			s++;
		if (is_qualifier(w, (size_t)(s - w)))
			continue;
		if (n && n + 1 < size)
			out[n++] = ' ';
		for (; w < s && n + 1 < size; w++)
			out[n++] = *w;
		out[n] = 0;
	}
	return n;
}

const aql_type *aql_type_of_name(const char *type_name, int *pointer)
{
	char base[128], spelled[136];
	const aql_type *t;

	if (!aql_type_base_name(type_name, base, sizeof(base), pointer))
		return NULL;
	t = aql_type_find(base);
	if (t)
		return t;
	/* A struct registered as "struct particle" appears as "particle". */
	snprintf(spelled, sizeof(spelled), "struct %s", base);
	return aql_type_find(spelled);
}
