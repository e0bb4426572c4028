/* SPDX-License-Identifier: MIT */
/*
 * The hidden arguments the emulated CP checks (tests/kfd_emu/kernels.c),
 * on the KFD emulation's gfx90a or gfx942 (AQL_KFD_EMU_GPUS, one GPU),
 * with the fixture tests/kfd_hidden/hidden.c: a kernel whose metadata
 * names hidden_hostcall_buffer and hidden_heap_v1 (code object V5) or the
 * hostcall buffer alone (V4), whose host build AQL_KFD_EMU_KERNELS names.
 * Raw packets, kernarg blocks from aql_kernarg_build(), and a device heap
 * and hostcall buffer built by hand as the ROCm device library reads them
 * (ockl's dm.cl and hostcall_impl.cl; aql/kfd/README.md):
 *
 * - valid ones run, the kernel reads what the packet carried, and
 *   kfdemu_dispatch_last() reports those values; zeros run too;
 * - each rule broken alone is refused: CP code 32 with the hook's reason
 *   naming the argument and the rule, or (--fault NAME, one per process)
 *   a VM fault at the address a GPU would fault on; either puts the queue
 *   into its error state;
 * - a wrong hidden_queue_ptr or block count (V5), global offset (V4).
 *
 * Arguments: --v5 PATH and --v4 PATH, the fixture's builds for the run's
 * model where a clang here built them; --missing REASON for each that was
 * not; --fault heap|slabs|buffer|payloads|doorbell. Not run on hardware.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "aql/kfd/kfd.h"
#include "kfd_emu/kfdemu.h"

#define MIB (1ull << 20)
#define SLAB (2 * MIB)
#define HEAP_BYTES (128u << 10)
#define HEAP_INITIAL_SLABS 108544	/* then initial_slabs_end, _start */
#define HC_HEADER 24
#define HC_PAYLOAD 4096
#define FAULT ((int64_t)UINT32_MAX)

static kfdemu_dispatch_last_fn last_fn;
static kfdemu_bo_at_fn bo_at_fn;
static struct kfd_agent *amd;
static aql_mem_pool *pool;

/* The fixture loaded, its explicit arguments' buffer, and what it runs with. */
struct fx {
	aql_code_object *co;
	const aql_kernel *k;
	int v4;
	uint64_t *out;			/* 3 u64, host pool */
	unsigned char *kernarg;		/* host pool */
	aql_kernarg_hidden hidden;
};

/* A valid device heap: 128 KiB of VRAM, and 2 initial slabs of 2 MiB,
 * the first handed out already. */
struct heap {
	void *mem, *slabs;
	uint64_t va, start, end, next;
};

/* A valid hostcall buffer in host memory the GPU maps, for n packets. */
struct hostcall {
	uint64_t *buf;			/* prefix, then headers, then payloads */
	uint64_t n;
	aql_signal *doorbell;
};

