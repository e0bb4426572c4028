/* SPDX-License-Identifier: MIT */
/*
 * Work-items as fibers. A fiber is a stack and a context, made once per
 * executor and kept: it runs one work-item after another, so a dispatch
 * pays only for switches, never for making contexts. A work-item that
 * reaches a barrier keeps its fiber until it returns; one that returns
 * gives its fiber back to the next work-item, so a kernel without
 * barriers needs one fiber. On x86-64 a switch saves the callee-saved
 * registers itself; elsewhere it is swapcontext(), which also costs a
 * signal-mask system call. The sanitizers are told about every switch.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/error.h"
#include "util/sanitizer.h"
#include "aql/host/workgroup.h"

#ifdef AQL_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
				     size_t *size_old);
void __asan_unpoison_memory_region(const volatile void *addr, size_t size);
#endif
#ifdef AQL_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif

#define STACK_SIZE (256u << 10)	/* reserved, not committed: MAP_NORESERVE */

__thread const aql_host_workitem *aql_host_current_workitem;

const aql_host_workitem *aql_host_workitem_current(void)
{
	return aql_host_current_workitem;
}

/* Each fiber runs this loop; hidden, not static: x86-64 enters it from asm. */
void aql_fiber_start(void) __attribute__((visibility("hidden"), noreturn));

#if defined(__x86_64__)
/*
 * A context is the stack pointer of a suspended fiber. aql_fiber_switch
 * pushes the registers the SysV ABI makes callee-saved (rbx, rbp, r12-r15,
 * and the MXCSR and x87 control words), stores rsp in *from, loads to and
 * pops the same. Everything else is caller-saved, so the C caller has
 * already spilled it.
 */
struct fiber_ctx {
	void *sp;
};

void aql_fiber_switch(void **from, void *to) __attribute__((visibility("hidden")));
void aql_fiber_entry(void) __attribute__((visibility("hidden")));

__asm__(".pushsection .text\n"
	".globl aql_fiber_switch\n"
	".hidden aql_fiber_switch\n"
	".type aql_fiber_switch, @function\n"
	"aql_fiber_switch:\n"
	"	pushq %rbp\n"
	"	pushq %rbx\n"
	"	pushq %r12\n"
	"	pushq %r13\n"
	"	pushq %r14\n"
	"	pushq %r15\n"
	"	subq $8, %rsp\n"
	"	stmxcsr (%rsp)\n"
	"	fnstcw 4(%rsp)\n"
	"	movq %rsp, (%rdi)\n"
	"	movq %rsi, %rsp\n"
	"	ldmxcsr (%rsp)\n"
	"	fldcw 4(%rsp)\n"
	"	addq $8, %rsp\n"
	"	popq %r15\n"
	"	popq %r14\n"
	"	popq %r13\n"
	"	popq %r12\n"
	"	popq %rbx\n"
	"	popq %rbp\n"
	"	ret\n"
	".size aql_fiber_switch, .-aql_fiber_switch\n"
	/* A new fiber's first switch returns here, with rsp 16-byte aligned. */
	".globl aql_fiber_entry\n"
	".hidden aql_fiber_entry\n"
	".type aql_fiber_entry, @function\n"
	"aql_fiber_entry:\n"
	"	call aql_fiber_start\n"
	"	ud2\n"
	".size aql_fiber_entry, .-aql_fiber_entry\n"
	".popsection\n");

static void ctx_init(struct fiber_ctx *c, void *base, size_t size)
{
	/* What aql_fiber_switch pops: control words, six registers (zero, so
	 * that frame-pointer unwinding stops here), then the return address. */
	uint64_t *sp = (uint64_t *)(((uintptr_t)base + size - 16) & ~(uintptr_t)15) - 8;

	memset(sp, 0, 8 * sizeof(*sp));
	sp[0] = 0x1f80u | (uint64_t)0x037fu << 32;	/* MXCSR, x87 control: defaults */
	sp[7] = (uint64_t)(uintptr_t)aql_fiber_entry;
	c->sp = sp;
}

