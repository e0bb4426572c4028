/* SPDX-License-Identifier: MIT */
/*
 * Signals: hsa_signal_t.handle is the aql_signal itself (amd_signal_t
 * layout), so every operation is libaql's inline one and packets carry
 * the handle unchanged. HSA 1.0's acquire/release/acq_rel spellings are
 * the 1.2 scacquire/screlease/scacq_screl forms. The value operations
 * return nothing, so a zero handle is ignored (a load gives 0) rather
 * than followed; they take any other handle as it is, as ROCr's do.
 * Calls that return a status check it against the set of signals made
 * here, so a signal destroyed twice, or a queue's doorbell, is refused
 * instead of being handed back to aql's pool.
 */
#include <stdlib.h>
#include <aql/signal.h>

#include "hsa_impl.h"

static struct hsa_rt_set signals = HSA_RT_SET_INIT;

static inline aql_signal *sig(hsa_signal_t s)
{
	return aql_signal_from_handle(s.handle);
}

int hsa_rt_signal_live(hsa_signal_t signal)
{
	return hsa_rt_set_has(&signals, sig(signal));
}

static hsa_status_t bad_signal(hsa_signal_t signal)
{
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_SIGNAL, "0x%llx is not a live signal",
			   (unsigned long long)signal.handle);
}

static hsa_status_t check_consumers(uint32_t num_consumers, const hsa_agent_t *consumers)
{
	if (num_consumers && !consumers)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "%u consumers but consumers is NULL", num_consumers);
	for (uint32_t i = 0; i < num_consumers; i++)
		if (!hsa_rt_agent_from(consumers[i]))
			return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_AGENT,
					   "consumers[%u] is not an agent", i);
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_signal_create(hsa_signal_value_t initial_value, uint32_t num_consumers,
				   const hsa_agent_t *consumers, uint64_t attributes,
				   hsa_signal_t *signal)
{
	aql_signal *s;
	aql_status st;
	hsa_status_t hst;

	HSA_RT_CHECK_INIT();
	if (!signal)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "signal is NULL");
	/* Every aql signal can be waited on by the host and by any agent. */
	if (attributes & ~(uint64_t)HSA_AMD_SIGNAL_AMD_GPU_ONLY &
	    ~(uint64_t)HSA_AMD_SIGNAL_IPC)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "unknown signal attributes 0x%llx",
				   (unsigned long long)attributes);
	if (attributes & HSA_AMD_SIGNAL_IPC)
		return hsa_rt_unprovided(HSA_STATUS_ERROR_INVALID_ARGUMENT,
					 "HSA_AMD_SIGNAL_IPC (signals shared between processes)");
	hst = check_consumers(num_consumers, consumers);
	if (hst != HSA_STATUS_SUCCESS)
		return hst;
	st = aql_signal_create(initial_value, &s);
	if (st != AQL_OK)
		return hsa_rt_from_aql(st, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
	if (hsa_rt_set_add(&signals, s)) {
		aql_signal_destroy(s);
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory to track the signal");
	}
	signal->handle = aql_signal_handle(s);
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_signal_create(hsa_signal_value_t initial_value, uint32_t num_consumers,
			       const hsa_agent_t *consumers, hsa_signal_t *signal)
{
	return hsa_amd_signal_create(initial_value, num_consumers, consumers, 0, signal);
}

hsa_status_t hsa_signal_destroy(hsa_signal_t signal)
{
	aql_status st;

	HSA_RT_CHECK_INIT();
	/* HSA 1.2 hsa_signal_destroy: a 0 handle is INVALID_ARGUMENT. */
	if (!signal.handle)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "signal handle is 0");
	if (!hsa_rt_set_remove(&signals, sig(signal)))
		return bad_signal(signal);
	st = aql_signal_destroy(sig(signal));
	if (st != AQL_OK) {
		/* Still in use by a packet in flight: it stays live. */
		hsa_rt_set_add(&signals, sig(signal));
		return hsa_rt_from_aql(st, HSA_STATUS_ERROR_INVALID_SIGNAL);
	}
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_signal_value_pointer(hsa_signal_t signal,
					  volatile hsa_signal_value_t **value_ptr)
{
	HSA_RT_CHECK_INIT();
	if (!hsa_rt_signal_live(signal))
		return bad_signal(signal);
	if (!value_ptr)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "value_ptr is NULL");
	*value_ptr = &sig(signal)->value;
	return HSA_STATUS_SUCCESS;
}