static uint64_t va(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

static void heap_fields(struct heap *h, uint64_t next, uint64_t end, uint64_t start)
{
	uint64_t f[3] = { next, end, start };

	CHECK_OK(aql_agent_copy(&amd->base, (char *)h->mem + HEAP_INITIAL_SLABS, f, sizeof(f)));
}

static void heap_make(struct heap *h)
{
	CHECK_OK(aql_agent_mem_alloc(&amd->base, HEAP_BYTES, &h->mem));
	CHECK_OK(aql_agent_mem_alloc(&amd->base, 3 * SLAB, &h->slabs));
	if (!h->mem || !h->slabs)
		th_stop("no VRAM for the heap");
	h->va = va(h->mem);
	h->start = (va(h->slabs) + SLAB - 1) & ~(SLAB - 1);
	h->end = h->start + 2 * SLAB;
	h->next = h->start + SLAB;
	heap_fields(h, h->next, h->end, h->start);
}

/* The prefix: headers, payloads, doorbell, free_stack, ready_stack, index_mask. */
static void hc_prefix(struct hostcall *c, uint64_t headers, uint64_t payloads, uint64_t doorbell,
		      uint64_t mask)
{
	c->buf[0] = headers;
	c->buf[1] = payloads;
	c->buf[2] = doorbell;
	c->buf[3] = c->n - 1;
	c->buf[4] = 0;
	c->buf[5] = mask;
}

static uint64_t hc_headers(const struct hostcall *c)
{
	return va(c->buf) + 64;
}

static uint64_t hc_payloads(const struct hostcall *c)
{
	return (hc_headers(c) + c->n * HC_HEADER + 4095) & ~4095ull;
}

static void hc_valid(struct hostcall *c)
{
	hc_prefix(c, hc_headers(c), hc_payloads(c), va(c->doorbell), c->n - 1);
}

static void hc_make(struct hostcall *c)
{
	uint64_t waves = (uint64_t)amd->node->cus * amd->node->waves_per_cu, *next;
	size_t bytes;

	for (c->n = 1; c->n < waves; c->n *= 2)
		;
	bytes = (size_t)(hc_payloads(c) - hc_headers(c) + 64 + c->n * HC_PAYLOAD);
	CHECK_OK(aql_mem_alloc(pool, bytes, 4096, (void **)&c->buf));
	if (!c->buf)
		th_stop("no host memory for the hostcall buffer");
	memset(c->buf, 0, bytes);
	/* the free stack holds every packet, packet 0 with tag 1 */
	for (uint64_t i = 1; i < c->n; i++) {
		next = (uint64_t *)(uintptr_t)(hc_headers(c) + i * HC_HEADER);
		*next = i == 1 ? c->n : i - 1;
	}
	c->doorbell = th_signal(0);
	CHECK(c->doorbell->event_mailbox_ptr && c->doorbell->event_id,
	      "the doorbell signal has an event (mailbox 0x%llx, id %u)",
	      (unsigned long long)c->doorbell->event_mailbox_ptr, c->doorbell->event_id);
	hc_valid(c);
}

static uint32_t offset_of(const struct fx *f, enum aql_arg_kind kind)
{
	const aql_kernel_metadata *md = f->k->metadata;

	for (uint32_t i = 0; i < md->arg_count; i++)
		if (md->args[i].kind == kind)
			return md->args[i].offset;
	th_stop("the fixture's metadata lacks a hidden argument the test needs");
}

static int names(const struct fx *f, enum aql_arg_kind kind)
{
	const aql_kernel_metadata *md = f->k->metadata;

	for (uint32_t i = 0; i < md->arg_count; i++)
		if (md->args[i].kind == kind)
			return 1;
	return 0;
}

static aql_dispatch_packet packet(const struct fx *f, aql_signal *done)
{
	aql_dispatch_packet p = { 0 };

	p.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
				     AQL_FENCE_SYSTEM);
	p.setup = 1;
	p.workgroup_size_x = 64;
	p.workgroup_size_y = p.workgroup_size_z = 1;
	p.grid_size_x = 128;
	p.grid_size_y = p.grid_size_z = 1;
	p.group_segment_size = f->k->group_segment_size;
	p.kernel_object = f->k->kernel_object;
	p.kernarg_address = va(f->kernarg);
	p.completion_signal = aql_signal_handle(done);
	return p;
}

/* The kernarg block for p on a queue with amd_queue_t amdq. */
static void kernarg(struct fx *f, const aql_dispatch_packet *p, uint64_t amdq)
{
	uint64_t out = va(f->out);
	uint32_t v4 = (uint32_t)f->v4;
	aql_kernarg_value args[2] = { { &out, 8 }, { &v4, 4 } };

	f->hidden.queue_ptr = amdq;
	CHECK_OK(aql_kernarg_build(f->k, p, args, 2, &f->hidden, f->kernarg, f->k->kernarg_size));
}

typedef void (*spoil_fn)(struct fx *f);