static inline void ctx_switch(struct fiber_ctx *from, struct fiber_ctx *to)
{
	aql_fiber_switch(&from->sp, to->sp);
}
#else
#include <ucontext.h>

struct fiber_ctx {
	ucontext_t uc;
};

static void ctx_init(struct fiber_ctx *c, void *base, size_t size)
{
	getcontext(&c->uc);
	c->uc.uc_stack.ss_sp = base;
	c->uc.uc_stack.ss_size = size;
	c->uc.uc_link = NULL;
	makecontext(&c->uc, aql_fiber_start, 0);
}

static inline void ctx_switch(struct fiber_ctx *from, struct fiber_ctx *to)
{
	swapcontext(&from->uc, &to->uc);
}
#endif

struct fiber {
	struct fiber_ctx ctx;
	void *base;		/* guard page first; NULL until first used */
};

enum item_state { ITEM_NEW, ITEM_AT_BARRIER, ITEM_DONE };

struct aql_wg_exec {
	uint32_t max_workitems;
	aql_host_workitem *items;
	uint8_t *state;			/* enum item_state, per work-item */
	struct fiber **item_fiber;	/* the fiber running each work-item */
	struct fiber *fibers;		/* max_workitems of them, made lazily */
	struct fiber **free_fibers;
	uint32_t nfree;
	void *group_segment;
	size_t group_capacity;
	void *private_segment;
	size_t private_capacity;
	/* The running group. */
	const aql_host_kernel_descriptor *kd;
	const void *kernarg;
	uint32_t current;
	int use_fibers;
	int fault;
	struct fiber_ctx sched;
	/*
	 * TSan: one fiber handle for all work-items. They run on this thread
	 * one at a time and every switch synchronises, so TSan would see them
	 * as one thread anyway; a handle per work-item costs TSan about 0.8 MB
	 * to make. Only the call stacks in a report can mix work-items.
	 */
	void *tsan_sched;
	void *tsan_items;
	const void *sched_stack_bottom;
	size_t sched_stack_size;
};

static __thread struct aql_wg_exec *running_exec;

aql_status aql_wg_exec_create(uint32_t max_workitems, struct aql_wg_exec **out)
{
	struct aql_wg_exec *e = calloc(1, sizeof(*e));

	if (!e)
		return aql_fail(AQL_ERR_NOMEM, "work-group executor: no memory");
	e->max_workitems = max_workitems;
	e->items = calloc(max_workitems, sizeof(*e->items));
	e->state = calloc(max_workitems, sizeof(*e->state));
	e->item_fiber = calloc(max_workitems, sizeof(*e->item_fiber));
	e->fibers = calloc(max_workitems, sizeof(*e->fibers));
	e->free_fibers = calloc(max_workitems, sizeof(*e->free_fibers));
	if (!e->items || !e->state || !e->item_fiber || !e->fibers || !e->free_fibers) {
		aql_wg_exec_destroy(e);
		return aql_fail(AQL_ERR_NOMEM, "work-group executor: no memory for %u work-items",
				max_workitems);
	}
	for (uint32_t i = 0; i < max_workitems; i++)
		e->free_fibers[i] = &e->fibers[max_workitems - 1 - i];
	e->nfree = max_workitems;
	*out = e;
	return AQL_OK;
}

/*
 * Fibers are suspended in their loop, not running: dropping them is safe.
 * ASan still holds the redzones of their live frames, and would report
 * whatever is mapped there next: clear them first.
 */
void aql_wg_exec_destroy(struct aql_wg_exec *e)
{
	if (!e)
		return;
	for (uint32_t i = 0; e->fibers && i < e->max_workitems; i++) {
		if (!e->fibers[i].base)
			continue;
#ifdef AQL_ASAN
		__asan_unpoison_memory_region(e->fibers[i].base, STACK_SIZE);
#endif
		munmap(e->fibers[i].base, STACK_SIZE);
	}
#ifdef AQL_TSAN
	if (e->tsan_items)
		__tsan_destroy_fiber(e->tsan_items);
#endif
	free(e->items);
	free(e->state);
	free(e->item_fiber);
	free(e->fibers);
	free(e->free_fibers);
	free(e->group_segment);
	free(e->private_segment);
	free(e);
}

