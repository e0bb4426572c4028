/* SPDX-License-Identifier: MIT */
/*
 * Queues of the AMD agent (aql/kfd/queue.c) on the KFD emulation
 * (AQL_KFD_SYS): one GPU, its model and KFD version from the meson run,
 * packets run by the emulated command processor (tests/kfd_emu/cp.c).
 * Not run on hardware.
 *
 * - a queue's buffers as KFD sees them: the ring and the amd_queue_t page
 *   USERPTR BOs of exactly their sizes, one VRAM EOP page, the CWSR area
 *   of the size the plan's formula gives for the model (the emulation's
 *   CREATE_QUEUE refuses other sizes), a doorbell of the GPU's slice;
 *   the amd_queue_t fields; the scratch address set once per GPU; all of
 *   it gone after the destroy;
 * - barriers and completion signals, in order, on a ring that wraps; the
 *   doorbell holds the last packet id; concurrent producers (TSan);
 * - a packet the CP refuses stops the queue with a message, its signal -1;
 * - destroy with packets in flight: no hang, the signals -1;
 * - a GPU memory fault puts the GPU's queues into their error state; from
 *   KFD 1.13 so does a queue exception written to the CWSR header's
 *   err_payload_addr, whose headers (one per XCC) are checked;
 * - scratch: a dispatch with private_segment_size is refused by the CP
 *   (code 1) until the queue has scratch; the watcher grows it (a VRAM BO
 *   in the scratch window, the amd_queue_t's absolute address, descriptor
 *   and sizes) and
 *   the CP retries; a bigger need grows it again; the destroy frees it;
 * - with --hsaco (saxpy's build for the model, AQL_KFD_EMU_KERNELS naming
 *   its host build):
 *   saxpy loaded on the agent and dispatched with a hand-built packet
 *   (the typed launch needs copies, not built yet), its data and kernarg
 *   block in a host pool open to the agent: the CP runs it, y is right,
 *   also after scratch growth;
 * - priorities: CREATE_QUEUE carries the creation's (KFD 7 normal, 11
 *   high), aql_queue_set_priority() an UPDATE_QUEUE with the queue's own
 *   ring, its size and percentage 100 (0 low), none for the priority the
 *   queue has; packets run after each;
 * - --expect refused (AQL_KFD_EMU_FAIL=create_queue): a clear error and
 *   nothing left behind; --expect update_refused (update_queue): the
 *   priority change fails naming UPDATE_QUEUE, the queue keeps its
 *   priority and runs on; --expect stop (queue_stop:N): a bounded wait
 *   reports the stopped queue, and the destroy gives its packets -1;
 *   --expect scratch_enomem (a small AQL_KFD_EMU_VRAM): the growth fails,
 *   down to one wave per CU, and the queue's error says how much that is.
 *
 * With AQL_HIL=1 (tests/hil/run-amd, the kernel's /dev/kfd) only what
 * hardware can show runs: barriers, producers, saxpy where --hsaco is for
 * the GPU (with its scratch growth), destroy in flight; the BO and CWSR checks, the refused
 * vendor packet, the scratch refusal and the injected faults need the
 * emulation's hooks and its CP codes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"
#include "kfd_emu/kfdemu.h"

#define MS 1000000ull

static kfdemu_stats_fn stats_fn;
static kfdemu_bo_at_fn bo_at_fn;
static kfdemu_vm_fault_fn vm_fault_fn;
static kfdemu_queue_exception_fn exception_fn;
static kfdemu_queue_at_fn queue_at_fn;
static struct kfd_agent *amd;
static int hil;
/* Queues of the emulation that the agent keeps for itself (its own queue). */
static uint32_t own_queues;

static void load_emu(void)
{
	*(void **)&stats_fn = th_kfdemu_sym("kfdemu_stats");
	*(void **)&bo_at_fn = th_kfdemu_sym("kfdemu_bo_at");
	*(void **)&vm_fault_fn = th_kfdemu_sym("kfdemu_vm_fault");
	*(void **)&exception_fn = th_kfdemu_sym("kfdemu_queue_exception");
	*(void **)&queue_at_fn = th_kfdemu_sym("kfdemu_queue_at");
}

static struct kfdemu_stats stats(void)
{
	struct kfdemu_stats s;

	CHECK(stats_fn(&s) == 0, "kfdemu_stats");
	return s;
}

/* The CWSR BO's bytes (plan §5, computed by hand from the models). */
static uint64_t cwsr_total(void)
{
	if (!strcmp(amd->node->gfx, "gfx90a"))
		return 0x402F000;
	if (!strcmp(amd->node->gfx, "gfx942"))
		return 0xB167000;
	th_stop("a model this test has no CWSR numbers for");
}

static aql_queue *queue_with(uint32_t size, aql_queue_error_fn error_callback)
{
	aql_queue_config c = { .size = size, .type = AQL_QUEUE_MULTI,
			       .error_callback = error_callback };
	aql_queue *q = NULL;

	CHECK_OK(aql_queue_create(&amd->base, &c, &q));
	if (!q)
		th_stop("no queue");
	return q;
}

static aql_queue *queue(uint32_t size)
{
	return queue_with(size, NULL);
}

static aql_status inactivated;

/* On the agent's thread that stops the queue (its watcher, or the fault
 * watcher): inactivate it there; the destroy later detaches it. */
static void inactivate_in_callback(aql_queue *q, aql_status status, const char *message,
				   void *user)
{
	(void)status;
	(void)message;
	(void)user;
	__atomic_store_n(&inactivated, aql_queue_inactivate(q), __ATOMIC_RELEASE);
}