/*
 * Run the fixture on a fresh queue, spoil (may be NULL) changing the
 * kernarg block after it was built: 0 when it ran, the CP code, or FAULT;
 * *d what the hook recorded. A refusal must leave the queue in its error
 * state, its message naming the CP code or the memory fault.
 */
static int64_t run(struct fx *f, spoil_fn spoil, struct kfdemu_dispatch *d)
{
	aql_queue_config c = { .size = 64, .type = AQL_QUEUE_MULTI };
	aql_queue *q = NULL;
	aql_signal *done = th_signal(1);
	aql_dispatch_packet p = packet(f, done);
	const char *msg = "";
	uint64_t end, seq;
	int64_t r;

	CHECK_OK(aql_queue_create(&amd->base, &c, &q));
	if (!q)
		th_stop("no queue");
	memset(f->out, 0xee, 24);
	kernarg(f, &p, va(q->amd));
	if (spoil)
		spoil(f);
	if (last_fn("hidden_read", d))
		d->seq = 0;
	seq = d->seq;
	CHECK(th_submit(q, &p) == AQL_OK, "submit");
	/* a refused packet's signal gets -1 when the queue's error is seen
	 * (CP codes) or when the queue is destroyed (a VM fault) */
	end = th_now_ns() + TH_TIMEOUT_NS;
	while (aql_signal_load(done, AQL_ACQUIRE) == 1 && aql_queue_error(q, NULL) == AQL_OK &&
	       th_now_ns() < end)
		th_sleep_ms(1);
	r = aql_queue_error(q, &msg) == AQL_OK ? aql_signal_load(done, AQL_ACQUIRE) : -1;
	CHECK(r == 0 || r == -1, "the dispatch neither ran nor was refused in time");
	CHECK(last_fn("hidden_read", d) == 0 && d->seq > seq, "no dispatch of hidden_read recorded");
	if (r == 0) {
		CHECK(d->cp_code == 0, "ran, and CP code %u", d->cp_code);
	} else {
		if (d->cp_code == FAULT) {
			CHECK(strstr(msg, "memory fault"), "queue error after a VM fault: %s", msg);
		} else {
			char want[32];

			snprintf(want, sizeof(want), "(CP code %u)", d->cp_code);
			CHECK(strstr(msg, want), "queue error: %s, want %s", msg, want);
		}
	}
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(done);
	return r == 0 ? 0 : (int64_t)d->cp_code;
}

/* A refusal: code, and a reason naming arg and holding rule. */
static void refused(struct fx *f, spoil_fn spoil, int64_t code, const char *arg,
		    const char *rule)
{
	struct kfdemu_dispatch d;
	int64_t r = run(f, spoil, &d);

	CHECK(r == code && strstr(d.why, arg) && strstr(d.why, rule),
	      "%s, %s: CP code %lld (%s), want %lld", arg, rule, (long long)r, d.why,
	      (long long)code);
}

static void put_at(struct fx *f, enum aql_arg_kind kind, uint64_t v, uint32_t size)
{
	memcpy(f->kernarg + offset_of(f, kind), &v, size);
}

static void spoil_queue_ptr(struct fx *f)
{
	put_at(f, AQL_ARG_HIDDEN_QUEUE_PTR, f->hidden.queue_ptr + 64, 8);
}

static void spoil_block_count(struct fx *f)
{
	put_at(f, AQL_ARG_HIDDEN_BLOCK_COUNT_X, 3, 4);
}

static void spoil_global_offset(struct fx *f)
{
	put_at(f, AQL_ARG_HIDDEN_GLOBAL_OFFSET_X, 64, 8);
}

/* The valid structures in f->hidden: the packet's values reach the kernel
 * and the hook. */