#define LOAD(suffix, order)                                                    \
	hsa_signal_value_t hsa_signal_load_##suffix(hsa_signal_t signal)       \
	{                                                                      \
		return signal.handle ? aql_signal_load(sig(signal), order) : 0; \
	}
LOAD(relaxed, AQL_RELAXED)
LOAD(scacquire, AQL_ACQUIRE)
LOAD(acquire, AQL_ACQUIRE)
#undef LOAD

#define STORE(suffix, order)                                                   \
	void hsa_signal_store_##suffix(hsa_signal_t signal, hsa_signal_value_t value) \
	{                                                                      \
		if (signal.handle)                                             \
			aql_signal_store(sig(signal), value, order);           \
	}
STORE(relaxed, AQL_RELAXED)
STORE(screlease, AQL_RELEASE)
STORE(release, AQL_RELEASE)
#undef STORE

/* A silent store changes the value without waking waiters (HSA 1.2). */
#define SILENT_STORE(suffix, mo)                                               \
	void hsa_signal_silent_store_##suffix(hsa_signal_t signal, hsa_signal_value_t value) \
	{                                                                      \
		if (signal.handle)                                             \
			__atomic_store_n(&sig(signal)->value, value, mo);      \
	}
SILENT_STORE(relaxed, __ATOMIC_RELAXED)
SILENT_STORE(screlease, __ATOMIC_RELEASE)
#undef SILENT_STORE

/* Read-modify-write ops return nothing in HSA, except exchange and cas. */
#define RMW_VOID(hsa_op, aql_op, suffix, order)                                \
	void hsa_signal_##hsa_op##_##suffix(hsa_signal_t signal, hsa_signal_value_t value) \
	{                                                                      \
		if (signal.handle)                                             \
			aql_signal_##aql_op(sig(signal), value, order);        \
	}
#define RMW_ALL_ORDERS(hsa_op, aql_op)                                         \
	RMW_VOID(hsa_op, aql_op, relaxed, AQL_RELAXED)                         \
	RMW_VOID(hsa_op, aql_op, scacquire, AQL_ACQUIRE)                       \
	RMW_VOID(hsa_op, aql_op, acquire, AQL_ACQUIRE)                         \
	RMW_VOID(hsa_op, aql_op, screlease, AQL_RELEASE)                       \
	RMW_VOID(hsa_op, aql_op, release, AQL_RELEASE)                         \
	RMW_VOID(hsa_op, aql_op, scacq_screl, AQL_ACQ_REL)                     \
	RMW_VOID(hsa_op, aql_op, acq_rel, AQL_ACQ_REL)
RMW_ALL_ORDERS(add, add)
RMW_ALL_ORDERS(subtract, sub)
RMW_ALL_ORDERS(and, and)
RMW_ALL_ORDERS(or, or)
RMW_ALL_ORDERS(xor, xor)
#undef RMW_ALL_ORDERS
#undef RMW_VOID

#define EXCHANGE(suffix, order)                                                \
	hsa_signal_value_t hsa_signal_exchange_##suffix(hsa_signal_t signal,   \
							hsa_signal_value_t value) \
	{                                                                      \
		return signal.handle ? aql_signal_exchange(sig(signal), value, order) : 0; \
	}
#define CAS(suffix, order)                                                     \
	hsa_signal_value_t hsa_signal_cas_##suffix(hsa_signal_t signal,        \
						   hsa_signal_value_t expected, \
						   hsa_signal_value_t value)   \
	{                                                                      \
		return signal.handle ? aql_signal_cas(sig(signal), expected, value, order) : 0; \
	}
#define VALUE_RMW_ALL_ORDERS(M)                                                \
	M(relaxed, AQL_RELAXED)                                                \
	M(scacquire, AQL_ACQUIRE)                                              \
	M(acquire, AQL_ACQUIRE)                                                \
	M(screlease, AQL_RELEASE)                                              \
	M(release, AQL_RELEASE)                                                \
	M(scacq_screl, AQL_ACQ_REL)                                            \
	M(acq_rel, AQL_ACQ_REL)
