/* SPDX-License-Identifier: MIT */
/*
 * Signals through the HSA API: every value operation in every memory
 * order (the HSA 1.0 spellings included), silent stores, waits that time
 * out and waits another thread satisfies, signal groups,
 * hsa_amd_signal_wait_any, and the error paths. argv[1]: the library.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "hsa_test.h"

typedef void (*op_fn)(hsa_signal_t, hsa_signal_value_t);
typedef hsa_signal_value_t (*xchg_fn)(hsa_signal_t, hsa_signal_value_t);
typedef hsa_signal_value_t (*cas_fn)(hsa_signal_t, hsa_signal_value_t, hsa_signal_value_t);

#define ORDERS(op)                                                             \
	{ hsa_signal_##op##_relaxed, hsa_signal_##op##_scacquire,              \
	  hsa_signal_##op##_screlease, hsa_signal_##op##_scacq_screl,          \
	  hsa_signal_##op##_acquire, hsa_signal_##op##_release,                \
	  hsa_signal_##op##_acq_rel }

static void value_ops(hsa_signal_t s)
{
	static const op_fn add[] = ORDERS(add), sub[] = ORDERS(subtract),
		and_[] = ORDERS(and), or_[] = ORDERS(or), xor_[] = ORDERS(xor);
	static const xchg_fn xchg[] = ORDERS(exchange);
	static const cas_fn cas[] = ORDERS(cas);
	static const op_fn store[] = { hsa_signal_store_relaxed, hsa_signal_store_screlease,
				       hsa_signal_store_release, hsa_signal_silent_store_relaxed,
				       hsa_signal_silent_store_screlease };
	static hsa_signal_value_t (*const load[])(hsa_signal_t) = {
		hsa_signal_load_relaxed, hsa_signal_load_scacquire, hsa_signal_load_acquire };

	for (unsigned i = 0; i < sizeof(store) / sizeof(store[0]); i++) {
		store[i](s, 100 + i);
		for (unsigned j = 0; j < 3; j++)
			CHECK(load[j](s) == 100 + i, "store %u load %u: %ld", i, j, (long)load[j](s));
	}
	for (unsigned i = 0; i < 7; i++) {
		hsa_signal_store_relaxed(s, 0x0f0);
		add[i](s, 0x10);
		CHECK(hsa_signal_load_relaxed(s) == 0x100, "add %u", i);
		sub[i](s, 0x1);
		CHECK(hsa_signal_load_relaxed(s) == 0xff, "subtract %u", i);
		and_[i](s, 0x3c);
		CHECK(hsa_signal_load_relaxed(s) == 0x3c, "and %u", i);
		or_[i](s, 0x300);
		CHECK(hsa_signal_load_relaxed(s) == 0x33c, "or %u", i);
		xor_[i](s, 0x00f);
		CHECK(hsa_signal_load_relaxed(s) == 0x333, "xor %u", i);
		CHECK(xchg[i](s, -5) == 0x333, "exchange %u returns the old value", i);
		CHECK(hsa_signal_load_relaxed(s) == -5, "exchange %u", i);
		CHECK(cas[i](s, 7, 9) == -5, "failed cas %u returns the value", i);
		CHECK(hsa_signal_load_relaxed(s) == -5, "failed cas %u changes nothing", i);
		CHECK(cas[i](s, -5, 9) == -5, "cas %u returns the old value", i);
		CHECK(hsa_signal_load_relaxed(s) == 9, "cas %u", i);
	}
}

struct setter {
	hsa_signal_t signal;
	hsa_signal_value_t value;
};

static void *set_later(void *arg)
{
	struct setter *s = arg;
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	hsa_signal_store_screlease(s->signal, s->value);
	return NULL;
}

static void waits(hsa_signal_t s)
{
	static hsa_signal_value_t (*const wait[])(hsa_signal_t, hsa_signal_condition_t,
						  hsa_signal_value_t, uint64_t, hsa_wait_state_t) = {
		hsa_signal_wait_relaxed, hsa_signal_wait_scacquire, hsa_signal_wait_acquire };
	static const hsa_wait_state_t hints[] = { HSA_WAIT_STATE_BLOCKED, HSA_WAIT_STATE_ACTIVE };
	uint64_t t0;
	hsa_signal_value_t v;

	for (unsigned i = 0; i < 3; i++) {
		for (unsigned h = 0; h < 2; h++) {
			/* Met at once: every condition. */
			hsa_signal_store_relaxed(s, 5);
			CHECK(wait[i](s, HSA_SIGNAL_CONDITION_EQ, 5, UINT64_MAX, hints[h]) == 5, "EQ");
			CHECK(wait[i](s, HSA_SIGNAL_CONDITION_NE, 4, UINT64_MAX, hints[h]) == 5, "NE");
			CHECK(wait[i](s, HSA_SIGNAL_CONDITION_LT, 6, UINT64_MAX, hints[h]) == 5, "LT");
			CHECK(wait[i](s, HSA_SIGNAL_CONDITION_GTE, 5, UINT64_MAX, hints[h]) == 5, "GTE");

			/* Not met: back after the timeout with the current value. */
			t0 = ht_now_ns();
			v = wait[i](s, HSA_SIGNAL_CONDITION_EQ, 0, 2000000, hints[h]);
			CHECK(v == 5, "timed-out wait %u/%u gives the value: %ld", i, h, (long)v);
			CHECK(ht_now_ns() - t0 >= 2000000, "timed-out wait %u/%u returned early", i, h);

			/* Met by another thread while waiting. */
			pthread_t t;
			struct setter set = { s, 0 };

			pthread_create(&t, NULL, set_later, &set);
			v = wait[i](s, HSA_SIGNAL_CONDITION_EQ, 0, ht_timeout_ns(), hints[h]);
			CHECK(v == 0, "wait %u/%u woken by a store: %ld", i, h, (long)v);
			pthread_join(t, NULL);
		}
	}
	/* A 0 handle is ignored, not followed. */
	CHECK(wait[1]((hsa_signal_t){ 0 }, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX,
		      HSA_WAIT_STATE_ACTIVE) == 0, "wait on handle 0");
}