static void check_runs(struct fx *f)
{
	struct kfdemu_dispatch d;

	CHECK(run(f, NULL, &d) == 0, "the valid dispatch: %s", d.why);
	CHECK(f->out[0] == f->hidden.hostcall_buffer &&
	      f->out[1] == (f->v4 ? 0 : f->hidden.heap_v1) &&
	      f->out[2] == (f->v4 ? 0 : f->hidden.queue_ptr),
	      "the kernel read 0x%llx 0x%llx 0x%llx", (unsigned long long)f->out[0],
	      (unsigned long long)f->out[1], (unsigned long long)f->out[2]);
	CHECK(!strcmp(d.kernel, "hidden_read") && d.version == (f->v4 ? 4u : 5u) &&
	      d.why[0] == 0, "the hook: kernel %s, V%u, %s", d.kernel, d.version, d.why);
	CHECK((d.named >> AQL_ARG_HIDDEN_HOSTCALL_BUFFER & 1) &&
	      d.value[AQL_ARG_HIDDEN_HOSTCALL_BUFFER] == f->hidden.hostcall_buffer,
	      "the hook's hidden_hostcall_buffer 0x%llx",
	      (unsigned long long)d.value[AQL_ARG_HIDDEN_HOSTCALL_BUFFER]);
	if (f->v4) {
		CHECK(!(d.named >> AQL_ARG_HIDDEN_HEAP_V1 & 1) &&
		      !(d.named >> AQL_ARG_HIDDEN_QUEUE_PTR & 1) &&
		      (d.named >> AQL_ARG_HIDDEN_GLOBAL_OFFSET_X & 1),
		      "V4 names 0x%llx", (unsigned long long)d.named);
	} else {
		CHECK((d.named >> AQL_ARG_HIDDEN_HEAP_V1 & 1) &&
		      d.value[AQL_ARG_HIDDEN_HEAP_V1] == f->hidden.heap_v1 &&
		      (d.named >> AQL_ARG_HIDDEN_QUEUE_PTR & 1) &&
		      d.value[AQL_ARG_HIDDEN_QUEUE_PTR] == f->hidden.queue_ptr &&
		      d.value[AQL_ARG_HIDDEN_BLOCK_COUNT_X] == 2 &&
		      d.value[AQL_ARG_HIDDEN_GROUP_SIZE_X] == 64,
		      "the hook: heap 0x%llx, queue 0x%llx, blocks %llu, group %llu",
		      (unsigned long long)d.value[AQL_ARG_HIDDEN_HEAP_V1],
		      (unsigned long long)d.value[AQL_ARG_HIDDEN_QUEUE_PTR],
		      (unsigned long long)d.value[AQL_ARG_HIDDEN_BLOCK_COUNT_X],
		      (unsigned long long)d.value[AQL_ARG_HIDDEN_GROUP_SIZE_X]);
	}
}

/* Zeros: no heap, no hostcall buffer; accepted (only a call would fault). */
static void check_zeros(struct fx *f)
{
	aql_kernarg_hidden keep = f->hidden;
	struct kfdemu_dispatch d;

	f->hidden.heap_v1 = f->hidden.hostcall_buffer = 0;
	CHECK(run(f, NULL, &d) == 0 && f->out[0] == 0 && f->out[1] == 0,
	      "zeros: %s, read 0x%llx 0x%llx", d.why, (unsigned long long)f->out[0],
	      (unsigned long long)f->out[1]);
	CHECK(d.value[AQL_ARG_HIDDEN_HOSTCALL_BUFFER] == 0, "the hook's zero hostcall buffer");
	f->hidden = keep;
}