VALUE_RMW_ALL_ORDERS(EXCHANGE)
VALUE_RMW_ALL_ORDERS(CAS)
#undef VALUE_RMW_ALL_ORDERS
#undef CAS
#undef EXCHANGE

/*
 * ROCr's BLOCKED waits spin a little before sleeping, as aql's
 * SPIN_BLOCK does; ACTIVE never sleeps.
 */
static enum aql_wait_hint aql_hint(hsa_wait_state_t hint)
{
	return hint == HSA_WAIT_STATE_ACTIVE ? AQL_WAIT_ACTIVE : AQL_WAIT_SPIN_BLOCK;
}

/*
 * The observed value; after timeout_hint ticks (ns) the current value,
 * which the caller tells from a satisfied wait by testing it, as HSA
 * asks (waits may also return early in HSA; aql's do not).
 */
static hsa_signal_value_t wait_value(hsa_signal_t signal, hsa_signal_condition_t condition,
			       hsa_signal_value_t compare_value, uint64_t timeout_hint,
			       hsa_wait_state_t wait_state_hint, enum aql_memory_order order)
{
	int64_t observed;

	if (!signal.handle)
		return 0;
	if (aql_signal_wait(sig(signal), (enum aql_signal_condition)condition, compare_value,
			    timeout_hint, aql_hint(wait_state_hint), &observed) == AQL_OK)
		return observed;
	return aql_signal_load(sig(signal), order);
}

#define WAIT(suffix, order)                                                    \
	hsa_signal_value_t hsa_signal_wait_##suffix(hsa_signal_t signal,       \
						    hsa_signal_condition_t condition, \
						    hsa_signal_value_t compare_value, \
						    uint64_t timeout_hint,     \
						    hsa_wait_state_t wait_state_hint) \
	{                                                                      \
		return wait_value(signal, condition, compare_value, timeout_hint,    \
			    wait_state_hint, order);                           \
	}
WAIT(relaxed, AQL_RELAXED)
WAIT(scacquire, AQL_ACQUIRE)
WAIT(acquire, AQL_ACQUIRE)
#undef WAIT

/* Up to 64 signals, aql_signal_wait_any()'s limit; UINT32_MAX on timeout. */
uint32_t hsa_amd_signal_wait_any(uint32_t signal_count, hsa_signal_t *signals,
				 hsa_signal_condition_t *conds, hsa_signal_value_t *values,
				 uint64_t timeout_hint, hsa_wait_state_t wait_hint,
				 hsa_signal_value_t *satisfying_value)
{
	aql_signal *s[64];
	enum aql_signal_condition c[64];
	uint32_t index;
	int64_t observed;

	if (!signal_count || signal_count > 64 || !signals || !conds || !values)
		return UINT32_MAX;
	for (uint32_t i = 0; i < signal_count; i++) {
		if (!signals[i].handle)
			return UINT32_MAX;
		s[i] = sig(signals[i]);
		c[i] = (enum aql_signal_condition)conds[i];
	}
	if (aql_signal_wait_any(signal_count, s, c, values, timeout_hint, aql_hint(wait_hint),
				&index, &observed) != AQL_OK)
		return UINT32_MAX;
	if (satisfying_value)
		*satisfying_value = observed;
	return index;
}

/* A signal group: its signals, in the order given. */
struct group {
	uint32_t count;
	aql_signal *signals[];
};

static struct hsa_rt_set groups = HSA_RT_SET_INIT;

