/* SPDX-License-Identifier: MIT */
/*
 * AMD's asynchronous signal handlers and functions: a handler runs when
 * its condition holds, with the value, and again while it returns true;
 * functions run in order; a handler still waiting at the last shut_down
 * is dropped; and the error paths. argv[1]: the library.
 */
#include "hsa_test.h"

struct counted {
	hsa_signal_t done;	/* set to 0 when the handler is through */
	int calls, keep;	/* returns true for the first keep calls */
	hsa_signal_value_t value;
};

static bool handler(hsa_signal_value_t value, void *arg)
{
	struct counted *c = arg;

	c->value = value;
	if (++c->calls <= c->keep)
		return true;
	hsa_signal_store_screlease(c->done, 0);
	return false;
}

static void append(void *arg)
{
	hsa_signal_t s = *(hsa_signal_t *)arg;

	/* Functions run in order: each multiplies by 2 and adds 1 or not. */
	hsa_signal_store_screlease(s, hsa_signal_load_scacquire(s) * 2 + 1);
}

static void append_zero(void *arg)
{
	hsa_signal_t s = *(hsa_signal_t *)arg;

	hsa_signal_store_screlease(s, hsa_signal_load_scacquire(s) * 2);
}

static int finished(hsa_signal_t s, hsa_signal_value_t v)
{
	return hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, v, ht_timeout_ns(),
					 HSA_WAIT_STATE_BLOCKED) == v;
}

int main(int argc, char **argv)
{
	struct counted once = { .keep = 0 }, thrice = { .keep = 2 }, never = { .keep = 0 };
	hsa_signal_t s, t, order;

	if (argc < 2) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	CHECK_ST(hsa_amd_async_function(append, &order), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	CHECK_OK(hsa_signal_create(5, 0, NULL, &s));
	CHECK_OK(hsa_signal_create(5, 0, NULL, &t));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &once.done));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &thrice.done));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &never.done));
	CHECK_OK(hsa_signal_create(0, 0, NULL, &order));

	/* Once: runs when s drops below 3, with the value it saw. */
	CHECK_OK(hsa_amd_signal_async_handler(s, HSA_SIGNAL_CONDITION_LT, 3, handler, &once));
	hsa_signal_store_screlease(s, 2);
	CHECK(finished(once.done, 0), "the handler ran");
	CHECK(once.calls == 1 && once.value == 2, "%d calls, value %ld", once.calls,
	      (long)once.value);

	/* Kept: returning true runs it again while the condition holds. */
	CHECK_OK(hsa_amd_signal_async_handler(t, HSA_SIGNAL_CONDITION_EQ, 7, handler, &thrice));
	hsa_signal_store_screlease(t, 7);
	CHECK(finished(thrice.done, 0), "the kept handler finished");
	CHECK(thrice.calls == 3 && thrice.value == 7, "%d calls", thrice.calls);

	/* Functions, in the order given: 1, 3, 6, 13. */
	CHECK_OK(hsa_amd_async_function(append, &order));
	CHECK_OK(hsa_amd_async_function(append, &order));
	CHECK_OK(hsa_amd_async_function(append_zero, &order));
	CHECK_OK(hsa_amd_async_function(append, &order));
	CHECK(finished(order, 13), "functions ran in order: %ld",
	      (long)hsa_signal_load_relaxed(order));

	CHECK_ST(hsa_amd_signal_async_handler(s, HSA_SIGNAL_CONDITION_EQ, 0, NULL, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_amd_signal_async_handler(s, (hsa_signal_condition_t)9, 0, handler, &never),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_amd_signal_async_handler((hsa_signal_t){ 0 }, HSA_SIGNAL_CONDITION_EQ, 0,
					      handler, &never), HSA_STATUS_ERROR_INVALID_SIGNAL);
	CHECK_ST(hsa_amd_async_function(NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);

	/* Still waiting at the last shut_down: dropped, never run. */
	CHECK_OK(hsa_amd_signal_async_handler(s, HSA_SIGNAL_CONDITION_EQ, 100, handler, &never));
	CHECK_OK(hsa_shut_down());
	CHECK(never.calls == 0, "a dropped handler ran");
	CHECK_OK(hsa_init());
	CHECK_OK(hsa_signal_create(0, 0, NULL, &order));
	CHECK_OK(hsa_amd_async_function(append, &order));
	CHECK(finished(order, 1), "the thread starts again after hsa_init");
	CHECK_OK(hsa_shut_down());
	return ht_finish();
}