/* The heap's rules that a GPU would not fault on, one at a time (V5). */
static void check_heap(struct fx *f, struct heap *h)
{
	void *host = NULL;

	/* host memory the GPU maps: not VRAM */
	CHECK_OK(aql_mem_alloc(pool, HEAP_BYTES, 4096, &host));
	if (host) {
		memset(host, 0, HEAP_BYTES);
		f->hidden.heap_v1 = va(host);
		refused(f, NULL, 32, "hidden_heap_v1", "not in VRAM");
		aql_mem_free(host);
	}
	f->hidden.heap_v1 = h->va;
	heap_fields(h, h->next + 4096, h->end + 4096, h->start + 4096);
	refused(f, NULL, 32, "hidden_heap_v1", "not 2 MiB aligned");
	heap_fields(h, h->next, h->start + 3 * MIB, h->start);
	refused(f, NULL, 32, "hidden_heap_v1", "not 2 MiB aligned");
	heap_fields(h, h->start - SLAB, h->end, h->start);
	refused(f, NULL, 32, "hidden_heap_v1", "below initial_slabs_start");
	heap_fields(h, h->start, h->start, h->end);
	refused(f, NULL, 32, "hidden_heap_v1", "above initial_slabs_end");
	/* past the end: every initial slab handed out, as waves leave it */
	heap_fields(h, h->end + SLAB, h->end, h->start);
	check_runs(f);
	/* all bits 0 is a valid heap: no initial slabs */
	heap_fields(h, 0, 0, 0);
	check_runs(f);
	heap_fields(h, h->next, h->end, h->start);
}

/* The hostcall buffer's rules that a GPU would not fault on (V4, V5). */
static void check_hostcall(struct fx *f, struct hostcall *c)
{
	uint64_t mailbox = c->doorbell->event_mailbox_ptr;
	uint32_t event_id = c->doorbell->event_id;
	void *vram = NULL;

	CHECK_OK(aql_agent_mem_alloc(&amd->base, 4096, &vram));
	f->hidden.hostcall_buffer = va(vram);
	refused(f, NULL, 32, "hidden_hostcall_buffer", "the buffer at 0x");
	f->hidden.hostcall_buffer = va(c->buf);
	hc_prefix(c, hc_headers(c), hc_payloads(c), va(c->doorbell), c->n);
	refused(f, NULL, 32, "hidden_hostcall_buffer", "not a power of two");
	hc_prefix(c, hc_headers(c), hc_payloads(c), va(c->doorbell), c->n / 2 - 1);
	refused(f, NULL, 32, "hidden_hostcall_buffer", "resident waves");
	hc_prefix(c, va(vram), hc_payloads(c), va(c->doorbell), c->n - 1);
	refused(f, NULL, 32, "hidden_hostcall_buffer", "the headers at");
	hc_valid(c);
	c->doorbell->event_mailbox_ptr = 0;
	refused(f, NULL, 32, "hidden_hostcall_buffer", "wake no one");
	c->doorbell->event_mailbox_ptr = mailbox;
	c->doorbell->event_id = 0;
	refused(f, NULL, 32, "hidden_hostcall_buffer", "wake no one");
	c->doorbell->event_id = event_id;
	aql_agent_mem_free(&amd->base, vram);
}

/*
 * One rule whose breach a GPU would fault on, per process: after a VM
 * fault KFD keeps the process's queues on that GPU evicted (the
 * emulation's CPs stop), so meson runs this once per fault. bad is a heap
 * whose initial slabs lie where nothing is mapped.
 */
static void check_fault(struct fx *f, const char *fault, const struct heap *bad,
			struct hostcall *c)
{
	if (!strcmp(fault, "heap")) {
		f->hidden.heap_v1 = 0x1000;
		refused(f, NULL, FAULT, "hidden_heap_v1", "not all mapped");
	} else if (!strcmp(fault, "slabs")) {
		f->hidden.heap_v1 = bad->va;
		refused(f, NULL, FAULT, "hidden_heap_v1",
			"initial slabs [0x200000, 0x400000) not mapped");
	} else if (!strcmp(fault, "buffer")) {
		f->hidden.hostcall_buffer = 0x1000;
		refused(f, NULL, FAULT, "hidden_hostcall_buffer", "the buffer [0x1000");
	} else if (!strcmp(fault, "payloads")) {
		hc_prefix(c, hc_headers(c), SLAB, va(c->doorbell), c->n - 1);
		refused(f, NULL, FAULT, "hidden_hostcall_buffer", "the payloads [0x200000");
	} else if (!strcmp(fault, "doorbell")) {
		hc_prefix(c, hc_headers(c), hc_payloads(c), 0x1000, c->n - 1);
		refused(f, NULL, FAULT, "hidden_hostcall_buffer", "doorbell signal 0x1000");
	} else {
		th_stop("--fault: heap, slabs, buffer, payloads or doorbell");
	}
}

