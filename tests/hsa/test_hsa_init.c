/* SPDX-License-Identifier: MIT */
/*
 * hsa_init / hsa_shut_down reference counting, NOT_INITIALIZED outside
 * them (hsa_status_string too), hsa_status_string's texts, and the last shut_down releasing what
 * the program left. argv[1]: the library under test.
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

/* A queue with a packet held back, a signal and a group, left live. */
static void left_live(void)
{
	hsa_signal_t dep, done;
	hsa_signal_group_t group;
	hsa_barrier_and_packet_t *p;
	hsa_queue_t *q = NULL;
	uint64_t id;

	CHECK_OK(hsa_init());
	CHECK_OK(hsa_queue_create(ht_cpu_agent(), 4, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, 0, 0, &q));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &dep));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &done));
	CHECK_OK(hsa_signal_group_create(1, &dep, 0, NULL, &group));
	if (!q)
		return;
	id = hsa_queue_add_write_index_relaxed(q, 1);
	p = (hsa_barrier_and_packet_t *)q->base_address + id;
	memset((char *)p + 4, 0, sizeof(*p) - 4);
	p->dep_signal[0] = dep;
	p->completion_signal = done;
	ht_publish(p, ht_header(HSA_PACKET_TYPE_BARRIER_AND), 0);
	hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)id);

	CHECK_OK(hsa_shut_down());
	CHECK_OK(hsa_init());
	CHECK_ST(hsa_queue_destroy(q), HSA_STATUS_ERROR_INVALID_QUEUE);
	CHECK_ST(hsa_signal_destroy(dep), HSA_STATUS_ERROR_INVALID_SIGNAL);
	CHECK_ST(hsa_signal_group_destroy(group), HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP);
	CHECK_OK(hsa_shut_down());
}

int main(int argc, char **argv)
{
	const char *s = NULL;

	if (argc < 2) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);

	/* Before hsa_init: NOT_INITIALIZED, hsa_status_string too (HSA 1.2, ROCr). */
	CHECK_ST(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_status_string(HSA_STATUS_ERROR_NOT_INITIALIZED, &s),
		 HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK(s == NULL, "no text before hsa_init");
	/* Once initialised, the text says why the last call failed. */
	CHECK_OK(hsa_init());
	CHECK_ST(hsa_queue_destroy(NULL), HSA_STATUS_ERROR_INVALID_QUEUE);
	CHECK_OK(hsa_status_string(HSA_STATUS_ERROR_INVALID_QUEUE, &s));
	CHECK(s && strstr(s, "HSA_STATUS_ERROR_INVALID_QUEUE: ") == s && strstr(s, "not a live queue"),
	      "%s", s ? s : "NULL");
	status_strings();
	CHECK_OK(hsa_shut_down());

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
	left_live();
	return ht_finish();
}
