/* SPDX-License-Identifier: MIT */
/*
 * The seam between the core and the agents: the default agent comes from
 * the agent table, and pools and channels make their memory reachable
 * through ops->mem_register / mem_unregister, knowing nothing of the agent;
 * an agent without queue_set_priority gets queues of NORMAL priority only.
 * A recording agent stands in for a GPU agent here.
 */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "aql/agent_impl.h"
#include "util/error.h"

#define MAX_RANGES 64

struct rec_agent {
	struct aql_agent base;
	int fail_register;		/* refuse the next mem_register */
	uint32_t count;			/* live registrations */
	uint32_t registers, unregisters;
	struct { char *addr; size_t size; } live[MAX_RANGES];
};

static struct rec_agent *rec(aql_agent *a)
{
	return (struct rec_agent *)a;
}

static void rec_get_info(aql_agent *agent, aql_agent_info *info)
{
	(void)agent;
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "recording agent");
	info->numa_node = -1;
	info->max_workgroup_size = 1;
	info->max_queue_size = 64;
}

/* Its queues are never processed: the tests only create them. */
static aql_status rec_queue_attach(aql_agent *agent, struct aql_queue_impl *queue)
{
	(void)agent;
	(void)queue;
	return AQL_OK;
}

static void rec_queue_detach(aql_agent *agent, struct aql_queue_impl *queue)
{
	(void)agent;
	(void)queue;
}

static aql_status rec_mem_alloc(aql_agent *agent, size_t size, void **out)
{
	(void)agent;
	*out = aligned_alloc(256, (size + 255) & ~(size_t)255);
	if (*out)
		memset(*out, 0, size);
	return *out ? AQL_OK : AQL_ERR_NOMEM;
}

static void rec_mem_free(aql_agent *agent, void *ptr)
{
	(void)agent;
	free(ptr);
}

static aql_status rec_copy(aql_agent *agent, void *dst, const void *src, size_t size)
{
	(void)agent;
	memmove(dst, src, size);
	return AQL_OK;
}

static aql_status rec_register(aql_agent *agent, void *ptr, size_t size)
{
	struct rec_agent *a = rec(agent);

	a->registers++;
	if (a->fail_register) {
		a->fail_register = 0;
		return aql_fail(AQL_ERR_NOMEM, "recording agent: registration refused");
	}
	if (a->count == MAX_RANGES)
		return aql_fail(AQL_ERR_NOMEM, "recording agent: %u registrations", MAX_RANGES);
	a->live[a->count].addr = ptr;
	a->live[a->count++].size = size;
	return AQL_OK;
}

/* An unregister must name a registration exactly, as a GPU driver's does. */
static void rec_unregister(aql_agent *agent, void *ptr, size_t size)
{
	struct rec_agent *a = rec(agent);

	a->unregisters++;
	for (uint32_t i = 0; i < a->count; i++)
		if (a->live[i].addr == ptr && a->live[i].size == size) {
			a->live[i] = a->live[--a->count];
			return;
		}
	CHECK(0, "unregister of %p + %zu, which was never registered", ptr, size);
}

static const struct aql_agent_ops rec_ops = {
	.get_info = rec_get_info,
	.queue_attach = rec_queue_attach,
	.queue_detach = rec_queue_detach,
	.mem_alloc = rec_mem_alloc,
	.mem_free = rec_mem_free,
	.copy = rec_copy,
	.mem_register = rec_register,
	.mem_unregister = rec_unregister,
};

/* Is all of [p, p + n) inside live registrations? */
static int covered(const struct rec_agent *a, const void *p, size_t n)
{
	const char *at = p, *end = at + n;
	uint32_t i;

	while (at < end) {
		for (i = 0; i < a->count; i++)
			if (at >= a->live[i].addr && at < a->live[i].addr + a->live[i].size)
				break;
		if (i == a->count)
			return 0;
		at = a->live[i].addr + a->live[i].size;
	}
	return 1;
}

static void test_default_from_table(void)
{
	aql_agent_info info;

	CHECK(aql_agent_drivers[0] != NULL, "the agent table is empty");
	CHECK_OK(aql_agent_get_info(th_agent(), &info));
	CHECK(info.kind == AQL_AGENT_CPU, "default agent kind %d", (int)info.kind);
	CHECK(strcmp(aql_agent_drivers[0]->name, "CPU") == 0, "first driver %s",
	      aql_agent_drivers[0]->name);
}

