/* SPDX-License-Identifier: MIT */
/*
 * Internal: which sanitizer the including file is built with (GCC defines
 * __SANITIZE_*__, clang answers __has_feature), and how long a test or a
 * benchmark gives work it waits for before it calls the work lost: the
 * sanitizers slow the runtime several times over, most of all beside other
 * sanitized tests on a small machine.
 */
#ifndef AQL_INTERNAL_SANITIZER_H
#define AQL_INTERNAL_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#define AQL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AQL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define AQL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AQL_TSAN 1
#endif
#endif

#if defined(AQL_ASAN) || defined(AQL_TSAN)
#define AQL_WORK_TIMEOUT_NS 60000000000ull
#else
#define AQL_WORK_TIMEOUT_NS 10000000000ull
#endif

#endif