/* Wait for inactivate_in_callback to have run; its result. */
static aql_status wait_inactivated(void)
{
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	while (__atomic_load_n(&inactivated, __ATOMIC_ACQUIRE) == AQL_ERR_TIMEOUT &&
	       th_now_ns() < end)
		th_sleep_ms(1);
	return __atomic_load_n(&inactivated, __ATOMIC_ACQUIRE);
}

static aql_packet barrier(aql_signal *dep, aql_signal *done)
{
	aql_packet p = { 0 };

	p.barrier.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					     AQL_FENCE_SYSTEM);
	p.barrier.dep_signal[0] = dep ? aql_signal_handle(dep) : 0;
	p.barrier.completion_signal = done ? aql_signal_handle(done) : 0;
	return p;
}

static uint64_t doorbell_value(aql_queue *q)
{
	return __atomic_load_n((uint64_t *)(uintptr_t)q->doorbell->hardware_doorbell_ptr,
			       __ATOMIC_ACQUIRE);
}

static void check_bo(const void *addr, uint32_t domain, uint64_t size, const char *what)
{
	struct kfdemu_bo b;

	CHECK(bo_at_fn((uint64_t)(uintptr_t)addr, &b) == 0, "%s: no BO at %p", what, addr);
	CHECK(b.va == (uint64_t)(uintptr_t)addr && b.size == size && b.domain == domain,
	      "%s: BO at 0x%llx of %llu bytes, domain %u (want %p, %llu, %u)", what,
	      (unsigned long long)b.va, (unsigned long long)b.size, b.domain, addr,
	      (unsigned long long)size, domain);
	CHECK(b.mapped != 0 && b.gpu_id == amd->node->gpu_id, "%s: not mapped to the GPU", what);
}

static struct kfd_queue_info info_of(aql_queue *q)
{
	struct kfd_queue_info qi;

	kfd_queue_get_info((const struct aql_queue_impl *)q, &qi);
	return qi;
}

/* XCC i's CWSR header (kfd_context_save_area_header), by offset. */
static uint32_t header_u32(const struct kfd_queue_info *qi, uint32_t xcc, size_t off)
{
	uint32_t v;

	memcpy(&v, (const char *)qi->cwsr + xcc * qi->cwsr_per_xcc + off, 4);
	return v;
}

static uint64_t header_u64(const struct kfd_queue_info *qi, uint32_t xcc, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)qi->cwsr + xcc * qi->cwsr_per_xcc + off, 8);
	return v;
}

/* The EOP buffer, the CWSR area and its per-XCC headers. */
static void check_cwsr(aql_queue *q)
{
	struct kfd_queue_info qi = info_of(q);
	uint32_t xccs = amd->node->xccs ? amd->node->xccs : 1;
	const aql_signal *inactive = aql_signal_from_handle(q->amd->queue_inactive_signal);
	int v113 = stats().version_minor >= 13;

	check_bo(qi.eop, KFDEMU_VRAM, 4096, "EOP buffer");
	check_bo(qi.cwsr, KFDEMU_USERPTR, cwsr_total(), "CWSR area");
	for (uint32_t i = 0; i < xccs; i++) {
		CHECK(header_u32(&qi, i, 16) == (xccs - i) * qi.cwsr_per_xcc,
		      "XCC %u: debug_offset 0x%x", i, header_u32(&qi, i, 16));
		CHECK(header_u64(&qi, i, 24) == (v113 ? (uintptr_t)qi.error_reason : 0) &&
		      header_u32(&qi, i, 32) == (v113 ? inactive->event_id : 0) &&
		      (!v113 || inactive->event_id != 0),
		      "XCC %u: err_payload_addr 0x%llx, err_event_id %u", i,
		      (unsigned long long)header_u64(&qi, i, 24), header_u32(&qi, i, 32));
	}
}