static void test_pool_registers_commits(struct rec_agent *a)
{
	aql_agent *agents[] = { th_agent(), &a->base };
	aql_mem_pool_config c = {
		.kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
		.agents = agents, .agent_count = 2, .max_size = 64 << 20,
	};
	aql_mem_pool *pool;
	void *small, *large;

	CHECK_OK(aql_mem_pool_create(&c, &pool));
	CHECK(a->registers == 0, "%u registrations before any allocation", a->registers);
	CHECK_OK(aql_mem_alloc(pool, 100, 64, &small));
	CHECK_OK(aql_mem_alloc(pool, 3 << 20, 64, &large));
	CHECK(covered(a, small, 100), "a small block is not registered");
	CHECK(covered(a, large, 3 << 20), "a 3 MiB block is not registered");
	CHECK(a->registers >= 2, "%u registrations for two commits", a->registers);
	aql_mem_free(small);
	aql_mem_free(large);
	CHECK_OK(aql_mem_pool_destroy(pool));
	CHECK(a->count == 0, "%u registrations outlive their pool", a->count);
	CHECK(a->unregisters == a->registers, "%u unregistered of %u", a->unregisters,
	      a->registers);
}

static void test_pool_register_failure(struct rec_agent *a)
{
	aql_agent *agents[] = { &a->base };
	aql_mem_pool_config c = {
		.kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
		.agents = agents, .agent_count = 1, .max_size = 16 << 20,
	};
	aql_mem_pool *pool;
	void *p = NULL;
	aql_status st;

	CHECK_OK(aql_mem_pool_create(&c, &pool));
	a->fail_register = 1;
	st = aql_mem_alloc(pool, 4096, 64, &p);
	CHECK(st == AQL_ERR_NOMEM, "allocation over a failed registration: %s",
	      aql_status_str(st));
	CHECK(strstr(aql_error_message(), "agents[0]") != NULL, "message: %s",
	      aql_error_message());
	CHECK(a->count == 0, "a failed registration left %u behind", a->count);
	/* The next allocation registers the same range again and succeeds. */
	CHECK_OK(aql_mem_alloc(pool, 4096, 64, &p));
	CHECK(covered(a, p, 4096), "the retried commit is not registered");
	aql_mem_free(p);
	CHECK_OK(aql_mem_pool_destroy(pool));
	CHECK(a->count == 0, "%u registrations outlive their pool", a->count);
}

static void test_channel_registers_ring(struct rec_agent *a)
{
	aql_channel_config c = { .slot_count = 16, .reply_slots = 2 };
	aql_channel *ch;
	uint32_t before = a->count;

	CHECK_OK(aql_channel_create(&a->base, &c, &ch));
	CHECK(a->count == before + 1, "channel made %u registrations", a->count - before);
	CHECK(covered(a, (void *)(uintptr_t)((const aql_channel_dev *)(uintptr_t)
					      aql_channel_device_address(ch))->ring,
		      AQL_CHANNEL_RING_HDR_BYTES + 16 * 64),
	      "the ring is not registered");
	CHECK_OK(aql_channel_destroy(ch));
	CHECK(a->count == before, "the channel's registration outlives it");

	a->fail_register = 1;
	CHECK(aql_channel_create(&a->base, &c, &ch) != AQL_OK,
	      "a channel whose ring cannot be registered was created");
	CHECK(a->count == before, "a failed channel left a registration");
}

static void test_no_priorities(struct rec_agent *a)
{
	aql_queue_config c = { .size = 8, .flags = AQL_QUEUE_LOW_PRIORITY };
	aql_queue *q = NULL;

	CHECK(aql_queue_create(&a->base, &c, &q) == AQL_ERR_UNSUPPORTED && !q &&
	      strstr(aql_error_message(), "recording agent"), "LOW queue: %s",
	      aql_error_message());
	c.flags = 0;
	CHECK_OK(aql_queue_create(&a->base, &c, &q));
	if (!q)
		return;
	CHECK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_HIGH) == AQL_ERR_UNSUPPORTED &&
	      strstr(aql_error_message(), "high priority"), "HIGH: %s", aql_error_message());
	CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_NORMAL));
	CHECK_OK(aql_queue_destroy(q));
}

int main(void)
{
	struct rec_agent a = { .base.ops = &rec_ops };

	test_default_from_table();
	test_pool_registers_commits(&a);
	test_pool_register_failure(&a);
	test_channel_registers_ring(&a);
	test_no_priorities(&a);
	return th_finish();
}
