/* SPDX-License-Identifier: MIT */
/*
 * C11 keywords the public headers use, spelled so that the headers also
 * compile as C++ (C++17 and later) and as OpenCL C (device headers).
 * Internal to the headers; programs need not include it.
 */
#ifndef AQL_COMPAT_H
#define AQL_COMPAT_H

#ifdef __cplusplus
#define AQL_STATIC_ASSERT(expr, msg) static_assert(expr, msg)
#define AQL_ALIGNOF(T) alignof(T)
#else
#define AQL_STATIC_ASSERT(expr, msg) _Static_assert(expr, msg)
#define AQL_ALIGNOF(T) _Alignof(T)
#endif

/* For static inline functions a macro defines in the program's own file,
 * which clang++ would report unused. */
#define AQL_MAYBE_UNUSED __attribute__((unused))

#endif
