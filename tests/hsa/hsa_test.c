/* SPDX-License-Identifier: MIT */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hsa_test.h"

unsigned ht_passed, ht_failed;

const char *ht_status_text(hsa_status_t st)
{
	const char *s = NULL;

	return hsa_status_string(st, &s) == HSA_STATUS_SUCCESS && s ? s : "?";
}

void ht_require_aql(const char *path)
{
	char want[PATH_MAX], got[PATH_MAX];
	Dl_info info;

	if (!dladdr((void *)(uintptr_t)hsa_init, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, got) || !realpath(path, want) || strcmp(got, want)) {
		fprintf(stderr, "FAIL: hsa_init comes from %s, not aql's %s\n",
			info.dli_fname ? info.dli_fname : "?", path);
		exit(1);
	}
}

void ht_publish(void *slot, uint16_t header, uint16_t setup)
{
	__atomic_store_n((uint32_t *)slot, header | (uint32_t)setup << 16, __ATOMIC_RELEASE);
}

uint16_t ht_header(hsa_packet_type_t type)
{
	return (uint16_t)(type << HSA_PACKET_HEADER_TYPE |
			  1 << HSA_PACKET_HEADER_BARRIER |
			  HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE |
			  HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HT_SANITIZED 1
#endif
#endif

uint64_t ht_timeout_ns(void)
{
#ifdef HT_SANITIZED
	return 60000000000ull;
#else
	return 10000000000ull;
#endif
}

uint64_t ht_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ht_finish(void)
{
	printf("%u passed, %u failed\n", ht_passed, ht_failed);
	return ht_failed ? 1 : 0;
}

void *ht_read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET)) {
		buf = malloc((size_t)n);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*size = (size_t)n;
	}
	if (f)
		fclose(f);
	return buf;
}
