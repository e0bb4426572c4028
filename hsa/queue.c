/* SPDX-License-Identifier: MIT */
/*
 * Queues: the hsa_queue_t a program gets is the first member of the aql
 * queue's amd_queue_t, so the ring, the doorbell signal and both indices
 * are aql's own, and a program that writes packets and rings the
 * doorbell itself drives aql's packet processor directly. The index
 * functions act on amd_queue_t's write_dispatch_id and read_dispatch_id.
 *
 * hsa_amd_queue_priority_t is aql's enum aql_queue_priority, value for
 * value, so a priority goes to aql_queue_set_priority() as it is.
 *
 * Profiling is the ENABLE_PROFILING bit of amd_queue_t's queue_properties,
 * which the CPU agent and an AMD GPU's CP read per packet; queues start
 * without it, since stamping costs two clock reads a packet. The stamps
 * are the agent's ticks (a GPU's timestamp counter): aql converts them
 * (aql_signal_dispatch_time), as ROCr's GpuAgent::TranslateTime does.
 *
 * A soft queue (hsa_soft_queue_create) is the same control block and ring
 * placed in the program's region, with the program's doorbell signal and
 * no aql queue behind it: the program's own thread processes its packets
 * (agent dispatch, as HSA intends), so the index functions serve it as
 * they are.
 */
#include <stdlib.h>
#include <string.h>
#include <aql/queue.h>

#include "hsa_impl.h"

_Static_assert(HSA_AMD_QUEUE_PRIORITY_LOW == (int)AQL_QUEUE_PRIORITY_LOW &&
	       HSA_AMD_QUEUE_PRIORITY_NORMAL == (int)AQL_QUEUE_PRIORITY_NORMAL &&
	       HSA_AMD_QUEUE_PRIORITY_HIGH == (int)AQL_QUEUE_PRIORITY_HIGH,
	       "hsa_amd_queue_priority_t is enum aql_queue_priority");

struct rt_queue {
	aql_amd_queue *amd;
	aql_queue *queue;		/* NULL for a soft queue */
	struct hsa_rt_agent *agent;	/* NULL for a soft queue */
	void (*callback)(hsa_status_t status, hsa_queue_t *source, void *data);
	void *data;
};

static struct hsa_rt_set queues = HSA_RT_SET_INIT;

static inline aql_amd_queue *amd(const hsa_queue_t *queue)
{
	return (aql_amd_queue *)(uintptr_t)queue;
}

static int is_queue_of(const void *item, const void *key)
{
	return (const void *)((const struct rt_queue *)item)->amd == key;
}

/* The live queue whose control block is queue, or NULL. */
static struct rt_queue *find_queue(const hsa_queue_t *queue)
{
	return hsa_rt_set_find(&queues, is_queue_of, queue);
}

/*
 * The HSA status of a queue stopped on its packet at the read index
 * (which a stopped processor does not pass): a kernel dispatch with no
 * kernel object is HSA_STATUS_ERROR_INVALID_CODE_OBJECT, as HSA programs
 * expect, any other malformed packet INVALID_PACKET_FORMAT.
 */
static hsa_status_t stop_status(aql_queue *queue, aql_status status)
{
	const aql_packet *p = aql_queue_slot(queue, __atomic_load_n(&queue->amd->read_dispatch_id,
								    __ATOMIC_ACQUIRE));
	uint16_t header = __atomic_load_n(&p->header, __ATOMIC_ACQUIRE);

	if (status != AQL_ERR_QUEUE_ERROR)
		return HSA_STATUS_ERROR;
	if (aql_header_type(header) == AQL_PACKET_KERNEL_DISPATCH && !p->dispatch.kernel_object)
		return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
	return HSA_STATUS_ERROR_INVALID_PACKET_FORMAT;
}

/* aql's report of a stopped queue, as HSA's error callback (on aql's thread). */
static void on_error(aql_queue *queue, aql_status status, const char *message, void *user)
{
	struct rt_queue *q = user;
	hsa_status_t st = stop_status(queue, status);

	hsa_rt_fail(st, "%s", message);
	q->callback(st, (hsa_queue_t *)(void *)queue->amd, q->data);
}