static void check_create(void)
{
	struct kfdemu_stats before = stats(), after;
	aql_queue *q = queue(256), *q2, *small = NULL;
	aql_amd_queue *a = q->amd;
	aql_queue_config c = { .size = 16 };

	after = stats();
	CHECK(after.queues == before.queues + 1, "%u queues", after.queues);
	check_bo(q->ring, KFDEMU_USERPTR, 256 * 64, "ring");
	check_bo(a, KFDEMU_USERPTR, 4096, "amd_queue_t page");
	CHECK(((uintptr_t)q->ring & 4095) == 0 && ((uintptr_t)a & 4095) == 0,
	      "ring %p and amd_queue_t %p page aligned", (void *)q->ring, (void *)a);
	/* ring + amd page + CWSR area in USERPTR; the EOP page in VRAM */
	CHECK(after.bo_bytes[KFDEMU_USERPTR] - before.bo_bytes[KFDEMU_USERPTR] ==
	      256 * 64 + 4096 + cwsr_total(), "USERPTR bytes grew by %llu",
	      (unsigned long long)(after.bo_bytes[KFDEMU_USERPTR] -
				   before.bo_bytes[KFDEMU_USERPTR]));
	CHECK(after.bo_bytes[KFDEMU_VRAM] - before.bo_bytes[KFDEMU_VRAM] == 4096,
	      "VRAM grew by %llu", (unsigned long long)(after.bo_bytes[KFDEMU_VRAM] -
							 before.bo_bytes[KFDEMU_VRAM]));
	CHECK(after.ioctls[_IOC_NR(AMDKFD_IOC_CREATE_QUEUE)] ==
	      before.ioctls[_IOC_NR(AMDKFD_IOC_CREATE_QUEUE)] + 1, "CREATE_QUEUE calls");
	CHECK(after.ioctls[_IOC_NR(AMDKFD_IOC_SET_SCRATCH_BACKING_VA)] == 1,
	      "SET_SCRATCH_BACKING_VA %llu calls",
	      (unsigned long long)after.ioctls[_IOC_NR(AMDKFD_IOC_SET_SCRATCH_BACKING_VA)]);
	/* amd_queue_t as ROCr fills it */
	CHECK(q->doorbell->kind == AQL_SIGNAL_KIND_DOORBELL && q->doorbell->hardware_doorbell_ptr,
	      "doorbell signal kind %lld", (long long)q->doorbell->kind);
	CHECK(a->hsa.doorbell_signal == aql_signal_handle(q->doorbell), "doorbell_signal");
	CHECK(a->max_cu_id == amd->node->cus - 1 && a->max_wave_id == amd->node->waves_per_cu - 1,
	      "max_cu_id %u max_wave_id %u", a->max_cu_id, a->max_wave_id);
	CHECK(a->group_segment_aperture_base_hi == (uint32_t)(amd->apertures->lds_base >> 32) &&
	      a->private_segment_aperture_base_hi == (uint32_t)(amd->apertures->scratch_base >> 32) &&
	      a->group_segment_aperture_base_hi != 0, "aperture hi 0x%x 0x%x",
	      a->group_segment_aperture_base_hi, a->private_segment_aperture_base_hi);
	CHECK(a->queue_inactive_signal != 0 && a->read_dispatch_id_field_base_byte_offset == 128 &&
	      (a->queue_properties & AQL_AMD_QUEUE_PROPERTY_IS_PTR64) &&
	      a->scratch_last_used_index == UINT64_MAX && a->compute_tmpring_size == 0,
	      "amd_queue_t fields");
	check_cwsr(q);
	/* a second queue: another doorbell of the same slice, no second
	 * scratch address */
	q2 = queue(64);
	CHECK(q2->doorbell->hardware_doorbell_ptr - q->doorbell->hardware_doorbell_ptr == 8,
	      "doorbells 0x%llx 0x%llx", (unsigned long long)q->doorbell->hardware_doorbell_ptr,
	      (unsigned long long)q2->doorbell->hardware_doorbell_ptr);
	CHECK(stats().ioctls[_IOC_NR(AMDKFD_IOC_SET_SCRATCH_BACKING_VA)] == 1,
	      "SET_SCRATCH_BACKING_VA once per GPU");
	CHECK(aql_queue_create(&amd->base, &c, &small) == AQL_ERR_INVALID_ARG && !small &&
	      th_error_has("64 packets or more"), "a queue of 16 packets");
	CHECK_OK(aql_queue_destroy(q2));
	CHECK_OK(aql_queue_destroy(q));
	after = stats();
	CHECK(after.queues == before.queues && after.bos == before.bos &&
	      after.bo_bytes[KFDEMU_USERPTR] == before.bo_bytes[KFDEMU_USERPTR] &&
	      after.bo_bytes[KFDEMU_VRAM] == before.bo_bytes[KFDEMU_VRAM],
	      "after destroy: %u queues, %u BOs (before %u, %u)", after.queues, after.bos,
	      before.queues, before.bos);
}

/* Barriers in order behind a dependency, across ring wraps. */
static void check_barriers(void)
{
	aql_queue *q = queue(64);
	aql_signal *gate = th_signal(1), *done = th_signal(1), *last = th_signal(1);
	aql_packet p = barrier(gate, done);
	uint64_t id;

	CHECK(th_submit(q, &p) == AQL_OK, "gated barrier");
	p = barrier(NULL, last);
	CHECK(th_submit(q, &p) == AQL_OK, "next barrier");
	/* A hardware doorbell page need not read back what was written. */
	CHECK(hil || doorbell_value(q) == 1, "doorbell %llu after packet 1",
	      (unsigned long long)doorbell_value(q));
	th_sleep_ms(20);
	/* the CP waits on the gate, and the one behind waits too */
	CHECK(aql_signal_load(done, AQL_ACQUIRE) == 1 && aql_signal_load(last, AQL_ACQUIRE) == 1,
	      "ran before its dependency");
	aql_signal_store(gate, 0, AQL_RELEASE);
	CHECK(th_wait_done(done) == 0, "gated barrier's signal");
	CHECK(th_wait_done(last) == 0, "next barrier's signal");
	/* 1000 packets through a ring of 64 */
	aql_signal_store(last, 1, AQL_RELEASE);
	for (int i = 0; i < 1000; i++) {
		p = barrier(NULL, i == 999 ? last : NULL);
		if (th_submit(q, &p) != AQL_OK)
			break;
	}
	CHECK(th_wait_done(last) == 0, "the 1000th barrier");
	id = th_wait_read_index(q, 1002);
	CHECK(id == 1002 && (hil || doorbell_value(q) == 1001), "read index %llu, doorbell %llu",
	      (unsigned long long)id, (unsigned long long)doorbell_value(q));
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(gate);
	aql_signal_destroy(done);
	aql_signal_destroy(last);
}

/* A barrier through q, and its completion. */
static void run_barrier(aql_queue *q)
{
	aql_signal *done = th_signal(1);
	aql_packet p = barrier(NULL, done);

	CHECK(th_submit(q, &p) == AQL_OK && th_wait_done(done) == 0, "barrier after a priority");
	aql_signal_destroy(done);
}

/* UPDATE_QUEUEs the agent has made, refused ones too. */
static uint64_t update_calls(void)
{
	return stats().ioctls[_IOC_NR(AMDKFD_IOC_UPDATE_QUEUE)];
}

