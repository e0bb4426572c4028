/* SPDX-License-Identifier: MIT */
/*
 * A program linked against Debian's ROCr (its hsa_* references carry
 * ROCR_1), run by test_hsa_abi.py with aql's library first on the path:
 * it must load and work there. argv[1] is aql's library; the program
 * refuses to run on any other. It lists the agents, then has the CPU agent
 * run a barrier-AND packet it writes into the queue itself.
 */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "hsa_test.h"

static hsa_status_t find_cpu(hsa_agent_t agent, void *data)
{
	hsa_device_type_t type;
	char name[64];

	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_NAME, name));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type));
	printf("agent %.64s\n", name);
	if (type == HSA_DEVICE_TYPE_CPU && !((hsa_agent_t *)data)->handle)
		*(hsa_agent_t *)data = agent;
	return HSA_STATUS_SUCCESS;
}

static int read_index_passes(hsa_queue_t *q, uint64_t id)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (hsa_queue_load_read_index_scacquire(q) <= id) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t.tv_nsec -
		    (uint64_t)t0.tv_nsec > ht_timeout_ns())
			return 0;
		sched_yield();
	}
	return hsa_queue_load_read_index_scacquire(q) == id + 1;
}

static void barrier_through_queue(hsa_agent_t cpu)
{
	hsa_barrier_and_packet_t *slot;
	hsa_signal_t done;
	hsa_queue_t *q = NULL;
	uint64_t id;
	uint16_t header;

	CHECK_OK(hsa_signal_create(1, 0, NULL, &done));
	CHECK_OK(hsa_queue_create(cpu, 64, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q));
	if (!q)
		return;
	id = hsa_queue_add_write_index_relaxed(q, 1);
	slot = (hsa_barrier_and_packet_t *)q->base_address + (id & (q->size - 1));
	memset((char *)slot + 4, 0, sizeof(*slot) - 4);
	slot->completion_signal = done;
	header = HSA_PACKET_TYPE_BARRIER_AND << HSA_PACKET_HEADER_TYPE |
		 HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE |
		 HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE;
	__atomic_store_n(&slot->header, header, __ATOMIC_RELEASE);
	hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)id);
	CHECK(hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, ht_timeout_ns(),
					HSA_WAIT_STATE_BLOCKED) == 0,
	      "the barrier packet completes");
	/* The processor may move the read index after the completion signal. */
	CHECK(read_index_passes(q, id), "the read index passes the packet");
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_OK(hsa_signal_destroy(done));
}

int main(int argc, char **argv)
{
	hsa_agent_t cpu = { 0 };

	if (argc < 2) {
		fprintf(stderr, "usage: %s LIBHSA\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	CHECK_OK(hsa_init());
	CHECK_OK(hsa_iterate_agents(find_cpu, &cpu));
	CHECK(cpu.handle != 0, "a CPU agent is listed");
	if (cpu.handle)
		barrier_through_queue(cpu);
	CHECK_OK(hsa_shut_down());
	return ht_finish();
}