/* Count a new queue of a against HSA_RT_QUEUES_MAX: 1, or 0 when it has them all. */
static int take_slot(struct hsa_rt_agent *a)
{
	uint32_t n = __atomic_load_n(&a->queues, __ATOMIC_RELAXED);

	do {
		if (n >= HSA_RT_QUEUES_MAX)
			return 0;
	} while (!__atomic_compare_exchange_n(&a->queues, &n, n + 1, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return 1;
}

static void give_slot(struct hsa_rt_agent *a)
{
	__atomic_fetch_sub(&a->queues, 1, __ATOMIC_RELAXED);
}

hsa_status_t hsa_queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
			      void (*callback)(hsa_status_t status, hsa_queue_t *source,
					       void *data),
			      void *data, uint32_t private_segment_size,
			      uint32_t group_segment_size, hsa_queue_t **queue)
{
	struct hsa_rt_agent *a;
	struct rt_queue *q;
	aql_queue_config config = { 0 };
	aql_status st;

	HSA_RT_CHECK_INIT();
	a = hsa_rt_agent_from(agent);
	if (!a)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_AGENT, "0x%llx is not an agent",
				   (unsigned long long)agent.handle);
	if (!queue)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "queue is NULL");
	if (!size || (size & (size - 1)) || size > a->info.max_queue_size)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "queue size %u: must be a power of two up to %u for %s",
				   size, a->info.max_queue_size, a->info.name);
	if (size < hsa_rt_queue_min_size(a))
		size = hsa_rt_queue_min_size(a);
	if (type != HSA_QUEUE_TYPE_MULTI && type != HSA_QUEUE_TYPE_SINGLE)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "queue type %u: aql has MULTI and SINGLE queues", type);
	/* UINT32_MAX asks for the default; anything else must fit the agent. */
	if (private_segment_size != UINT32_MAX &&
	    private_segment_size > a->info.max_private_segment_size)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "private_segment_size %u is over %s's %u bytes",
				   private_segment_size, a->info.name,
				   a->info.max_private_segment_size);
	if (group_segment_size != UINT32_MAX &&
	    group_segment_size > a->info.max_group_segment_size)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "group_segment_size %u is over %s's %u bytes",
				   group_segment_size, a->info.name, a->info.max_group_segment_size);
	if (!take_slot(a))
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES,
				   "%s has its %u queues (HSA_AGENT_INFO_QUEUES_MAX): destroy one first",
				   a->info.name, HSA_RT_QUEUES_MAX);
	q = calloc(1, sizeof(*q));
	if (!q) {
		give_slot(a);
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory for the queue");
	}
	q->agent = a;
	q->callback = callback;
	q->data = data;
	config.size = size;
	config.type = type == HSA_QUEUE_TYPE_SINGLE ? AQL_QUEUE_SINGLE : AQL_QUEUE_MULTI;
	if (callback) {
		config.error_callback = on_error;
		config.error_user = q;
	}
	st = aql_queue_create(a->agent, &config, &q->queue);
	if (st != AQL_OK) {
		free(q);
		give_slot(a);
		return hsa_rt_from_aql(st, HSA_STATUS_ERROR_INVALID_QUEUE_CREATION);
	}
	q->amd = q->queue->amd;
	if (hsa_rt_set_add(&queues, q)) {
		aql_queue_destroy(q->queue);
		free(q);
		give_slot(a);
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory for the queue");
	}
	*queue = (hsa_queue_t *)(void *)q->amd;
	return HSA_STATUS_SUCCESS;
}

/* Free what a queue holds once its processor (a soft queue has none) is stopped. */
static void free_queue(struct rt_queue *q)
{
	if (!q->queue)
		hsa_rt_free(q->amd);
	else
		give_slot(q->agent);
	free(q);
}

hsa_status_t hsa_queue_destroy(hsa_queue_t *queue)
{
	struct rt_queue *q;
	aql_status st;

	HSA_RT_CHECK_INIT();
	q = queue ? find_queue(queue) : NULL;
	/* Removing it claims it: of two threads destroying one queue, one
	 * frees it and the other is told it is not live. */
	if (!q || !hsa_rt_set_remove(&queues, q))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_QUEUE, "%p is not a live queue",
				   (void *)queue);
	/* It fails only from the queue's own error callback: the queue is
	 * live again, for the program to destroy after the callback. */
	if (q->queue && (st = aql_queue_destroy(q->queue)) != AQL_OK) {
		hsa_rt_set_add(&queues, q);
		return hsa_rt_fail(hsa_rt_from_aql(st, HSA_STATUS_ERROR), "%s",
				   aql_error_message());
	}
	free_queue(q);
	return HSA_STATUS_SUCCESS;
}