/* Grow a scratch buffer to at least size bytes, 16-byte aligned. */
static int reserve(void **buf, size_t *capacity, size_t size)
{
	void *p;

	if (size <= *capacity)
		return 0;
	if (posix_memalign(&p, 64, size))
		return -1;
	free(*buf);
	*buf = p;
	*capacity = size;
	return 0;
}

/*
 * A free fiber; its stack and context are made on first use only. After a
 * group failed, the fibers of its work-items left at a barrier hold their
 * frames for good and are never free again, so the pool can run dry.
 */
static struct fiber *take_fiber(struct aql_wg_exec *e)
{
	struct fiber *f;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (!e->nfree)
		return NULL;
	f = e->free_fibers[--e->nfree];
	if (!f->base) {
		f->base = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
		if (f->base == MAP_FAILED) {
			f->base = NULL;
			e->nfree++;
			return NULL;
		}
		/* A guard page turns a stack overflow into a fault, not corruption. */
		mprotect(f->base, page, PROT_NONE);
		ctx_init(&f->ctx, f->base, STACK_SIZE);
	}
	return f;
}

/* Switch from the current context to to; bottom/size describe to's stack. */
static void switch_context(struct fiber_ctx *from, struct fiber_ctx *to, void *tsan_to,
			   const void *bottom, size_t size)
{
#ifdef AQL_ASAN
	void *fake = NULL;

	__sanitizer_start_switch_fiber(&fake, bottom, size);
#else
	(void)bottom, (void)size;
#endif
#ifdef AQL_TSAN
	__tsan_switch_to_fiber(tsan_to, 0);
#else
	(void)tsan_to;
#endif
	ctx_switch(from, to);
#ifdef AQL_ASAN
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

static void to_scheduler(struct aql_wg_exec *e, struct fiber *f)
{
	switch_context(&f->ctx, &e->sched, e->tsan_sched, e->sched_stack_bottom,
		       e->sched_stack_size);
}

/* A fiber's whole life: run the current work-item, report, repeat. Its
 * executor never changes, as it runs only on the executor's thread. */
void aql_fiber_start(void)
{
	struct aql_wg_exec *e = running_exec;

#ifdef AQL_ASAN
	__sanitizer_finish_switch_fiber(NULL, &e->sched_stack_bottom, &e->sched_stack_size);
#endif
	for (;;) {
		uint32_t i = e->current;

		aql_host_current_workitem = &e->items[i];
		e->kd->entry(e->kernarg);
		e->state[i] = ITEM_DONE;
		to_scheduler(e, e->item_fiber[i]);
	}
}

void aql_host_barrier(void)
{
	struct aql_wg_exec *e = running_exec;
	uint32_t i;

	if (!e || !e->use_fibers) {
		/* One work-item, or a kernel that promised no barriers. */
		if (e && e->items[0].group_size[0] * e->items[0].group_size[1] *
			 e->items[0].group_size[2] > 1)
			e->fault = 1;
		return;
	}
	i = e->current;
	e->state[i] = ITEM_AT_BARRIER;
	to_scheduler(e, e->item_fiber[i]);
	aql_host_current_workitem = &e->items[e->current];
}

static int run_fibers(struct aql_wg_exec *e, uint32_t n)
{
	uint32_t alive = n;

	memset(e->state, ITEM_NEW, n);
#ifdef AQL_TSAN
	if (!e->tsan_items)
		e->tsan_items = __tsan_create_fiber(0);
	e->tsan_sched = __tsan_get_current_fiber();
#endif
	/* Each round runs every live work-item up to its next barrier, so no
	 * work-item passes a barrier before all have reached it. */
	while (alive) {
		for (uint32_t i = 0; i < n; i++) {
			struct fiber *f;

			if (e->state[i] == ITEM_DONE)
				continue;
			if (e->state[i] == ITEM_NEW && !(e->item_fiber[i] = take_fiber(e)))
				return -1;
			f = e->item_fiber[i];
			e->current = i;
			switch_context(&e->sched, &f->ctx, e->tsan_items, f->base, STACK_SIZE);
			if (e->state[i] == ITEM_DONE) {
				e->free_fibers[e->nfree++] = f;
				alive--;
			}
		}
	}
	return 0;
}

/* The work-items of walk[] (all, or the first) of a group of size[]. */
static void fill_items(struct aql_wg_exec *e, const aql_dispatch_packet *p,
		       const uint32_t gid[3], const uint32_t size[3], const uint32_t walk[3],
		       uint64_t dispatch_id)
{
	size_t priv = (p->private_segment_size + 15u) & ~(size_t)15u;
	uint32_t i = 0;

	for (uint32_t z = 0; z < walk[2]; z++)
		for (uint32_t y = 0; y < walk[1]; y++)
			for (uint32_t x = 0; x < walk[0]; x++, i++)
				e->items[i] = (aql_host_workitem){
					.packet = p,
					.local_id = { x, y, z },
					.group_id = { gid[0], gid[1], gid[2] },
					.group_size = { size[0], size[1], size[2] },
					.group_segment = e->group_segment,
					.private_segment = (char *)e->private_segment + i * priv,
					.dispatch_id = dispatch_id,
				};
}

int aql_wg_run(struct aql_wg_exec *e, const aql_dispatch_packet *p,
	       const aql_host_kernel_descriptor *kd, uint64_t group_index,
	       uint64_t dispatch_id)
{
	const uint16_t *wg = &p->workgroup_size_x;
	const uint32_t *grid = &p->grid_size_x;
	uint32_t gid[3], size[3], n;
	uint64_t rest = group_index;
	int ret = 0, wg_fn;

	/* Per work-group, so no division that can be skipped: a dimension of
	 * one group takes none, and the index left once it is below the
	 * dimension's groups (x of every 1-D grid) none either. */
	for (int d = 0; d < 3; d++) {
		uint32_t groups = grid[d] <= wg[d] ? 1 : aql_wg_count(grid[d], wg[d]);

		if (rest < groups) {
			gid[d] = (uint32_t)rest;
			rest = 0;
		} else {
			gid[d] = (uint32_t)(rest % groups);
			rest /= groups;
		}
		size[d] = grid[d] - gid[d] * wg[d] < wg[d] ? grid[d] - gid[d] * wg[d] : wg[d];
	}
	n = size[0] * size[1] * size[2];
	wg_fn = kd->flags & AQL_HOST_KD_WORKGROUP;
	if (reserve(&e->group_segment, &e->group_capacity, p->group_segment_size + 16u) ||
	    reserve(&e->private_segment, &e->private_capacity,
		    (size_t)(wg_fn ? 1 : n) * ((p->private_segment_size + 15u) & ~15u) + 16u))
		return -1;
	/* A work-group function walks the work-items itself, from item 0. */
	fill_items(e, p, gid, size, wg_fn ? (uint32_t[3]){ 1, 1, 1 } : size, dispatch_id);
	e->kd = kd;
	e->kernarg = (const void *)(uintptr_t)p->kernarg_address;
	e->fault = 0;
	e->use_fibers = n > 1 && !(kd->flags & (AQL_HOST_KD_NO_BARRIER | AQL_HOST_KD_WORKGROUP));
	running_exec = e;
	if (wg_fn) {
		aql_host_current_workitem = &e->items[0];
		kd->workgroup_entry(e->kernarg, &e->items[0]);
	} else if (e->use_fibers) {
		ret = run_fibers(e, n);
	} else {
		for (uint32_t i = 0; i < n; i++) {
			aql_host_current_workitem = &e->items[i];
			kd->entry(e->kernarg);
		}
	}
	aql_host_current_workitem = NULL;
	running_exec = NULL;
	return ret ? ret : -e->fault;
}
