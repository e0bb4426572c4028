/* SPDX-License-Identifier: MIT */
/* Internal: element types as kernel metadata spells them. */
#ifndef AQL_INTERNAL_TYPE_H
#define AQL_INTERNAL_TYPE_H

#include <stddef.h>
#include <aql/buffer.h>

/*
 * The type a metadata .type_name names, with qualifiers, address spaces
 * and "struct" dropped ("aql_global const float *" is float), or NULL if
 * no built-in or registered type has that name. *pointer gets the number
 * of '*' in it.
 */
const aql_type *aql_type_of_name(const char *type_name, int *pointer);

/* type_name without qualifiers and '*' into out; returns its length. */
size_t aql_type_base_name(const char *type_name, char *out, size_t size, int *pointer);

#endif