void hsa_rt_release_queues(void)
{
	struct rt_queue *q;

	while ((q = hsa_rt_set_pop(&queues))) {
		if (q->queue)
			aql_queue_destroy(q->queue);
		free_queue(q);
	}
}

/*
 * The processor stops for good; the queue's memory stays until
 * hsa_queue_destroy (aql_queue_inactivate). A soft queue's processor is
 * the program's own: nothing to stop.
 */
hsa_status_t hsa_queue_inactivate(hsa_queue_t *queue)
{
	struct rt_queue *q;
	aql_status st;

	HSA_RT_CHECK_INIT();
	q = queue ? find_queue(queue) : NULL;
	if (!q)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_QUEUE, "%p is not a live queue",
				   (void *)queue);
	st = q->queue ? aql_queue_inactivate(q->queue) : AQL_OK;
	return st == AQL_OK ? HSA_STATUS_SUCCESS : hsa_rt_from_aql(st, HSA_STATUS_ERROR);
}

/*
 * Soft queue ids count down from the top of the range, so they never meet
 * the ids libaql gives its queues (counting up from 0).
 */
static uint64_t next_soft_id = UINT64_MAX;

hsa_status_t hsa_soft_queue_create(hsa_region_t region, uint32_t size, hsa_queue_type32_t type,
				   uint32_t features, hsa_signal_t doorbell_signal,
				   hsa_queue_t **queue)
{
	const uint32_t known = HSA_QUEUE_FEATURE_KERNEL_DISPATCH | HSA_QUEUE_FEATURE_AGENT_DISPATCH;
	struct hsa_rt_region *r;
	struct rt_queue *q;
	aql_amd_queue *amd;
	aql_packet *ring;
	hsa_status_t st;
	void *mem;

	HSA_RT_CHECK_INIT();
	r = hsa_rt_region_from(region.handle);
	if (!r)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_REGION, "0x%llx is not a region",
				   (unsigned long long)region.handle);
	/* The program's processor reads the ring, so the host must reach it. */
	if (r->kind != HSA_RT_REGION_SYSTEM_FINE)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "a soft queue lives in a fine-grained host region");
	if (!queue)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "queue is NULL");
	if (!size || (size & (size - 1)) ||
	    (uint64_t)size * sizeof(aql_packet) > r->alloc_max - sizeof(aql_amd_queue))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "queue size %u: must be a power of two whose ring fits the region",
				   size);
	if (type != HSA_QUEUE_TYPE_MULTI && type != HSA_QUEUE_TYPE_SINGLE)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "queue type %u: MULTI or SINGLE", type);
	if (!features || (features & ~known))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "features 0x%x: kernel and/or agent dispatch", features);
	if (!doorbell_signal.handle)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "doorbell_signal is 0");
	if (!hsa_rt_signal_live(doorbell_signal))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_SIGNAL, "0x%llx is not a live signal",
				   (unsigned long long)doorbell_signal.handle);
	q = calloc(1, sizeof(*q));
	if (!q)
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory for the queue");
	/* The control block, then the ring, in one block of the region. */
	st = hsa_rt_allocate(r, sizeof(*amd) + (size_t)size * sizeof(aql_packet), &mem);
	if (st != HSA_STATUS_SUCCESS) {
		free(q);
		return st;
	}
	amd = mem;
	ring = (aql_packet *)(amd + 1);
	memset(amd, 0, sizeof(*amd));
	for (uint32_t i = 0; i < size; i++)
		ring[i].header = AQL_PACKET_INVALID;
	amd->hsa.type = type;
	amd->hsa.features = features;
	amd->hsa.base_address = (uint64_t)(uintptr_t)ring;
	amd->hsa.doorbell_signal = doorbell_signal.handle;
	amd->hsa.size = size;
	amd->hsa.id = __atomic_fetch_sub(&next_soft_id, 1, __ATOMIC_RELAXED);
	q->amd = amd;
	if (hsa_rt_set_add(&queues, q)) {
		free_queue(q);
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory for the queue");
	}
	*queue = (hsa_queue_t *)(void *)amd;
	return HSA_STATUS_SUCCESS;
}