static void fixture_open(struct fx *f, const char *path, int v4, const struct heap *h,
			 const struct hostcall *c)
{
	printf("%s: %s\n", v4 ? "V4" : "V5", path);
	f->v4 = v4;
	CHECK_OK(aql_code_object_load_file(&amd->base, path, NULL, &f->co));
	if (f->co)
		CHECK_OK(aql_code_object_kernel(f->co, "hidden_read", &f->k));
	if (!f->k)
		th_stop("no hidden_read");
	CHECK(names(f, AQL_ARG_HIDDEN_HOSTCALL_BUFFER) &&
	      names(f, AQL_ARG_HIDDEN_HEAP_V1) == !v4 && names(f, AQL_ARG_HIDDEN_QUEUE_PTR) == !v4,
	      "the fixture's metadata names the hidden arguments its version has");
	CHECK_OK(aql_mem_alloc(pool, 64, 64, (void **)&f->out));
	CHECK_OK(aql_mem_alloc(pool, f->k->kernarg_size, f->k->kernarg_align,
			       (void **)&f->kernarg));
	if (!f->out || !f->kernarg)
		th_stop("no host memory");
	f->hidden.hostcall_buffer = va(c->buf);
	f->hidden.heap_v1 = h->va;
}

/*
 * A typed launch: the agent's own device heap and hostcall buffer
 * (aql/kfd/hostcall.c) go into the kernarg block, and pass the CP's
 * checks of both as a GPU using them would (kernels.c).
 */
static void check_typed(struct fx *f)
{
	aql_queue_config qc = { .size = 64, .full_timeout_ns = TH_TIMEOUT_NS };
	aql_launch_config c = { .grid = { 128 } };
	aql_queue *q = NULL;
	aql_buf_u64 out = { 0 };
	aql_completion done;
	aql_kernarg_hidden want = { 0 };
	struct kfdemu_dispatch d = { 0 };
	const uint64_t *r;

	CHECK_OK(aql_queue_create(&amd->base, &qc, &q));
	CHECK_OK(aql_buf_u64_create(3, AQL_OUT, NULL, &out));
	if (!q || !out.raw)
		th_stop("no queue or buffer");
	CHECK_OK(AQL_LAUNCH(q, f->k, &c, &done, AQL_ARG(out.raw), AQL_ARG((uint32_t)f->v4)));
	CHECK_OK(th_done(aql_completion_wait(done, TH_TIMEOUT_NS)));
	CHECK_OK(aql_buf_wait(out.raw, TH_TIMEOUT_NS));
	CHECK_OK(aql_queue_hidden_args(q, f->k, &want));
	CHECK(last_fn("hidden_read", &d) == 0 && d.cp_code == 0, "the typed dispatch: CP code %u, %s",
	      d.cp_code, d.why);
	r = aql_buf_u64_data_const(out);
	CHECK(want.hostcall_buffer && (f->v4 || want.heap_v1), "the agent's heap 0x%llx, hostcall 0x%llx",
	      (unsigned long long)want.heap_v1, (unsigned long long)want.hostcall_buffer);
	CHECK(r && r[0] == want.hostcall_buffer && r[1] == (f->v4 ? 0 : want.heap_v1) &&
	      r[2] == (f->v4 ? 0 : (uint64_t)(uintptr_t)q->amd),
	      "the typed launch's kernel read 0x%llx 0x%llx 0x%llx", r ? (unsigned long long)r[0] : 0,
	      r ? (unsigned long long)r[1] : 0, r ? (unsigned long long)r[2] : 0);
	CHECK_OK(aql_buf_destroy(out.raw));
	CHECK_OK(aql_queue_destroy(q));
}