/* The KFD queue of q as the emulation has it: priority, and the updates
 * that succeeded; its ring and percentage never change. */
static void check_kfd_priority(aql_queue *q, uint32_t priority, uint32_t updates)
{
	struct kfdemu_queue kq;

	if (hil)
		return;
	CHECK(queue_at_fn(info_of(q).queue_id, &kq) == 0, "no KFD queue %u", info_of(q).queue_id);
	CHECK(kq.priority == priority && kq.updates == updates, "KFD priority %u after %u "
	      "updates, want %u after %u", kq.priority, kq.updates, priority, updates);
	CHECK(kq.ring == (uintptr_t)q->ring && kq.ring_size == q->size * sizeof(aql_packet) &&
	      kq.percentage == 100 && kq.gpu_id == amd->node->gpu_id,
	      "KFD queue: ring 0x%llx of %u bytes, %u%%", (unsigned long long)kq.ring,
	      kq.ring_size, kq.percentage);
}

static void check_priority(void)
{
	aql_queue_config c = { .size = 64, .flags = AQL_QUEUE_HIGH_PRIORITY };
	aql_queue *q = queue(128), *high = NULL;
	uint64_t calls = hil ? 0 : update_calls();

	check_kfd_priority(q, 7, 0);
	CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_HIGH));
	check_kfd_priority(q, 11, 1);
	run_barrier(q);
	CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_HIGH));
	CHECK(hil || update_calls() == calls + 1, "UPDATE_QUEUE for the priority it has");
	CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_LOW));
	check_kfd_priority(q, 0, 2);
	run_barrier(q);
	CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_NORMAL));
	check_kfd_priority(q, 7, 3);
	CHECK_OK(aql_queue_create(&amd->base, &c, &high));
	check_kfd_priority(high, 11, 0);
	run_barrier(high);
	CHECK_OK(aql_queue_destroy(high));
	CHECK_OK(aql_queue_destroy(q));
}

#define PRODUCERS 4
#define PER_PRODUCER 300

static aql_queue *stress_q;
static aql_signal *stress_done;

static void *produce(void *arg)
{
	(void)arg;
	for (int i = 0; i < PER_PRODUCER; i++) {
		aql_packet p = barrier(NULL, stress_done);

		if (th_submit(stress_q, &p) != AQL_OK)
			break;
	}
	return NULL;
}

/*
 * Producers on one MULTI queue: every packet runs, each decrement counts.
 * Their doorbell stores land out of order, and the emulated CP takes the
 * doorbell's value as the last packet to run (hardware polls the write
 * pointer instead): so the ring holds every packet, and the test rings
 * the last id once the producers are done.
 */
static void check_stress(void)
{
	pthread_t t[PRODUCERS];

	stress_q = queue(2048);
	stress_done = th_signal(PRODUCERS * PER_PRODUCER);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_create(&t[i], NULL, produce, NULL);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	aql_queue_ring_doorbell(stress_q, PRODUCERS * PER_PRODUCER - 1);
	CHECK(th_wait_done(stress_done) == 0, "all %d packets", PRODUCERS * PER_PRODUCER);
	th_wait_read_index(stress_q, PRODUCERS * PER_PRODUCER);
	CHECK_OK(aql_queue_destroy(stress_q));
	aql_signal_destroy(stress_done);
}

/* A vendor packet the CP does not know: CP code 256 stops the queue. */
static void check_refused_packet(void)
{
	aql_queue *q = queue(64);
	aql_signal *s = th_signal(1), *behind = th_signal(1);
	aql_packet p[2] = { { 0 }, barrier(NULL, behind) };
	const char *msg = "";
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	p[0].barrier_value.header.header = aql_packet_header(AQL_PACKET_VENDOR_SPECIFIC, 1,
							     AQL_FENCE_SYSTEM,
							     AQL_FENCE_SYSTEM);
	p[0].barrier_value.header.format = 0x7f;
	p[0].barrier_value.completion_signal = aql_signal_handle(s);
	/* Both at once: the CP stops the queue as soon as it meets the first. */
	CHECK(th_submit_all(q, p, 2) == AQL_OK, "vendor packet and the barrier behind it");
	CHECK(th_wait_done(s) == -1, "refused packet's signal");
	CHECK(th_wait_done(behind) == -1, "the signal of the packet behind it");
	while (aql_queue_error(q, &msg) == AQL_OK && th_now_ns() < end)
		th_sleep_ms(1);
	CHECK(aql_queue_error(q, &msg) == AQL_ERR_QUEUE_ERROR &&
	      strstr(msg, "unsupported vendor-specific packet (CP code 256)") &&
	      strstr(msg, "packet 0"), "queue error: %s", msg);
	CHECK(aql_queue_submit(q, &p[1]) == AQL_ERR_QUEUE_ERROR, "submission after the error");
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(s);
	aql_signal_destroy(behind);
}

/*
 * CP codes are bit masks (ROCr amd_aql_queue.cpp DynamicScratchHandler):
 * the test stands in for the CP and stores 0x82, invalid dimensions and
 * out of VGPRs at once; the queue's error names both. The error callback,
 * on the queue's watcher thread, inactivates the queue; destroy follows.
 */
static void check_cp_code_bits(void)
{
	aql_queue *q;
	const char *msg = "";
	aql_status st;

	inactivated = AQL_ERR_TIMEOUT;
	q = queue_with(64, inactivate_in_callback);
	aql_signal_store(aql_signal_from_handle(q->amd->queue_inactive_signal), 0x82,
			 AQL_RELEASE);
	st = wait_inactivated();
	CHECK(aql_queue_error(q, &msg) == AQL_ERR_QUEUE_ERROR &&
	      strstr(msg, "invalid grid or work-group dimensions; out of VGPRs (CP code 130)"),
	      "queue error: %s", msg);
	CHECK(st == AQL_OK, "inactivate from the error callback: %s", aql_status_str(st));
	CHECK_OK(aql_queue_destroy(q));
}

