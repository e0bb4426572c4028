/* SPDX-License-Identifier: MIT */
/*
 * Signals as an HSA conformance program uses them, with their error
 * paths: the read-modify-write operations agree with each other from
 * several threads at once, waits meet each condition and honour their
 * timeout, a waiter asleep in a blocked wait is woken by another thread's
 * store, signal groups wait for any member, and bad handles and
 * arguments are refused. argv[1]: the library.
 */
#include <pthread.h>

#include "hsa_test.h"

#define THREADS 4
#define ADDS 20000

static hsa_signal_t shared;

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < ADDS; i++) {
		switch (i % 4) {
		case 0: hsa_signal_add_relaxed(shared, 3); break;
		case 1: hsa_signal_add_scacq_screl(shared, 3); break;
		case 2: hsa_signal_subtract_screlease(shared, -3); break;
		default: hsa_signal_add_scacquire(shared, 3); break;
		}
	}
	return NULL;
}

/* THREADS threads add at once: nothing is lost. */
static void concurrent_rmw(void)
{
	pthread_t t[THREADS];

	CHECK_OK(hsa_signal_create(0, 0, NULL, &shared));
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, adder, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(hsa_signal_load_scacquire(shared) == (hsa_signal_value_t)THREADS * ADDS * 3,
	      "value %lld", (long long)hsa_signal_load_scacquire(shared));
	CHECK_OK(hsa_signal_destroy(shared));
}

/* Each operation returns or leaves what the specification says. */
static void operations(void)
{
	hsa_signal_t s;

	CHECK_OK(hsa_signal_create(0x0f, 0, NULL, &s));
	hsa_signal_and_relaxed(s, 0x3c);
	CHECK(hsa_signal_load_relaxed(s) == 0x0c, "and: %lld", (long long)hsa_signal_load_relaxed(s));
	hsa_signal_or_screlease(s, 0x30);
	CHECK(hsa_signal_load_relaxed(s) == 0x3c, "or: %lld", (long long)hsa_signal_load_relaxed(s));
	hsa_signal_xor_scacq_screl(s, 0xff);
	CHECK(hsa_signal_load_relaxed(s) == 0xc3, "xor: %lld", (long long)hsa_signal_load_relaxed(s));
	CHECK(hsa_signal_exchange_scacq_screl(s, 7) == 0xc3, "exchange returns the old value");
	CHECK(hsa_signal_cas_scacq_screl(s, 6, 9) == 7, "a failed cas returns the value");
	CHECK(hsa_signal_load_relaxed(s) == 7, "a failed cas stores nothing");
	CHECK(hsa_signal_cas_relaxed(s, 7, 9) == 7 && hsa_signal_load_relaxed(s) == 9, "cas");
	hsa_signal_subtract_relaxed(s, 10);
	CHECK(hsa_signal_load_relaxed(s) == -1, "values are signed: %lld",
	      (long long)hsa_signal_load_relaxed(s));
	hsa_signal_silent_store_relaxed(s, 5);
	CHECK(hsa_signal_load_scacquire(s) == 5, "silent store");
	CHECK_OK(hsa_signal_destroy(s));
}

static void conditions(void)
{
	hsa_signal_t s;
	uint64_t t0;

	CHECK_OK(hsa_signal_create(5, 0, NULL, &s));
	CHECK(hsa_signal_wait_relaxed(s, HSA_SIGNAL_CONDITION_EQ, 5, 1000, HSA_WAIT_STATE_ACTIVE) == 5,
	      "EQ met");
	CHECK(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_NE, 4, 1000,
					HSA_WAIT_STATE_BLOCKED) == 5, "NE met");
	CHECK(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_LT, 6, 1000,
					HSA_WAIT_STATE_ACTIVE) == 5, "LT met");
	CHECK(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_GTE, 5, 1000,
					HSA_WAIT_STATE_ACTIVE) == 5, "GTE met");
	/* Unmet: the wait returns (the specification lets it return early, never hang). */
	t0 = ht_now_ns();
	CHECK(hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, 20000000,
					HSA_WAIT_STATE_BLOCKED) == 5, "unmet wait returns the value");
	CHECK(ht_now_ns() - t0 < ht_timeout_ns(), "the timeout bounds the wait");
	CHECK_OK(hsa_signal_destroy(s));
}

struct wake {
	hsa_signal_t s;
	hsa_signal_value_t seen;
};

