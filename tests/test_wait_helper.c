/* SPDX-License-Identifier: MIT */
/*
 * Wait helpers (aql_wait_helper_register): a waiting thread does the
 * helper's work itself, in every wait mode, and nothing else completes the
 * signal here, so a wait that skipped the helpers would time out.
 */
#include <pthread.h>
#include <string.h>

#include "helpers.h"

/* Completes `target` on its `after`-th call for it, says it did work on
 * each (so even a blocked wait calls it again), and counts its calls;
 * deadline: what aql_wait_helper_deadline() said in the last. */
struct counting {
	struct aql_wait_helper h;
	aql_signal *target;
	uint32_t after, calls;
	uint64_t deadline;
	pthread_t caller;
	aql_signal *nested;	/* waited on from inside the helper, if set */
	aql_status nested_st;
};

static int count_help(const struct aql_wait_helper *h, uint32_t n, aql_signal *const *signals)
{
	struct counting *c = (struct counting *)h;
	int mine = 0;

	for (uint32_t i = 0; i < n; i++)
		mine |= signals[i] == c->target;
	if (!mine || !c->target)
		return 0;
	c->caller = pthread_self();
	c->deadline = aql_wait_helper_deadline();
	if (c->nested)
		c->nested_st = aql_signal_wait(c->nested, AQL_COND_EQ, 0, 1000000,
					       AQL_WAIT_BLOCKED, NULL);
	if (++c->calls < c->after)
		return 1;
	aql_signal_store(c->target, 0, AQL_RELEASE);
	return 1;
}

static struct counting helper = { .h = { count_help } };

static void test_modes(void)
{
	static const enum aql_wait_hint hints[] = { AQL_WAIT_ACTIVE, AQL_WAIT_SPIN_BLOCK,
						    AQL_WAIT_BLOCKED };

	for (unsigned k = 0; k < 3; k++) {
		aql_signal *s = th_signal(1);

		helper.calls = 0;
		helper.after = 3;
		__atomic_store_n(&helper.target, s, __ATOMIC_RELEASE);
		CHECK_DONE(aql_signal_wait(s, AQL_COND_EQ, 0, TH_TIMEOUT_NS, hints[k], NULL));
		CHECK(helper.calls == 3, "hint %u: %u helper calls, expected 3", k, helper.calls);
		CHECK(pthread_equal(helper.caller, pthread_self()),
		      "hint %u: the helper ran on another thread", k);
		__atomic_store_n(&helper.target, NULL, __ATOMIC_RELEASE);
		aql_signal_destroy(s);
	}
}

/* A wait on several signals hands the helper all of them. */
static void test_any(void)
{
	aql_signal *a = th_signal(1), *b = th_signal(1);
	aql_signal *both[2] = { a, b };
	enum aql_signal_condition conds[2] = { AQL_COND_EQ, AQL_COND_EQ };
	int64_t zero[2] = { 0, 0 };
	uint32_t index = 9;

	helper.calls = 0;
	helper.after = 1;
	__atomic_store_n(&helper.target, b, __ATOMIC_RELEASE);
	CHECK_DONE(aql_signal_wait_any(2, both, conds, zero, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED,
				       &index, NULL));
	CHECK(index == 1, "wait_any: index %u, expected 1 (the helped signal)", index);
	__atomic_store_n(&helper.target, NULL, __ATOMIC_RELEASE);
	aql_signal_destroy(a);
	aql_signal_destroy(b);
}

/* A wait inside a helper calls no helper: it times out, and the outer
 * count shows one call per outer round only. */
static void test_nested(void)
{
	aql_signal *s = th_signal(1), *inner = th_signal(1);

	helper.calls = 0;
	helper.after = 2;
	helper.nested = inner;
	helper.nested_st = AQL_OK;
	__atomic_store_n(&helper.target, s, __ATOMIC_RELEASE);
	CHECK_DONE(aql_signal_wait(s, AQL_COND_EQ, 0, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED, NULL));
	CHECK(helper.nested_st == AQL_ERR_TIMEOUT, "the nested wait returned %s, expected a timeout",
	      aql_status_str(helper.nested_st));
	CHECK(helper.calls == 2, "%u helper calls with a nested wait, expected 2", helper.calls);
	__atomic_store_n(&helper.target, NULL, __ATOMIC_RELEASE);
	helper.nested = NULL;
	aql_signal_destroy(s);
	aql_signal_destroy(inner);
}