/* The scratch a dispatch of lane_size private bytes gets (plan §9). */
static uint64_t scratch_need(uint32_t private_size)
{
	return (((uint64_t)private_size + 15) & ~15ull) * 64 * amd->node->cus *
	       amd->node->max_slots_scratch_cu;
}

/* The amd_queue_t's scratch fields and the BO behind them, after a
 * growth for private_size bytes per work-item. */
static void check_scratch_fields(aql_queue *q, uint32_t private_size)
{
	const aql_amd_queue *a = q->amd;
	struct kfd_queue_info qi = info_of(q);
	uint64_t lane = ((uint64_t)private_size + 15) & ~15ull, need = scratch_need(private_size);
	uint64_t per_xcc = need / amd->node->xccs, base = (uint64_t)(uintptr_t)qi.scratch;
	uint32_t wave_kib = (uint32_t)((lane * 64 + 1023) / 1024);
	uint64_t waves = per_xcc / (wave_kib * 1024ull);

	if (waves > (uint64_t)amd->node->cus * amd->node->max_slots_scratch_cu)
		waves = (uint64_t)amd->node->cus * amd->node->max_slots_scratch_cu;
	CHECK(qi.scratch && qi.scratch_bytes == need, "scratch %p of %zu bytes (want %llu)",
	      qi.scratch, qi.scratch_bytes, (unsigned long long)need);
	if (!hil)
		check_bo(qi.scratch, KFDEMU_VRAM, need, "scratch");
	/* the absolute address (gfx9: ROCr AcquireQueueMainScratch), in the
	 * window of 4 GiB per XCC given to SET_SCRATCH_BACKING_VA */
	CHECK(base % (64 << 10) == 0 && a->scratch_backing_memory_location == base &&
	      qi.scratch_window_bytes == ((size_t)4 << 30) * amd->node->xccs &&
	      (const uint8_t *)qi.scratch >= (const uint8_t *)qi.scratch_window &&
	      base + need <= (uint64_t)(uintptr_t)qi.scratch_window + qi.scratch_window_bytes,
	      "scratch_backing_memory_location 0x%llx (scratch %p, window %p)",
	      (unsigned long long)a->scratch_backing_memory_location, qi.scratch,
	      qi.scratch_window);
	CHECK(a->scratch_backing_memory_byte_size == per_xcc && a->scratch_wave64_lane_byte_size == lane,
	      "scratch sizes %llu, %u per lane (want %llu, %llu)",
	      (unsigned long long)a->scratch_backing_memory_byte_size,
	      a->scratch_wave64_lane_byte_size, (unsigned long long)per_xcc,
	      (unsigned long long)lane);
	CHECK(a->scratch_resource_descriptor[0] == (uint32_t)base &&
	      a->scratch_resource_descriptor[1] == ((uint32_t)(base >> 32) | 1u << 31) &&
	      a->scratch_resource_descriptor[2] == per_xcc &&
	      a->scratch_resource_descriptor[3] == 0x00ea4facu,
	      "scratch descriptor %08x %08x %08x %08x", a->scratch_resource_descriptor[0],
	      a->scratch_resource_descriptor[1], a->scratch_resource_descriptor[2],
	      a->scratch_resource_descriptor[3]);
	CHECK(a->compute_tmpring_size == ((uint32_t)waves | wave_kib << 12),
	      "compute_tmpring_size 0x%x (want %llu waves of %u KiB)", a->compute_tmpring_size,
	      (unsigned long long)waves, wave_kib);
}

/*
 * A dispatch that needs scratch, whose code object the CP then refuses
 * (kernel_object 0: code 8): that code shows the CP retried after the
 * growth. A second, bigger need grows again; the destroy frees it.
 */
static void check_scratch(void)
{
	struct kfdemu_stats before = stats();
	aql_queue *q = queue(64);
	aql_signal *s = th_signal(1);
	aql_packet p = { 0 };
	const char *msg = "";
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	p.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
					      AQL_FENCE_SYSTEM);
	p.dispatch.setup = 1;
	p.dispatch.workgroup_size_x = 64;
	p.dispatch.workgroup_size_y = p.dispatch.workgroup_size_z = 1;
	p.dispatch.grid_size_x = 256;
	p.dispatch.grid_size_y = p.dispatch.grid_size_z = 1;
	p.dispatch.private_segment_size = 40;
	p.dispatch.completion_signal = aql_signal_handle(s);
	CHECK(th_submit(q, &p) == AQL_OK, "dispatch needing scratch");
	CHECK(th_wait_done(s) == -1, "its signal");
	while (aql_queue_error(q, &msg) == AQL_OK && th_now_ns() < end)
		th_sleep_ms(1);
	CHECK(aql_queue_error(q, &msg) == AQL_ERR_QUEUE_ERROR &&
	      strstr(msg, "(CP code 8)"), "after the growth the CP retried: %s", msg);
	check_scratch_fields(q, 40);
	CHECK(stats().bo_bytes[KFDEMU_VRAM] - before.bo_bytes[KFDEMU_VRAM] >= scratch_need(40),
	      "VRAM in use after the growth");
	CHECK_OK(aql_queue_destroy(q));
	CHECK(stats().bos == before.bos && stats().bo_bytes[KFDEMU_VRAM] == before.bo_bytes[KFDEMU_VRAM],
	      "the scratch BO after the destroy: %u BOs (before %u)", stats().bos, before.bos);
	aql_signal_destroy(s);
}