static void groups(hsa_signal_t a, hsa_signal_t b)
{
	hsa_signal_t both[2] = { a, b }, dup[2] = { a, a }, got;
	hsa_signal_condition_t conds[2] = { HSA_SIGNAL_CONDITION_EQ, HSA_SIGNAL_CONDITION_LT };
	hsa_signal_value_t cmp[2] = { 1, 0 }, value;
	hsa_signal_group_t g;

	CHECK_OK(hsa_signal_group_create(2, both, 0, NULL, &g));
	hsa_signal_store_relaxed(a, 0);
	hsa_signal_store_relaxed(b, -3);
	CHECK_OK(hsa_signal_group_wait_any_scacquire(g, conds, cmp, HSA_WAIT_STATE_BLOCKED, &got, &value));
	CHECK(got.handle == b.handle && value == -3, "group: b is the one met (%ld)", (long)value);
	hsa_signal_store_relaxed(a, 1);
	hsa_signal_store_relaxed(b, 0);
	CHECK_OK(hsa_signal_group_wait_any_relaxed(g, conds, cmp, HSA_WAIT_STATE_ACTIVE, &got, &value));
	CHECK(got.handle == a.handle && value == 1, "group: a is the one met");
	CHECK_ST(hsa_signal_group_wait_any_relaxed(g, NULL, cmp, HSA_WAIT_STATE_ACTIVE, &got, &value),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_signal_group_destroy(g));
	CHECK_ST(hsa_signal_group_destroy(g), HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP);
	CHECK_ST(hsa_signal_group_wait_any_relaxed(g, conds, cmp, HSA_WAIT_STATE_ACTIVE, &got, &value),
		 HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP);
	CHECK_ST(hsa_signal_group_create(2, dup, 0, NULL, &g), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_signal_group_create(0, both, 0, NULL, &g), HSA_STATUS_ERROR_INVALID_ARGUMENT);

	/* AMD's wait on any: the index, or UINT32_MAX after the timeout. */
	hsa_signal_store_relaxed(a, 4);
	hsa_signal_store_relaxed(b, 4);
	CHECK(hsa_amd_signal_wait_any(2, both, conds, cmp, 1000000, HSA_WAIT_STATE_BLOCKED,
				      &value) == UINT32_MAX, "wait_any times out");
	hsa_signal_store_relaxed(b, -1);
	CHECK(hsa_amd_signal_wait_any(2, both, conds, cmp, UINT64_MAX, HSA_WAIT_STATE_BLOCKED,
				      &value) == 1 && value == -1, "wait_any finds b");
}

