/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the HSA layer's tests. These programs see only ROCr's
 * headers and libhsa-runtime64.so.1, as an HSA application does; libaql
 * is not linked in (a second copy of it would have agents of its own).
 */
#ifndef AQL_TESTS_HSA_TEST_H
#define AQL_TESTS_HSA_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

extern unsigned ht_passed, ht_failed;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			ht_passed++;                                           \
		} else {                                                       \
			ht_failed++;                                           \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
		}                                                              \
	} while (0)

/* CHECK that a call returned want, printing hsa_status_string() otherwise. */
#define CHECK_ST(call, want)                                                   \
	do {                                                                   \
		hsa_status_t st_ = (call);                                     \
		CHECK(st_ == (hsa_status_t)(want), "0x%x: %s", (unsigned)st_, ht_status_text(st_)); \
	} while (0)

#define CHECK_OK(call) CHECK_ST(call, HSA_STATUS_SUCCESS)

/* hsa_status_string()'s text, or "?" when it has none. */
const char *ht_status_text(hsa_status_t st);

/*
 * Exit 1 unless hsa_init is the one in the library at path (the build's
 * libhsa-runtime64.so.1, passed by meson), so a test never passes on
 * ROCr's library by mistake.
 */
void ht_require_aql(const char *path);

/* As tests/helpers.h: a bound for waits, longer under sanitizers. */
uint64_t ht_timeout_ns(void);

/* Print "N passed, M failed" and return the exit status. */
int ht_finish(void);

#endif