#define SAXPY_N 1000u

/* saxpy on q with private_size bytes of scratch per work-item asked: y
 * right afterwards. */
static void run_saxpy(aql_queue *q, const aql_kernel *k, void *args, const float *x, float *y,
		      uint32_t private_size)
{
	aql_signal *done = th_signal(1);
	aql_packet p = { 0 };
	const char *why = "";
	uint32_t bad = 0;

	for (uint32_t i = 0; i < SAXPY_N; i++)
		y[i] = 1.0f;
	p.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
					      AQL_FENCE_SYSTEM);
	p.dispatch.setup = 1;
	p.dispatch.workgroup_size_x = 64;
	p.dispatch.workgroup_size_y = p.dispatch.workgroup_size_z = 1;
	p.dispatch.grid_size_x = SAXPY_N;
	p.dispatch.grid_size_y = p.dispatch.grid_size_z = 1;
	p.dispatch.group_segment_size = k->group_segment_size;
	p.dispatch.private_segment_size = private_size;
	p.dispatch.kernel_object = k->kernel_object;
	p.dispatch.kernarg_address = (uintptr_t)args;
	p.dispatch.completion_signal = aql_signal_handle(done);
	CHECK(th_submit(q, &p) == AQL_OK, "saxpy dispatch");
	CHECK(th_wait_done(done) == 0, "saxpy's signal with %u private bytes (queue: %s)",
	      private_size, (aql_queue_error(q, &why), why));
	for (uint32_t i = 0; i < SAXPY_N; i++)
		bad += y[i] != 2.0f * x[i] + 1.0f;
	CHECK(bad == 0, "%u of %u elements of y wrong (y[1] = %g), %u private bytes", bad, SAXPY_N,
	      (double)y[1], private_size);
	aql_signal_destroy(done);
}

/* Whether the code object at path loads on the agent (its target fits). */
static int loads(const char *path)
{
	aql_code_object *co = NULL;
	int ok = aql_code_object_load_file(&amd->base, path, NULL, &co) == AQL_OK;

	aql_code_object_destroy(co);
	return ok;
}

/*
 * saxpy (y = a x + y) through the queue, run by the emulated CP: as the
 * kernel asks, then with scratch asked in the packet, which the queue
 * grows to (the CP checks it before it runs the host build), then more.
 */
static void check_dispatch(const char *hsaco)
{
	aql_agent *agent = &amd->base;
	aql_mem_pool_config pc = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
				   .agents = &agent, .agent_count = 1 };
	aql_mem_pool *pool = NULL;
	aql_code_object *co = NULL;
	const aql_kernel *k = NULL;
	float *x = NULL, *y = NULL, a = 2.0f;
	unsigned char *args = NULL;
	/* the emulation's BO counts; on hardware (AQL_HIL) there are none */
	struct kfdemu_stats before = { 0 }, grown = { 0 };
	aql_queue *q;
	void *first;
	uint64_t ptr;

	if (!hil)
		before = stats();
	q = queue(64);
	CHECK_OK(aql_code_object_load_file(agent, hsaco, NULL, &co));
	if (co)
		CHECK_OK(aql_code_object_kernel(co, "saxpy", &k));
	CHECK_OK(aql_mem_pool_create(&pc, &pool));
	if (!k || !pool)
		th_stop("no saxpy or no pool");
	CHECK_OK(aql_mem_alloc(pool, SAXPY_N * sizeof(float), 64, (void **)&x));
	CHECK_OK(aql_mem_alloc(pool, SAXPY_N * sizeof(float), 64, (void **)&y));
	CHECK_OK(aql_mem_alloc(pool, k->kernarg_size, k->kernarg_align, (void **)&args));
	if (!x || !y || !args)
		th_stop("no pool memory");
	for (uint32_t i = 0; i < SAXPY_N; i++)
		x[i] = (float)i;
	/* saxpy's explicit arguments: a, x, y, n (AMDGPU layout) */
	memset(args, 0, k->kernarg_size);
	memcpy(args, &a, 4);
	ptr = (uintptr_t)x;
	memcpy(args + 8, &ptr, 8);
	ptr = (uintptr_t)y;
	memcpy(args + 16, &ptr, 8);
	memcpy(args + 24, &(uint32_t){ SAXPY_N }, 4);
	run_saxpy(q, k, args, x, y, k->private_segment_size);
	CHECK(info_of(q).scratch == NULL || k->private_segment_size,
	      "scratch for a kernel without private segment");
	run_saxpy(q, k, args, x, y, 24);
	check_scratch_fields(q, 24);
	first = info_of(q).scratch;
	/* the same need again: no growth */
	run_saxpy(q, k, args, x, y, 20);
	CHECK(info_of(q).scratch == first && q->amd->scratch_wave64_lane_byte_size == 32,
	      "scratch regrown for a need it met");
	if (!hil)
		grown = stats();
	run_saxpy(q, k, args, x, y, 300);
	check_scratch_fields(q, 300);
	/* the first scratch BO gave way to the second */
	if (!hil)
		CHECK(stats().bos == grown.bos &&
		      stats().bo_bytes[KFDEMU_VRAM] - grown.bo_bytes[KFDEMU_VRAM] ==
		      scratch_need(300) - scratch_need(24),
		      "BOs after the second growth: %u (%u before)", stats().bos, grown.bos);
	CHECK_OK(aql_queue_destroy(q));
	aql_mem_free(args);
	aql_mem_free(x);
	aql_mem_free(y);
	CHECK_OK(aql_mem_pool_destroy(pool));
	CHECK_OK(aql_code_object_destroy(co));
	if (!hil)
		CHECK(stats().bos == before.bos &&
		      stats().bo_bytes[KFDEMU_VRAM] == before.bo_bytes[KFDEMU_VRAM],
		      "after the destroys: %u BOs, %llu bytes of VRAM (before %u, %llu)",
		      stats().bos, (unsigned long long)stats().bo_bytes[KFDEMU_VRAM], before.bos,
		      (unsigned long long)before.bo_bytes[KFDEMU_VRAM]);
}