static void check_fixture(struct fx *f, struct heap *h, struct hostcall *c)
{
	check_runs(f);
	check_zeros(f);
	if (f->v4) {
		refused(f, spoil_global_offset, 32, "hidden_global_offset_x",
			"not 0x0 (none is passed)");
	} else {
		refused(f, spoil_queue_ptr, 32, "hidden_queue_ptr", "(the queue's amd_queue_t)");
		refused(f, spoil_block_count, 32, "hidden_block_count_x",
			"is 0x3, not 0x2 (the packet's)");
		check_heap(f, h);
	}
	check_hostcall(f, c);
	check_typed(f);
}

static void fixture_close(struct fx *f)
{
	aql_mem_free(f->out);
	aql_mem_free(f->kernarg);
	CHECK_OK(aql_code_object_destroy(f->co));
}

int main(int argc, char **argv)
{
	const char *path[2] = { NULL, NULL };	/* V5, V4 */
	const char *fault = NULL;
	aql_agent *agent = NULL;
	aql_mem_pool_config pc = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
				   .agent_count = 1 };
	struct heap h = { 0 }, bad = { 0 };
	struct hostcall c = { 0 };
	struct fx f[2] = { { 0 } };

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--v5"))
			path[0] = argv[i + 1];
		else if (!strcmp(argv[i], "--v4"))
			path[1] = argv[i + 1];
		else if (!strcmp(argv[i], "--fault"))
			fault = argv[i + 1];
		else if (!strcmp(argv[i], "--missing"))
			printf("note: not built: %s\n", argv[i + 1]);
	}
	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	amd = (struct kfd_agent *)agent;
	*(void **)&last_fn = th_kfdemu_sym("kfdemu_dispatch_last");
	*(void **)&bo_at_fn = th_kfdemu_sym("kfdemu_bo_at");
	CHECK(last_fn(NULL, &(struct kfdemu_dispatch){ 0 }) == -1 && last_fn(NULL, NULL) == -1,
	      "a dispatch recorded before any ran");
	pc.agents = &agent;
	CHECK_OK(aql_mem_pool_create(&pc, &pool));
	if (!pool)
		th_stop("no pool");
	printf("%s: %u CUs of %u waves\n", amd->node->gfx, amd->node->cus, amd->node->waves_per_cu);
	heap_make(&h);
	heap_make(&bad);
	/* slabs at 2 MiB: below any host mapping, so never a BO's */
	CHECK(bo_at_fn(SLAB, &(struct kfdemu_bo){ 0 }) != 0, "a BO at 2 MiB");
	heap_fields(&bad, SLAB, 2 * SLAB, SLAB);
	hc_make(&c);
	for (int i = 0; i < 2; i++)
		if (path[i])
			fixture_open(&f[i], path[i], i, &h, &c);
	for (int i = 0; i < 2; i++)
		if (path[i] && fault)
			check_fault(&f[i], fault, &bad, &c);
		else if (path[i])
			check_fixture(&f[i], &h, &c);
	for (int i = 0; i < 2; i++)
		if (path[i])
			fixture_close(&f[i]);
	if (!path[0] && !path[1])
		printf("note: no fixture built here: only the hook's empty state was checked\n");
	aql_signal_destroy(c.doorbell);
	aql_mem_free(c.buf);
	aql_agent_mem_free(agent, h.mem);
	aql_agent_mem_free(agent, h.slabs);
	aql_agent_mem_free(agent, bad.mem);
	aql_agent_mem_free(agent, bad.slabs);
	CHECK_OK(aql_mem_pool_destroy(pool));
	CHECK(aql_agent_destroy(agent) == AQL_OK, "destroy: %s", aql_error_message());
	return th_finish();
}
