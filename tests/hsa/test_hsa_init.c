/* SPDX-License-Identifier: MIT */
/*
 * hsa_init / hsa_shut_down reference counting, NOT_INITIALIZED outside
 * them, and hsa_status_string's texts. argv[1]: the library under test.
 */
#include <string.h>

#include "hsa_test.h"

static void status_strings(void)
{
	const char *s = NULL;

	CHECK_OK(hsa_status_string(HSA_STATUS_ERROR_INVALID_QUEUE_CREATION, &s));
	CHECK(s && !strcmp(s, "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION: The requested queue creation is not valid."),
	      "%s", s ? s : "NULL");
	CHECK_OK(hsa_status_string((hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL, &s));
	CHECK(s && !strncmp(s, "HSA_STATUS_ERROR_INVALID_MEMORY_POOL: ", 38), "%s", s ? s : "NULL");
	CHECK_ST(hsa_status_string(HSA_STATUS_SUCCESS, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_status_string((hsa_status_t)0x7777, &s), HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

int main(int argc, char **argv)
{
	const char *s = NULL;

	if (argc < 2) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	status_strings();

	/* Before hsa_init: NOT_INITIALIZED, and the text says why. */
	CHECK_ST(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_status_string(HSA_STATUS_ERROR_NOT_INITIALIZED, &s));
	CHECK(s && strstr(s, "HSA_STATUS_ERROR_NOT_INITIALIZED: ") == s && strstr(s, "hsa_shut_down"),
	      "%s", s ? s : "NULL");

	/* Counted: two inits need two shut_downs. */
	CHECK_OK(hsa_init());
	CHECK_OK(hsa_init());
	CHECK_OK(hsa_shut_down());
	CHECK_OK(hsa_shut_down());
	CHECK_ST(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);

	/* The runtime starts again after the last shut_down. */
	for (int i = 0; i < 3; i++) {
		CHECK_OK(hsa_init());
		CHECK_OK(hsa_shut_down());
	}
	CHECK_ST(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
	return ht_finish();
}