/* A queue stuck on a dependency is destroyed in bounded time. */
static void check_destroy_in_flight(void)
{
	aql_queue *q = queue(64);
	aql_signal *gate = th_signal(1), *s[3];
	uint64_t t0;

	for (int i = 0; i < 3; i++) {
		aql_packet p = barrier(i == 1 ? gate : NULL, s[i] = th_signal(1));

		th_submit(q, &p);
	}
	CHECK(th_wait_done(s[0]) == 0, "packet before the stuck one");
	t0 = th_now_ns();
	CHECK_OK(aql_queue_destroy(q));
	CHECK(th_now_ns() - t0 < TH_TIMEOUT_NS, "destroy took %llu ms",
	      (unsigned long long)((th_now_ns() - t0) / MS));
	CHECK(aql_signal_load(s[1], AQL_ACQUIRE) == -1 && aql_signal_load(s[2], AQL_ACQUIRE) == -1,
	      "signals %lld %lld", (long long)aql_signal_load(s[1], AQL_ACQUIRE),
	      (long long)aql_signal_load(s[2], AQL_ACQUIRE));
	CHECK(hil || stats().queues == own_queues, "%u queues after destroy (the agent's own: %u)",
	      hil ? 0 : stats().queues, own_queues);
	for (int i = 0; i < 3; i++)
		aql_signal_destroy(s[i]);
	aql_signal_destroy(gate);
}

/* A VM fault: the fault watcher stops the GPU's queues (KFD evicts them). */
static void check_fault(void)
{
	aql_queue *q;
	aql_signal *gate = th_signal(1), *s = th_signal(1);
	aql_packet p = barrier(gate, s);
	const char *msg = "";
	aql_status st;

	/* The fault watcher stops the GPU's queues holding their list: the
	 * callback's inactivate must not take it again. */
	inactivated = AQL_ERR_TIMEOUT;
	q = queue_with(64, inactivate_in_callback);
	th_submit(q, &p);
	vm_fault_fn(amd->node->gpu_id, 0x7000000, 1, 0);
	st = wait_inactivated();
	CHECK(aql_queue_error(q, &msg) != AQL_OK && strstr(msg, "0x7000000"), "queue error: %s",
	      msg);
	CHECK(st == AQL_OK, "inactivate from the error callback: %s", aql_status_str(st));
	CHECK(th_wait_done(s) == -1, "the faulted queue's packet");
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(gate);
	aql_signal_destroy(s);
}

/* KFD 1.13+: a queue exception KFD ORs into err_payload stops the queue. */
static void check_exception(void)
{
	aql_queue *q = queue(64);
	struct kfd_queue_info qi = info_of(q);
	aql_signal *gate = th_signal(1), *s = th_signal(1);
	aql_packet p = barrier(gate, s);
	const char *msg = "";
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	th_submit(q, &p);
	CHECK(exception_fn(header_u64(&qi, 0, 24), header_u32(&qi, 0, 32), 1ull << 4) == 0,
	      "raising the queue's exception");
	while (aql_queue_error(q, &msg) == AQL_OK && th_now_ns() < end)
		th_sleep_ms(1);
	CHECK(aql_queue_error(q, &msg) == AQL_ERR_DEVICE && strstr(msg, "mask 0x10"),
	      "queue error: %s", msg);
	CHECK(th_wait_done(s) == -1, "the stopped queue's packet");
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(gate);
	aql_signal_destroy(s);
}

/* AQL_KFD_EMU_FAIL=create_queue: refused, nothing left behind. */
static void expect_refused(void)
{
	struct kfdemu_stats before = stats(), after;
	aql_queue_config c = { .size = 64 };
	aql_queue *q = NULL;

	CHECK(aql_queue_create(&amd->base, &c, &q) == AQL_ERR_NOMEM && !q &&
	      th_error_has("AMDKFD_IOC_CREATE_QUEUE"), "refused queue");
	after = stats();
	CHECK(after.queues == 0 && after.bos == before.bos &&
	      after.bo_bytes[KFDEMU_USERPTR] == before.bo_bytes[KFDEMU_USERPTR] &&
	      after.bo_bytes[KFDEMU_VRAM] == before.bo_bytes[KFDEMU_VRAM],
	      "left behind: %u BOs (before %u)", after.bos, before.bos);
}

/* AQL_KFD_EMU_FAIL=update_queue: KFD refuses every priority change. */
static void expect_update_refused(void)
{
	aql_queue *q = queue(64);
	uint64_t calls = update_calls();

	CHECK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_HIGH) == AQL_ERR_DEVICE &&
	      strstr(aql_error_message(), "AMDKFD_IOC_UPDATE_QUEUE") &&
	      strstr(aql_error_message(), "priority 11"), "refused update: %s",
	      aql_error_message());
	CHECK(update_calls() == calls + 1, "%llu UPDATE_QUEUEs",
	      (unsigned long long)(update_calls() - calls));
	/* still NORMAL: nothing to change, no call */
	CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_NORMAL));
	CHECK(update_calls() == calls + 1, "UPDATE_QUEUE for the priority the queue has");
	CHECK(aql_queue_error(q, NULL) == AQL_OK, "a refused update stopped the queue");
	run_barrier(q);
	CHECK_OK(aql_queue_destroy(q));
}