static void *sleeper(void *arg)
{
	struct wake *w = arg;

	w->seen = hsa_signal_wait_scacquire(w->s, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX,
					    HSA_WAIT_STATE_BLOCKED);
	return NULL;
}

/* A blocked waiter with no timeout wakes on another thread's store. */
static void wake_up(void)
{
	struct wake w = { .seen = 1 };
	pthread_t t;

	CHECK_OK(hsa_signal_create(1, 0, NULL, &w.s));
	pthread_create(&t, NULL, sleeper, &w);
	/* Let it sleep: a store with no waiter would prove nothing. */
	hsa_signal_wait_relaxed(w.s, HSA_SIGNAL_CONDITION_EQ, 0, 20000000, HSA_WAIT_STATE_BLOCKED);
	hsa_signal_store_screlease(w.s, 0);
	pthread_join(t, NULL);
	CHECK(w.seen == 0, "the waiter saw %lld", (long long)w.seen);
	CHECK_OK(hsa_signal_destroy(w.s));
}

static void groups(void)
{
	hsa_signal_t s[3];
	hsa_signal_group_t g;
	hsa_signal_condition_t cond[3] = { HSA_SIGNAL_CONDITION_EQ, HSA_SIGNAL_CONDITION_EQ,
					   HSA_SIGNAL_CONDITION_EQ };
	hsa_signal_value_t want[3] = { 0, 0, 0 }, value = -1;
	hsa_signal_t which = { 0 };

	for (int i = 0; i < 3; i++)
		CHECK_OK(hsa_signal_create(1, 0, NULL, &s[i]));
	CHECK_OK(hsa_signal_group_create(3, s, 0, NULL, &g));
	hsa_signal_store_screlease(s[2], 0);
	CHECK_OK(hsa_signal_group_wait_any_scacquire(g, cond, want, HSA_WAIT_STATE_BLOCKED, &which,
						     &value));
	CHECK(which.handle == s[2].handle && value == 0, "group woke on member 2");
	CHECK_OK(hsa_signal_group_wait_any_relaxed(g, cond, want, HSA_WAIT_STATE_ACTIVE, &which,
						   &value));
	CHECK(which.handle == s[2].handle, "relaxed group wait");
	CHECK(hsa_amd_signal_wait_any(3, s, cond, want, UINT64_MAX, HSA_WAIT_STATE_BLOCKED,
				      &value) == 2, "wait_any returns the index");
	CHECK_ST(hsa_signal_group_create(0, s, 0, NULL, &g), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_signal_group_create(3, NULL, 0, NULL, &g), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_signal_group_destroy(g));
	CHECK_ST(hsa_signal_group_destroy(g), HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP);
	for (int i = 0; i < 3; i++)
		CHECK_OK(hsa_signal_destroy(s[i]));
}

static void error_paths(void)
{
	hsa_signal_t s = { 0 };
	hsa_agent_t cpu = ht_cpu_agent();

	CHECK_ST(hsa_signal_create(0, 0, NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_signal_create(0, 1, NULL, &s), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_signal_create(0, 1, &cpu, &s));
	CHECK_OK(hsa_signal_destroy(s));
	CHECK_ST(hsa_signal_destroy(s), HSA_STATUS_ERROR_INVALID_SIGNAL);
	CHECK_ST(hsa_signal_destroy((hsa_signal_t){ 0 }), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	/* Signals shared between processes are not provided (docs/hsa.md). */
	{
		hsa_amd_ipc_signal_t ipc;
		hsa_signal_t t, got;

		CHECK_OK(hsa_signal_create(0, 0, NULL, &t));
		CHECK_UNPROVIDED(hsa_amd_ipc_signal_create(t, &ipc), HSA_STATUS_ERROR);
		CHECK_UNPROVIDED(hsa_amd_ipc_signal_attach(&ipc, &got), HSA_STATUS_ERROR);
		CHECK_OK(hsa_signal_destroy(t));
	}
}

int main(int argc, char **argv)
{
	hsa_signal_t s;

	if (argc < 2)
		return 2;
	ht_require_aql(argv[1]);
	CHECK_ST(hsa_signal_create(0, 0, NULL, &s), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	concurrent_rmw();
	operations();
	conditions();
	wake_up();
	groups();
	error_paths();
	CHECK_OK(hsa_shut_down());
	return ht_finish();
}