hsa_status_t hsa_signal_group_create(uint32_t num_signals, const hsa_signal_t *signals,
				     uint32_t num_consumers, const hsa_agent_t *consumers,
				     hsa_signal_group_t *signal_group)
{
	struct group *g;
	hsa_status_t st;

	HSA_RT_CHECK_INIT();
	if (!num_signals || !signals || !signal_group)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "num_signals is 0, or signals or signal_group is NULL");
	if (num_signals > 64)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "%u signals; a group holds at most 64", num_signals);
	st = check_consumers(num_consumers, consumers);
	if (st != HSA_STATUS_SUCCESS)
		return st;
	for (uint32_t i = 0; i < num_signals; i++) {
		if (!hsa_rt_signal_live(signals[i]))
			return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_SIGNAL,
					   "signals[%u] (0x%llx) is not a live signal", i,
					   (unsigned long long)signals[i].handle);
		for (uint32_t j = 0; j < i; j++)
			if (signals[j].handle == signals[i].handle)
				return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
						   "signals[%u] repeats signals[%u]", i, j);
	}
	g = malloc(sizeof(*g) + num_signals * sizeof(g->signals[0]));
	if (!g)
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory for the group");
	g->count = num_signals;
	for (uint32_t i = 0; i < num_signals; i++)
		g->signals[i] = sig(signals[i]);
	if (hsa_rt_set_add(&groups, g)) {
		free(g);
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory for the group");
	}
	signal_group->handle = (uint64_t)(uintptr_t)g;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_signal_group_destroy(hsa_signal_group_t signal_group)
{
	struct group *g = (struct group *)(uintptr_t)signal_group.handle;

	HSA_RT_CHECK_INIT();
	if (!hsa_rt_set_remove(&groups, g))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP,
				   "0x%llx is not a live signal group",
				   (unsigned long long)signal_group.handle);
	free(g);
	return HSA_STATUS_SUCCESS;
}

void hsa_rt_release_signals(void)
{
	struct group *g;
	aql_signal *s;

	while ((g = hsa_rt_set_pop(&groups)))
		free(g);
	while ((s = hsa_rt_set_pop(&signals)))
		aql_signal_destroy(s);
}

static hsa_status_t group_wait_any(hsa_signal_group_t signal_group,
				   const hsa_signal_condition_t *conditions,
				   const hsa_signal_value_t *compare_values,
				   hsa_wait_state_t wait_state_hint, hsa_signal_t *signal,
				   hsa_signal_value_t *value)
{
	struct group *g = (struct group *)(uintptr_t)signal_group.handle;
	enum aql_signal_condition c[64];
	uint32_t index;
	int64_t observed;
	aql_status st;

	HSA_RT_CHECK_INIT();
	if (!hsa_rt_set_has(&groups, g))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP,
				   "0x%llx is not a live signal group",
				   (unsigned long long)signal_group.handle);
	if (!conditions || !compare_values || !signal || !value)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "conditions, compare_values, signal or value is NULL");
	for (uint32_t i = 0; i < g->count; i++) {
		if ((unsigned)conditions[i] > HSA_SIGNAL_CONDITION_GTE)
			return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
					   "conditions[%u] is %u", i, (unsigned)conditions[i]);
		c[i] = (enum aql_signal_condition)conditions[i];
	}
	st = aql_signal_wait_any(g->count, g->signals, c, compare_values, AQL_TIMEOUT_INFINITE,
				 aql_hint(wait_state_hint), &index, &observed);
	if (st != AQL_OK)
		return hsa_rt_from_aql(st, HSA_STATUS_ERROR_INVALID_ARGUMENT);
	signal->handle = aql_signal_handle(g->signals[index]);
	*value = observed;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_signal_group_wait_any_scacquire(hsa_signal_group_t signal_group,
						 const hsa_signal_condition_t *conditions,
						 const hsa_signal_value_t *compare_values,
						 hsa_wait_state_t wait_state_hint,
						 hsa_signal_t *signal, hsa_signal_value_t *value)
{
	return group_wait_any(signal_group, conditions, compare_values, wait_state_hint,
			      signal, value);
}

/* aql's waits always load with acquire order, which relaxed allows. */
hsa_status_t hsa_signal_group_wait_any_relaxed(hsa_signal_group_t signal_group,
					       const hsa_signal_condition_t *conditions,
					       const hsa_signal_value_t *compare_values,
					       hsa_wait_state_t wait_state_hint,
					       hsa_signal_t *signal, hsa_signal_value_t *value)
{
	return group_wait_any(signal_group, conditions, compare_values, wait_state_hint,
			      signal, value);
}