/* A helper reads the deadline of the wait that runs it; 0 elsewhere. */
static void test_deadline(void)
{
	aql_signal *s = th_signal(1);
	uint64_t t0, t1;

	CHECK(aql_wait_helper_deadline() == 0, "outside a helper: deadline %llu, expected 0",
	      (unsigned long long)aql_wait_helper_deadline());
	helper.calls = 0;
	helper.after = 1;
	__atomic_store_n(&helper.target, s, __ATOMIC_RELEASE);
	t0 = th_now_ns();
	CHECK_DONE(aql_signal_wait(s, AQL_COND_EQ, 0, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED, NULL));
	t1 = th_now_ns();
	CHECK(helper.deadline >= t0 + TH_TIMEOUT_NS && helper.deadline <= t1 + TH_TIMEOUT_NS,
	      "a wait of %llu ns from %llu: the helper saw deadline %llu",
	      (unsigned long long)TH_TIMEOUT_NS, (unsigned long long)t0,
	      (unsigned long long)helper.deadline);
	CHECK(aql_wait_helper_deadline() == 0, "after the wait: deadline %llu, expected 0",
	      (unsigned long long)aql_wait_helper_deadline());
	aql_signal_store(s, 1, AQL_RELAXED);
	helper.calls = 0;
	CHECK_DONE(aql_signal_wait(s, AQL_COND_EQ, 0, AQL_TIMEOUT_INFINITE, AQL_WAIT_BLOCKED,
				   NULL));
	CHECK(helper.deadline == UINT64_MAX, "an unbounded wait: the helper saw deadline %llu",
	      (unsigned long long)helper.deadline);
	__atomic_store_n(&helper.target, NULL, __ATOMIC_RELEASE);
	aql_signal_destroy(s);
}

/* A helper with nothing to do leaves the wait as it was: it times out. */
static void test_idle_timeout(void)
{
	aql_signal *s = th_signal(1);

	CHECK(aql_signal_wait(s, AQL_COND_EQ, 0, 2000000, AQL_WAIT_SPIN_BLOCK, NULL) ==
		      AQL_ERR_TIMEOUT, "a wait nobody completes did not time out");
	aql_signal_destroy(s);
}

static int noop_help(const struct aql_wait_helper *h, uint32_t n, aql_signal *const *signals)
{
	(void)h;
	(void)n;
	(void)signals;
	return 0;
}

static void test_register(void)
{
	static struct aql_wait_helper more[AQL_WAIT_HELPERS_MAX];
	struct aql_wait_helper no_fn = { NULL };
	aql_status st = AQL_OK;
	uint32_t taken = 0;

	CHECK(aql_wait_helper_register(NULL) == AQL_ERR_INVALID_ARG, "NULL helper accepted");
	CHECK(aql_wait_helper_register(&no_fn) == AQL_ERR_INVALID_ARG, "NULL help accepted");
	CHECK_OK(aql_wait_helper_register(&helper.h));	/* again: nothing happens */
	for (uint32_t i = 0; i < AQL_WAIT_HELPERS_MAX && st == AQL_OK; i++) {
		more[i].help = noop_help;
		st = aql_wait_helper_register(&more[i]);
		taken += st == AQL_OK;
	}
	CHECK(st == AQL_ERR_BUSY && taken == AQL_WAIT_HELPERS_MAX - 1,
	      "a full table: %s after %u more helpers, expected BUSY after %u",
	      aql_status_str(st), taken, AQL_WAIT_HELPERS_MAX - 1);
	CHECK(strstr(aql_error_message(), "places") != NULL, "reason: %s", aql_error_message());
	/* The first helper still runs behind the others. */
	test_modes();
}

int main(void)
{
	CHECK_OK(aql_wait_helper_register(&helper.h));
	test_modes();
	test_any();
	test_nested();
	test_deadline();
	test_idle_timeout();
	test_register();
	return th_finish();
}