static void errors(hsa_signal_t s)
{
	hsa_agent_t bogus = { 0x1234 };
	hsa_signal_group_t g;
	hsa_signal_t t, u, v;
	volatile hsa_signal_value_t *p = NULL;
	const char *text = NULL;

	CHECK_ST(hsa_signal_create(0, 1, NULL, &t), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_signal_create(0, 1, &bogus, &t), HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_signal_create(0, 0, NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	/* HSA 1.2: a 0 handle is INVALID_ARGUMENT, any other dead one INVALID_SIGNAL. */
	CHECK_ST(hsa_signal_destroy((hsa_signal_t){ 0 }), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_signal_destroy((hsa_signal_t){ 64 }), HSA_STATUS_ERROR_INVALID_SIGNAL);
	CHECK_OK(hsa_status_string(HSA_STATUS_ERROR_INVALID_SIGNAL, &text));
	CHECK(text && strstr(text, "not a live signal"), "the text says why: %s",
	      text ? text : "NULL");
	/* Destroyed twice: refused, and aql's pool hands the signal out once. */
	CHECK_OK(hsa_signal_create(3, 0, NULL, &t));
	CHECK_OK(hsa_signal_destroy(t));
	CHECK_ST(hsa_signal_destroy(t), HSA_STATUS_ERROR_INVALID_SIGNAL);
	CHECK_ST(hsa_amd_signal_value_pointer(t, &p), HSA_STATUS_ERROR_INVALID_SIGNAL);
	CHECK_ST(hsa_signal_group_create(1, &t, 0, NULL, &g), HSA_STATUS_ERROR_INVALID_SIGNAL);
	CHECK_OK(hsa_signal_create(0, 0, NULL, &u));
	CHECK_OK(hsa_signal_create(0, 0, NULL, &v));
	CHECK(u.handle != v.handle, "two live signals are two");
	CHECK_OK(hsa_signal_destroy(u));
	CHECK_OK(hsa_signal_destroy(v));
	CHECK_ST(hsa_amd_signal_create(0, 0, NULL, HSA_AMD_SIGNAL_IPC, &t),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_amd_signal_value_pointer(s, &p));
	hsa_signal_store_relaxed(s, 77);
	CHECK(p && *p == 77, "the value pointer reads the value");
	/* Value operations ignore a 0 handle. */
	hsa_signal_store_relaxed((hsa_signal_t){ 0 }, 1);
	hsa_signal_add_relaxed((hsa_signal_t){ 0 }, 1);
	CHECK(hsa_signal_load_scacquire((hsa_signal_t){ 0 }) == 0, "load of handle 0");
}

int main(int argc, char **argv)
{
	hsa_signal_t s, b;

	if (argc < 2) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	CHECK_ST(hsa_signal_create(1, 0, NULL, &s), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	CHECK_OK(hsa_signal_create(1, 0, NULL, &s));
	CHECK(hsa_signal_load_relaxed(s) == 1, "initial value");
	CHECK_OK(hsa_amd_signal_create(0, 0, NULL, HSA_AMD_SIGNAL_AMD_GPU_ONLY, &b));
	value_ops(s);
	waits(s);
	groups(s, b);
	errors(s);
	CHECK_OK(hsa_signal_destroy(s));
	CHECK_OK(hsa_signal_destroy(b));
	CHECK_OK(hsa_shut_down());
	CHECK_ST(hsa_signal_destroy(s), HSA_STATUS_ERROR_NOT_INITIALIZED);
	return ht_finish();
}
