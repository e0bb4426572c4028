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
#include <string.h>
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

/* A call aql does not provide: want, and hsa_status_string() says so (docs/hsa.md). */
#define CHECK_UNPROVIDED(call, want)                                           \
	do {                                                                   \
		hsa_status_t su_ = (call);                                     \
		CHECK(su_ == (hsa_status_t)(want) &&                           \
		      strstr(ht_status_text(su_), "not provided"), "%s: 0x%x: %s", #call, \
		      (unsigned)su_, ht_status_text(su_));                     \
	} while (0)

/* hsa_status_string()'s text, or "?" when it has none. */
const char *ht_status_text(hsa_status_t st);

/*
 * Exit 1 unless hsa_init is the one in the library at path (the build's
 * libhsa-runtime64.so.1, passed by meson), so a test never passes on
 * ROCr's library by mistake.
 */
void ht_require_aql(const char *path);

/* The CPU agent (hsa_iterate_agents, HSA_AGENT_INFO_DEVICE), or exit(1). */
hsa_agent_t ht_cpu_agent(void);

/* The first global region of agent with all of the flags (hsa_region_global_flag_t), or exit(1). */
hsa_region_t ht_region(hsa_agent_t agent, uint32_t flags);

/*
 * Publish a packet written into slot: its header (and setup, in the
 * same 32-bit store) last, with release order, as HSA asks.
 */
void ht_publish(void *slot, uint16_t header, uint16_t setup);

/* A header of type with system-scope fences and the barrier bit. */
uint16_t ht_header(hsa_packet_type_t type);

/* As tests/helpers.h: a bound for waits, longer under sanitizers. */
uint64_t ht_timeout_ns(void);

/* CLOCK_MONOTONIC, ns. */
uint64_t ht_now_ns(void);

/* The whole file at path in malloc'ed memory and its *size; NULL if unreadable. */
void *ht_read_file(const char *path, size_t *size);

/* Print "N passed, M failed" and return the exit status. */
int ht_finish(void);

#endif
