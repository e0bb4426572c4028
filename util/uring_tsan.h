/* SPDX-License-Identifier: MIT */
/*
 * Internal: RING_BEGIN()/RING_END() around accesses to an io_uring's
 * shared rings. ThreadSanitizer does not see the kernel's side of them,
 * so a ring mapped where another thread's ring was unmapped looks like a
 * race with that thread; these accesses are left unchecked under TSan and
 * cost nothing otherwise.
 */
#ifndef AQL_INTERNAL_URING_TSAN_H
#define AQL_INTERNAL_URING_TSAN_H

#include "util/sanitizer.h"

#ifdef AQL_TSAN
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define RING_BEGIN() (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), \
		      AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define RING_END() (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), \
		    AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define RING_BEGIN() ((void)0)
#define RING_END() ((void)0)
#endif

#endif