/* Packets the processor has not started yet are stamped (or not). */
hsa_status_t hsa_amd_profiling_set_profiler_enabled(hsa_queue_t *queue, int enable)
{
	struct rt_queue *q;

	HSA_RT_CHECK_INIT();
	q = queue ? find_queue(queue) : NULL;
	if (!q)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_QUEUE, "%p is not a live queue",
				   (void *)queue);
	if (!q->queue)
		return hsa_rt_fail(HSA_STATUS_ERROR,
				   "%p is a soft queue: the program processes its packets",
				   (void *)queue);
	if (enable && q->agent->info.kind == AQL_AGENT_NVIDIA)
		return hsa_rt_unprovided(HSA_STATUS_ERROR,
					 "profiling on an NVIDIA agent's queue (the CPU agent and AMD "
					 "GPUs stamp)");
	if (enable)
		__atomic_fetch_or(&amd(queue)->queue_properties,
				  (uint32_t)AQL_AMD_QUEUE_PROPERTY_ENABLE_PROFILING, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(&amd(queue)->queue_properties,
				   ~(uint32_t)AQL_AMD_QUEUE_PROPERTY_ENABLE_PROFILING,
				   __ATOMIC_RELAXED);
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_queue_set_priority(hsa_queue_t *queue, hsa_amd_queue_priority_t priority)
{
	struct rt_queue *q;
	aql_status st;

	HSA_RT_CHECK_INIT();
	if (!queue)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "queue is NULL");
	q = find_queue(queue);
	if (!q)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_QUEUE, "%p is not a live queue",
				   (void *)queue);
	if ((unsigned)priority > HSA_AMD_QUEUE_PRIORITY_HIGH)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "priority %d is not "
				   "HSA_AMD_QUEUE_PRIORITY_LOW, _NORMAL or _HIGH", (int)priority);
	if (!q->queue)
		return hsa_rt_fail(HSA_STATUS_ERROR,
				   "%p is a soft queue: the program processes its packets",
				   (void *)queue);
	st = aql_queue_set_priority(q->queue, (enum aql_queue_priority)priority);
	return st == AQL_OK ? HSA_STATUS_SUCCESS : hsa_rt_from_aql(st, HSA_STATUS_ERROR);
}

/*
 * The index functions are on every packet's path, so they take the queue
 * as given (as ROCr's do); a NULL queue reads as 0 and is not written.
 */
#define LOAD(which, field, suffix, mo)                                         \
	uint64_t hsa_queue_load_##which##_index_##suffix(const hsa_queue_t *queue) \
	{                                                                      \
		return queue ? __atomic_load_n(&amd(queue)->field, mo) : 0;    \
	}
LOAD(write, write_dispatch_id, relaxed, __ATOMIC_RELAXED)
LOAD(write, write_dispatch_id, scacquire, __ATOMIC_ACQUIRE)
LOAD(write, write_dispatch_id, acquire, __ATOMIC_ACQUIRE)
#undef LOAD

/*
 * A program that finds the ring full polls the read index for room, and
 * beside busy threads that poll takes the CPU from the packet processor
 * it waits for. So a load that finds the ring full waits as aql's own
 * producers do (aql_queue_load_read_index(): polls briefly, then sleeps
 * until the processor frees room, or runs packets itself while the
 * processor is parked) for at most READ_WAIT_NS, and answers the read
 * index then: a later value, as a poll would have seen. 2 ms, since no
 * producer runs packets in a wait with under 1 ms left. The queue is
 * looked up only then; a soft queue's reader is the program.
 */
#define READ_WAIT_NS 2000000u

static uint64_t load_read_index(const hsa_queue_t *queue, int mo)
{
	uint64_t read;
	struct rt_queue *q;

	if (!queue)
		return 0;
	read = __atomic_load_n(&amd(queue)->read_dispatch_id, mo);
	if (__atomic_load_n(&amd(queue)->write_dispatch_id, __ATOMIC_RELAXED) - read <
	    queue->size)
		return read;
	q = find_queue(queue);
	return q && q->queue ? aql_queue_load_read_index(q->queue, READ_WAIT_NS) : read;
}

uint64_t hsa_queue_load_read_index_relaxed(const hsa_queue_t *queue)
{
	return load_read_index(queue, __ATOMIC_RELAXED);
}

uint64_t hsa_queue_load_read_index_scacquire(const hsa_queue_t *queue)
{
	return load_read_index(queue, __ATOMIC_ACQUIRE);
}

