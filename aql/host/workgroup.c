/* SPDX-License-Identifier: MIT */
/*
 * Work-items as fibers. Each work-item that reaches a barrier keeps its own
 * stack until the group finishes; one that returns gives its stack back, so
 * a kernel without barriers runs every work-item on one stack. Fibers use
 * ucontext; the sanitizers are told about every stack switch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "util/error.h"
#include "aql/host/workgroup.h"

#if defined(__SANITIZE_ADDRESS__)
#define AQL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AQL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define AQL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AQL_TSAN 1
#endif
#endif

#ifdef AQL_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
				     size_t *size_old);
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

enum fiber_state { FIBER_NEW, FIBER_AT_BARRIER, FIBER_DONE };

struct stack {
	void *base;		/* guard page first */
	void *tsan_fiber;
};

struct fiber {
	ucontext_t ctx;
	struct stack *stack;
	enum fiber_state state;
};

struct aql_wg_exec {
	uint32_t max_workitems;
	aql_host_workitem *items;
	struct fiber *fibers;
	struct stack *stacks;		/* max_workitems of them, mapped lazily */
	struct stack **free_stacks;
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
	ucontext_t sched;
	void *sched_tsan_fiber;
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
	e->fibers = calloc(max_workitems, sizeof(*e->fibers));
	e->stacks = calloc(max_workitems, sizeof(*e->stacks));
	e->free_stacks = calloc(max_workitems, sizeof(*e->free_stacks));
	if (!e->items || !e->fibers || !e->stacks || !e->free_stacks) {
		aql_wg_exec_destroy(e);
		return aql_fail(AQL_ERR_NOMEM, "work-group executor: no memory for %u work-items",
				max_workitems);
	}
	for (uint32_t i = 0; i < max_workitems; i++)
		e->free_stacks[i] = &e->stacks[max_workitems - 1 - i];
	e->nfree = max_workitems;
	*out = e;
	return AQL_OK;
}