/* AQL_KFD_EMU_FAIL=queue_stop:2: the CP stops after two packets. */
static void expect_stop(void)
{
	aql_queue *q = queue(64);
	aql_signal *s[4];
	int64_t v = 1;

	for (int i = 0; i < 4; i++) {
		aql_packet p = barrier(NULL, s[i] = th_signal(1));

		th_submit(q, &p);
	}
	CHECK(th_wait_done(s[1]) == 0, "second packet");
	CHECK(aql_signal_wait(s[2], AQL_COND_LT, 1, 200 * MS, AQL_WAIT_BLOCKED, &v) ==
	      AQL_ERR_TIMEOUT && v == 1, "the stopped queue's packet: a bounded wait times out");
	CHECK_OK(aql_queue_destroy(q));
	CHECK(aql_signal_load(s[2], AQL_ACQUIRE) == -1 && aql_signal_load(s[3], AQL_ACQUIRE) == -1,
	      "packets of the stopped queue -1");
	for (int i = 0; i < 4; i++)
		aql_signal_destroy(s[i]);
}

/* A small VRAM: the growth fails, and the queue's error says how much. */
static void expect_scratch_enomem(void)
{
	aql_queue *q = queue(64);
	aql_signal *s = th_signal(1);
	aql_packet p = { 0 };
	const char *msg = "";
	char want[96];
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;
	uint32_t ses;

	p.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
					      AQL_FENCE_SYSTEM);
	p.dispatch.setup = 1;
	p.dispatch.workgroup_size_x = p.dispatch.grid_size_x = 64;
	p.dispatch.workgroup_size_y = p.dispatch.workgroup_size_z = 1;
	p.dispatch.grid_size_y = p.dispatch.grid_size_z = 1;
	p.dispatch.private_segment_size = 16;
	p.dispatch.completion_signal = aql_signal_handle(s);
	CHECK(th_submit(q, &p) == AQL_OK, "dispatch needing scratch");
	CHECK(th_wait_done(s) == -1, "its signal");
	while (aql_queue_error(q, &msg) == AQL_OK && th_now_ns() < end)
		th_sleep_ms(1);
	/* one wave on each CU, the waves of an XCC a multiple of its shader
	 * engines: the least it tried */
	ses = amd->node->array_count / amd->node->simd_arrays_per_engine / amd->node->xccs;
	snprintf(want, sizeof(want), "%llu bytes for one wave on each of %u CUs",
		 (unsigned long long)(16 * 64 * amd->node->xccs *
				      ((amd->node->cus / amd->node->xccs + ses - 1) / ses * ses)),
		 amd->node->cus);
	CHECK(aql_queue_error(q, &msg) == AQL_ERR_NOMEM && strstr(msg, want) &&
	      strstr(msg, "VRAM exhausted"), "queue error: %s", msg);
	CHECK(info_of(q).scratch == NULL && q->amd->scratch_backing_memory_byte_size == 0,
	      "scratch after the failed growth");
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(s);
}

int main(int argc, char **argv)
{
	const char *expect = argc == 3 && !strcmp(argv[1], "--expect") ? argv[2] : "";
	const char *hsaco = argc == 3 && !strcmp(argv[1], "--hsaco") ? argv[2] : NULL;
	aql_agent *agent = NULL;

	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	hil = getenv("AQL_HIL") && !strcmp(getenv("AQL_HIL"), "1");
	amd = (struct kfd_agent *)agent;
	if (hil) {
		printf("note: AQL_HIL=1: %s on KFD %u.%u (%s), the emulation's checks left out\n",
		       amd->node->gfx, amd->process->major, amd->process->minor,
		       amd->process->sys->name);
	} else {
		load_emu();
		printf("%s on KFD %u.%u\n", amd->node->gfx, stats().version_major,
		       stats().version_minor);
	}
	/* The signal pool's first block (registered with the GPU) before
	 * the BO counts start. */
	aql_signal_destroy(th_signal(0));
	if (!strcmp(expect, "refused")) {
		expect_refused();
	} else if (!strcmp(expect, "update_refused")) {
		expect_update_refused();
	} else if (!strcmp(expect, "stop")) {
		expect_stop();
	} else if (!strcmp(expect, "scratch_enomem")) {
		expect_scratch_enomem();
	} else {
		/* The agent's own queue, made by the first copy (which clears
		 * this memory) with the code caches' first invalidation,
		 * before the counts start: it lives as long as the agent. */
		void *v = NULL;

		CHECK_OK(aql_agent_mem_alloc(agent, 256, &v));
		aql_agent_mem_free(agent, v);
		own_queues = hil ? 0 : stats().queues;
		if (!hil)
			check_create();
		check_barriers();
		check_priority();
		check_stress();
		if (!hil) {
			check_refused_packet();
			check_cp_code_bits();
			check_scratch();
		}
		/* --hsaco names saxpy's build for the run's model; on hardware
		 * the GPU may be another. */
		if (hsaco && hil && !loads(hsaco))
			printf("note: no saxpy dispatch: %s is not for this %s\n", hsaco,
			       amd->node->gfx);
		else if (hsaco)
			check_dispatch(hsaco);
		check_destroy_in_flight();
		if (!hil && stats().version_minor >= 13)
			check_exception();
		if (!hil)
			check_fault();
	}
	CHECK(aql_agent_destroy(agent) == AQL_OK, "destroy: %s", aql_error_message());
	return th_finish();
}