uint64_t hsa_queue_load_read_index_acquire(const hsa_queue_t *queue)
{
	return load_read_index(queue, __ATOMIC_ACQUIRE);
}

#define STORE(which, field, suffix, mo)                                        \
	void hsa_queue_store_##which##_index_##suffix(const hsa_queue_t *queue, uint64_t value) \
	{                                                                      \
		if (queue)                                                     \
			__atomic_store_n(&amd(queue)->field, value, mo);       \
	}
STORE(read, read_dispatch_id, relaxed, __ATOMIC_RELAXED)
STORE(read, read_dispatch_id, screlease, __ATOMIC_RELEASE)
STORE(read, read_dispatch_id, release, __ATOMIC_RELEASE)
STORE(write, write_dispatch_id, relaxed, __ATOMIC_RELAXED)
STORE(write, write_dispatch_id, screlease, __ATOMIC_RELEASE)
STORE(write, write_dispatch_id, release, __ATOMIC_RELEASE)
#undef STORE

#define ADD(suffix, mo)                                                        \
	uint64_t hsa_queue_add_write_index_##suffix(const hsa_queue_t *queue, uint64_t value) \
	{                                                                      \
		return queue ? __atomic_fetch_add(&amd(queue)->write_dispatch_id, value, mo) : 0; \
	}
#define CAS(suffix, mo, fail_mo)                                               \
	uint64_t hsa_queue_cas_write_index_##suffix(const hsa_queue_t *queue,  \
						    uint64_t expected, uint64_t value) \
	{                                                                      \
		if (queue)                                                     \
			__atomic_compare_exchange_n(&amd(queue)->write_dispatch_id, \
						    &expected, value, 0, mo, fail_mo); \
		return queue ? expected : 0;                                   \
	}
#define ALL_ORDERS(M)                                                          \
	M(relaxed, __ATOMIC_RELAXED, __ATOMIC_RELAXED)                         \
	M(scacquire, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)                       \
	M(acquire, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)                         \
	M(screlease, __ATOMIC_RELEASE, __ATOMIC_RELAXED)                       \
	M(release, __ATOMIC_RELEASE, __ATOMIC_RELAXED)                         \
	M(scacq_screl, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)                     \
	M(acq_rel, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
#define ADD3(suffix, mo, fail_mo) ADD(suffix, mo)
ALL_ORDERS(ADD3)
ALL_ORDERS(CAS)
#undef ADD3
#undef ALL_ORDERS
#undef CAS
#undef ADD

hsa_status_t hsa_amd_profiling_get_dispatch_time(hsa_agent_t agent, hsa_signal_t signal,
						 hsa_amd_profiling_dispatch_time_t *time)
{
	const aql_signal *s = aql_signal_from_handle(signal.handle);
	struct hsa_rt_agent *a;
	aql_status st;

	HSA_RT_CHECK_INIT();
	a = hsa_rt_agent_from(agent);
	if (!a)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_AGENT, "0x%llx is not an agent",
				   (unsigned long long)agent.handle);
	if (!hsa_rt_signal_live(signal))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_SIGNAL, "0x%llx is not a live signal",
				   (unsigned long long)signal.handle);
	if (!time)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "time is NULL");
	st = aql_signal_dispatch_time(a->agent, s, &time->start, &time->end);
	return st == AQL_OK ? HSA_STATUS_SUCCESS : hsa_rt_from_aql(st, HSA_STATUS_ERROR);
}

/* The system domain is aql's clock (HSA_RT_TIMESTAMP_FREQUENCY); the
 * agent converts its own ticks. */
hsa_status_t hsa_amd_profiling_convert_tick_to_system_domain(hsa_agent_t agent,
							     uint64_t agent_tick,
							     uint64_t *system_tick)
{
	struct hsa_rt_agent *a;
	aql_status st;

	HSA_RT_CHECK_INIT();
	a = hsa_rt_agent_from(agent);
	if (!a)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_AGENT, "0x%llx is not an agent",
				   (unsigned long long)agent.handle);
	if (!system_tick)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "system_tick is NULL");
	st = aql_agent_ticks_to_ns(a->agent, agent_tick, system_tick);
	return st == AQL_OK ? HSA_STATUS_SUCCESS : hsa_rt_from_aql(st, HSA_STATUS_ERROR);
}