void aql_wg_exec_destroy(struct aql_wg_exec *e)
{
	if (!e)
		return;
	for (uint32_t i = 0; e->stacks && i < e->max_workitems; i++) {
		if (e->stacks[i].base)
			munmap(e->stacks[i].base, STACK_SIZE);
#ifdef AQL_TSAN
		if (e->stacks[i].tsan_fiber)
			__tsan_destroy_fiber(e->stacks[i].tsan_fiber);
#endif
	}
	free(e->items);
	free(e->fibers);
	free(e->stacks);
	free(e->free_stacks);
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

static struct stack *take_stack(struct aql_wg_exec *e)
{
	struct stack *s = e->free_stacks[--e->nfree];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (!s->base) {
		s->base = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
		if (s->base == MAP_FAILED) {
			s->base = NULL;
			e->nfree++;
			return NULL;
		}
		/* A guard page turns a stack overflow into a fault, not corruption. */
		mprotect(s->base, page, PROT_NONE);
#ifdef AQL_TSAN
		s->tsan_fiber = __tsan_create_fiber(0);
#endif
	}
	return s;
}

/* Switch from the current context to to; bottom/size describe to's stack. */
static void switch_context(ucontext_t *from, ucontext_t *to, void *tsan_to,
			   const void *bottom, size_t size, int dying)
{
#ifdef AQL_ASAN
	void *fake = NULL;

	__sanitizer_start_switch_fiber(dying ? NULL : &fake, bottom, size);
#else
	(void)bottom, (void)size, (void)dying;
#endif
#ifdef AQL_TSAN
	__tsan_switch_to_fiber(tsan_to, 0);
#else
	(void)tsan_to;
#endif
	swapcontext(from, to);
#ifdef AQL_ASAN
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

static void to_scheduler(struct aql_wg_exec *e, struct fiber *f, int dying)
{
	switch_context(&f->ctx, &e->sched, e->sched_tsan_fiber, e->sched_stack_bottom,
		       e->sched_stack_size, dying);
}

static void fiber_main(void)
{
	struct aql_wg_exec *e = running_exec;
	struct fiber *f = &e->fibers[e->current];

#ifdef AQL_ASAN
	__sanitizer_finish_switch_fiber(NULL, &e->sched_stack_bottom, &e->sched_stack_size);
#endif
	aql_host_current_workitem = &e->items[e->current];
	e->kd->entry(e->kernarg);
	f->state = FIBER_DONE;
	to_scheduler(e, f, 1);
}

void aql_host_barrier(void)
{
	struct aql_wg_exec *e = running_exec;
	struct fiber *f;

	if (!e || !e->use_fibers) {
		/* One work-item, or a kernel that promised no barriers. */
		if (e && e->items[0].group_size[0] * e->items[0].group_size[1] *
			 e->items[0].group_size[2] > 1)
			e->fault = 1;
		return;
	}
	f = &e->fibers[e->current];
	f->state = FIBER_AT_BARRIER;
	to_scheduler(e, f, 0);
	aql_host_current_workitem = &e->items[e->current];
}

/* Out of line: getcontext() returns twice, which must not clobber the
 * scheduler loop's locals. */
static __attribute__((noinline)) int prepare_fiber(struct aql_wg_exec *e, struct fiber *f)
{
	f->stack = take_stack(e);
	if (!f->stack)
		return -1;
	getcontext(&f->ctx);
	f->ctx.uc_stack.ss_sp = f->stack->base;
	f->ctx.uc_stack.ss_size = STACK_SIZE;
	f->ctx.uc_link = NULL;
	makecontext(&f->ctx, fiber_main, 0);
	return 0;
}

static int run_fibers(struct aql_wg_exec *e, uint32_t n)
{
	uint32_t alive = n;

	for (uint32_t i = 0; i < n; i++)
		e->fibers[i].state = FIBER_NEW;
#ifdef AQL_TSAN
	e->sched_tsan_fiber = __tsan_get_current_fiber();
#endif
	/* Each round runs every live work-item up to its next barrier, so no
	 * work-item passes a barrier before all have reached it. */
	while (alive) {
		for (uint32_t i = 0; i < n; i++) {
			struct fiber *f = &e->fibers[i];

			if (f->state == FIBER_DONE)
				continue;
			if (f->state == FIBER_NEW && prepare_fiber(e, f))
				return -1;
			e->current = i;
			switch_context(&e->sched, &f->ctx,
				       f->stack->tsan_fiber, f->stack->base, STACK_SIZE, 0);
			if (f->state == FIBER_DONE) {
				e->free_stacks[e->nfree++] = f->stack;
				alive--;
			}
		}
	}
	return 0;
}

static void fill_items(struct aql_wg_exec *e, const aql_dispatch_packet *p,
		       const uint32_t gid[3], const uint32_t size[3], uint64_t dispatch_id)
{
	size_t priv = (p->private_segment_size + 15u) & ~(size_t)15u;
	uint32_t i = 0;

	for (uint32_t z = 0; z < size[2]; z++)
		for (uint32_t y = 0; y < size[1]; y++)
			for (uint32_t x = 0; x < size[0]; x++, i++)
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
	int ret = 0;

	for (int d = 0; d < 3; d++) {
		uint32_t groups = aql_wg_count(grid[d], wg[d]);

		gid[d] = (uint32_t)(rest % groups);
		rest /= groups;
		size[d] = grid[d] - gid[d] * wg[d] < wg[d] ? grid[d] - gid[d] * wg[d] : wg[d];
	}
	n = size[0] * size[1] * size[2];
	if (reserve(&e->group_segment, &e->group_capacity, p->group_segment_size + 16u) ||
	    reserve(&e->private_segment, &e->private_capacity,
		    (size_t)n * ((p->private_segment_size + 15u) & ~15u) + 16u))
		return -1;
	fill_items(e, p, gid, size, dispatch_id);
	e->kd = kd;
	e->kernarg = (const void *)(uintptr_t)p->kernarg_address;
	e->fault = 0;
	e->use_fibers = n > 1 && !(kd->flags & AQL_HOST_KD_NO_BARRIER);
	running_exec = e;
	if (e->use_fibers) {
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
