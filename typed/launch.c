/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/host_kernel.h>
#include <aql/launch.h>
#include <aql/lds.h>

#include "aql/agent_impl.h"
#include "util/error.h"
#include "aql/queue_impl.h"
#include "aql/timeline.h"
#include "loader/kernarg_impl.h"
#include "typed/buffer_impl.h"
#include "typed/launch_impl.h"
#include "graph/graph_impl.h"
#include "channel/channel_impl.h"
#include "channel/printf_impl.h"
#include "loader/type.h"

#define MAX_ARGS 64u
/* Packets a launch writes from the stack; more come from the heap. The
 * stack array stays small so that no frame needs stack-clash probes. */
#define STACK_PACKETS 16u

/* What a launch does with one buffer argument. */
struct use {
	aql_buf *buf;
	int writes;		/* the kernel may write it */
	int copy_in;		/* the agent needs the host's data */
	int first_use;		/* no earlier argument names the same buffer */
	uint32_t filled;	/* copy packets to the agent's copy */
	uint64_t fill_bytes;
	void *agent_ptr;
};

static const char *arg_name(const aql_kernel_arg *a)
{
	return a->name ? a->name : "(unnamed)";
}

static const char *arg_type(const aql_kernel_arg *a)
{
	return a->type_name ? a->type_name : aql_arg_kind_name(a->kind);
}

static const char *given(const aql_arg *v)
{
	switch (v->tag) {
	case AQL_ARGV_BUFFER:
		return "a buffer";
	case AQL_ARGV_SCALAR:
		return "a scalar";
	case AQL_ARGV_BYTES:
		return "by-value bytes";
	case AQL_ARGV_CHANNEL:
		return "a channel";
	case AQL_ARGV_PRINTF:
		return "the queue's printf channel";
	}
	return "an unknown argument tag";
}

/* Read-only unless nothing says so: a const pointee or a read_only access. */
static int may_write(const aql_kernel_arg *a)
{
	return !(a->flags & AQL_ARG_IS_CONST) && a->access != AQL_ACCESS_READ_ONLY &&
	       a->actual_access != AQL_ACCESS_READ_ONLY;
}

/* The metadata's size of a pointer argument, as kernarg placement needs it. */
static aql_status check_pointer_size(const aql_kernel *k, uint32_t i, const aql_kernel_arg *a,
				     uint32_t size)
{
	if (a->size == size)
		return AQL_OK;
	return aql_fail(AQL_ERR_INVALID_ARG, "kernel %s: argument %u (%s%s%s) is %u bytes, %u given",
			k->name, i, arg_name(a), a->type_name ? " " : "",
			a->type_name ? a->type_name : "", a->size, size);
}

static aql_status check_buffer(const aql_kernel *k, uint32_t i, const aql_kernel_arg *a,
			       const aql_arg *v, struct use *u)
{
	const aql_type *want = a->type, *have;
	enum aql_direction dir;
	int ptr = 0;

	if (v->tag != AQL_ARGV_BUFFER || !v->buf)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': expects a buffer (%s), got %s",
				k->name, i, arg_name(a), arg_type(a),
				v->tag == AQL_ARGV_BUFFER ? "a NULL buffer" : given(v));
	have = v->buf->root->type;
	dir = __atomic_load_n(&v->buf->dir, __ATOMIC_RELAXED);
	/* A struct registered after loading is looked up now. */
	if (!want && a->type_name)
		want = aql_type_of_name(a->type_name, &ptr);
	if (want && want != have)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': expects %s, got buffer '%s' of %s",
				k->name, i, arg_name(a), arg_type(a), v->buf->name, have->name);
	if (!want && a->pointee_align && a->pointee_align > have->align &&
	    a->pointee_align % have->align == 0)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': expects %u-byte aligned elements, got buffer '%s' of %s (%u-byte aligned)",
				k->name, i, arg_name(a), a->pointee_align, v->buf->name, have->name,
				have->align);
	u->buf = v->buf;
	u->filled = 0;
	u->writes = may_write(a);
	if (dir == AQL_IN && u->writes)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s' (%s) may be written by the kernel, but buffer '%s' is AQL_IN (read-only); make it AQL_INOUT or declare the parameter const",
				k->name, i, arg_name(a), arg_type(a), v->buf->name);
	u->copy_in = dir != AQL_OUT || !u->writes;
	return check_pointer_size(k, i, a, sizeof(void *));
}

/*
 * An integer of the other signedness is taken when its value means the
 * same in the parameter's type (AQL_ARG(1000) for a uint32_t); a negative
 * value for an unsigned parameter, or one past the signed maximum for a
 * signed parameter, would change meaning and is refused with the cast
 * that says it is meant. Sizes are equal here.
 */
static aql_status check_sign(const aql_kernel *k, uint32_t i, const aql_kernel_arg *a,
			     const aql_arg *v)
{
	const aql_type *want = a->type;
	uint64_t sign_bit = 1ull << (v->size * 8 - 1);

	if (want->cls == AQL_TYPE_UNSIGNED && v->type->cls == AQL_TYPE_SIGNED && v->v.i < 0)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s' is %s; %lld is an %s: pass (%s)x if the wrap-around is meant",
				k->name, i, arg_name(a), want->name, (long long)v->v.i,
				v->type->name, want->name);
	if (want->cls == AQL_TYPE_SIGNED && v->type->cls == AQL_TYPE_UNSIGNED &&
	    v->v.u >= sign_bit)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s' is %s; %llu is a %s past its maximum: pass (%s)x if the wrap-around is meant",
				k->name, i, arg_name(a), want->name, (unsigned long long)v->v.u,
				v->type->name, want->name);
	return AQL_OK;
}

static aql_status check_value(const aql_kernel *k, uint32_t i, const aql_kernel_arg *a,
			      const aql_arg *v)
{
	const aql_type *want = a->type;

	if (v->tag != AQL_ARGV_SCALAR && v->tag != AQL_ARGV_BYTES)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': expects a %u-byte value (%s), got %s",
				k->name, i, arg_name(a), a->size, arg_type(a), given(v));
	if (v->tag == AQL_ARGV_SCALAR && (!v->type || v->size != v->type->size || v->size > 8))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': a scalar argument needs a built-in type and its size (make it with AQL_ARG)",
				k->name, i, arg_name(a));
	if (v->size != a->size || (v->tag == AQL_ARGV_BYTES && !v->bytes))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': expects %s (%u bytes), got %s%s (%u bytes)",
				k->name, i, arg_name(a), arg_type(a), a->size,
				v->type ? v->type->name : "bytes", v->bytes || v->type ? "" : " (NULL)",
				v->size);
	if (v->tag == AQL_ARGV_SCALAR && want &&
	    (want->cls == AQL_TYPE_FLOAT) != (v->type->cls == AQL_TYPE_FLOAT))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': expects %s, got %s",
				k->name, i, arg_name(a), arg_type(a), v->type->name);
	if (v->tag == AQL_ARGV_SCALAR && want && !(a->flags & AQL_ARG_SIGN_UNKNOWN))
		return check_sign(k, i, a, v);
	return AQL_OK;
}

/*
 * A parameter declared aql_channel_dev *. One whose pointee is a registered
 * element type (a->type, resolved when the metadata was read) is a buffer:
 * that test spares every buffer argument a string search.
 */
static int is_channel(const aql_kernel_arg *a)
{
	return !a->type && a->type_name && strstr(a->type_name, "aql_channel_dev");
}

static aql_status check_channel(const aql_kernel *k, uint32_t i, const aql_kernel_arg *a,
				const aql_arg *v, aql_agent *agent)
{
	if (v->tag != AQL_ARGV_CHANNEL)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': expects a channel (%s), got %s",
				k->name, i, arg_name(a), arg_type(a), given(v));
	if (!v->bytes)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': a NULL channel", k->name, i, arg_name(a));
	if (a->type_name && !is_channel(a))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': expects %s, got a channel (declare it aql_global aql_channel_dev *)",
				k->name, i, arg_name(a), arg_type(a));
	if (aql_channel_agent(v->bytes) != agent)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' argument %u '%s': the channel was created for another agent",
				k->name, i, arg_name(a));
	return check_pointer_size(k, i, a, v->size);
}

static aql_status check_args(const aql_kernel *k, const aql_arg *args, uint32_t n,
			     aql_agent *agent, struct use *uses, uint32_t *nuses)
{
	const aql_kernel_metadata *md = k->metadata;
	aql_status st;

	if (n != k->explicit_arg_count)
		return aql_fail(AQL_ERR_INVALID_ARG, "kernel '%s' takes %u argument(s), %u given",
				k->name, k->explicit_arg_count, n);
	if (n > MAX_ARGS)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' has %u arguments; typed launches take at most %u",
				k->name, n, MAX_ARGS);
	/* The loader checked these of its kernels; one built by hand may break them. */
	if (n > md->arg_count)
		return aql_fail(AQL_ERR_INVALID_ARG, "kernel '%s': %u explicit arguments, %u in its metadata",
				k->name, n, md->arg_count);
	for (uint32_t i = 0; i < md->arg_count; i++)
		if (md->args[i].offset > k->kernarg_size ||
		    md->args[i].size > k->kernarg_size - md->args[i].offset)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"kernel %s: argument %u lies outside its kernarg segment",
					k->name, i);
	*nuses = 0;
	for (uint32_t i = 0; i < n; i++) {
		const aql_kernel_arg *a = &md->args[i];

		switch (a->kind) {
		case AQL_ARG_GLOBAL_BUFFER:
			if (args[i].tag == AQL_ARGV_CHANNEL || is_channel(a)) {
				st = check_channel(k, i, a, &args[i], agent);
				if (st != AQL_OK)
					return st;
				break;
			}
			st = check_buffer(k, i, a, &args[i], &uses[*nuses]);
			if (st != AQL_OK)
				return st;
			/* A buffer named twice moves once, for both uses. */
			uses[*nuses].first_use = 1;
			for (uint32_t j = 0; j < *nuses; j++) {
				if (uses[j].buf != args[i].buf || !uses[j].first_use)
					continue;
				uses[j].writes |= uses[*nuses].writes;
				uses[j].copy_in |= uses[*nuses].copy_in;
				uses[*nuses].first_use = 0;
			}
			(*nuses)++;
			break;
		case AQL_ARG_BY_VALUE:
			st = check_value(k, i, a, &args[i]);
			if (st != AQL_OK)
				return st;
			break;
		default:
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"kernel '%s' argument %u '%s': kind %s is not supported by typed launches",
					k->name, i, arg_name(a), aql_arg_kind_name(a->kind));
		}
	}
	return AQL_OK;
}

aql_status aql_launch_check_arg(const aql_kernel *k, uint32_t i, const aql_arg *v,
				aql_agent *agent, int *writes, int *copy_in)
{
	const aql_kernel_arg *a = &k->metadata->args[i];
	struct use u = { 0 };
	aql_status st;

	*writes = *copy_in = 0;
	if (a->kind == AQL_ARG_BY_VALUE)
		return check_value(k, i, a, v);
	if (a->kind != AQL_ARG_GLOBAL_BUFFER)
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"kernel '%s' argument %u '%s': kind %s is not supported by typed launches",
				k->name, i, arg_name(a), aql_arg_kind_name(a->kind));
	if (v->tag == AQL_ARGV_CHANNEL || is_channel(a))
		return check_channel(k, i, a, v, agent);
	st = check_buffer(k, i, a, v, &u);
	*writes = u.writes;
	*copy_in = u.copy_in;
	return st;
}

/*
 * A CPU agent runs one work-group on one worker. A work-group function's
 * group is one call: the default is the largest allowed. Other kernels run
 * each work-item as a fiber with a stack mapping of its own, so they keep
 * wg[0] (at most 256). Either way small enough that every worker gets a
 * group (a 256-item grid on two workers is two groups of 128), never
 * below one work-item.
 */
static void cpu_spread(const aql_kernel *k, const aql_agent_info *info, uint32_t limit,
		       const uint32_t grid[3], uint32_t wg[3])
{
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)k->kernel_object;
	uint64_t rows = (uint64_t)grid[1] * grid[2], parts, most;

	if (info->kind != AQL_AGENT_CPU)
		return;
	/* Each group costs a call and its set-up: take the largest. */
	if (kd->magic == AQL_HOST_KD_MAGIC && (kd->flags & AQL_HOST_KD_WORKGROUP))
		wg[0] = grid[0] < limit ? grid[0] : limit;
	if (info->compute_units < 2 || rows >= info->compute_units)
		return;
	parts = (info->compute_units + rows - 1) / rows;
	most = (grid[0] + parts - 1) / parts;
	if (most < wg[0])
		wg[0] = most ? (uint32_t)most : 1;
}

/* The work-group size: given, required by the kernel, or the largest of
 * 256, 128, 64 that both the kernel and the agent allow, but no more than
 * grid x: CUDA runs whole blocks, so a larger group would run work-items
 * past the grid. A CPU agent's is cpu_spread's. */
static aql_status geometry(const aql_kernel *k, const aql_launch_config *c,
			   const aql_agent_info *info, aql_dispatch_packet *d)
{
	const aql_kernel_metadata *md = k->metadata;
	uint32_t grid[3] = { c->grid[0], c->grid[1] ? c->grid[1] : 1, c->grid[2] ? c->grid[2] : 1 };
	uint32_t wg[3] = { c->workgroup[0], c->workgroup[1], c->workgroup[2] };
	uint32_t limit = info->max_workgroup_size;
	uint64_t group;

	if (md->max_flat_workgroup_size && md->max_flat_workgroup_size < limit)
		limit = md->max_flat_workgroup_size;
	if (!grid[0])
		return aql_fail(AQL_ERR_INVALID_ARG, "kernel '%s': grid x is 0", k->name);
	if (!wg[0] && md->reqd_workgroup_size[0]) {
		memcpy(wg, md->reqd_workgroup_size, sizeof(wg));
	} else if (!wg[0]) {
		wg[0] = limit >= 256 ? 256 : limit >= 128 ? 128 : limit >= 64 ? 64 : limit;
		if (grid[0] < wg[0])
			wg[0] = grid[0];
		wg[1] = wg[2] = 1;
		cpu_spread(k, info, limit, grid, wg);
	}
	for (int i = 1; i < 3; i++)
		if (!wg[i])
			wg[i] = 1;
	group = (uint64_t)wg[0] * wg[1] * wg[2];
	for (int i = 0; i < 3; i++)
		if (wg[i] > info->max_workgroup_dim[i])
			return aql_fail(AQL_ERR_INVALID_ARG,
					"kernel '%s': work-group %ux%ux%u: dimension %d exceeds the agent's limit %u",
					k->name, wg[0], wg[1], wg[2], i, info->max_workgroup_dim[i]);
	if (group > limit)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s': work-group %ux%ux%u has %" PRIu64 " work-items; the limit is %u (%s)",
				k->name, wg[0], wg[1], wg[2], group, limit,
				limit == md->max_flat_workgroup_size ? "the kernel's max_flat_workgroup_size"
								     : "the agent's maximum");
	if (md->reqd_workgroup_size[0] &&
	    memcmp(wg, md->reqd_workgroup_size, sizeof(wg)))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s': work-group %ux%ux%u differs from its reqd_work_group_size %ux%ux%u",
				k->name, wg[0], wg[1], wg[2], md->reqd_workgroup_size[0],
				md->reqd_workgroup_size[1], md->reqd_workgroup_size[2]);
	for (int i = 0; md->uniform_work_group_size == 1 && i < 3; i++)
		if (grid[i] % wg[i])
			return aql_fail(AQL_ERR_INVALID_ARG,
					"kernel '%s' needs uniform work-groups: grid %u is not a multiple of work-group %u in dimension %d",
					k->name, grid[i], wg[i], i);
	d->setup = grid[2] > 1 ? 3 : grid[1] > 1 ? 2 : 1;
	d->workgroup_size_x = (uint16_t)wg[0];
	d->workgroup_size_y = (uint16_t)wg[1];
	d->workgroup_size_z = (uint16_t)wg[2];
	d->grid_size_x = grid[0];
	d->grid_size_y = grid[1];
	d->grid_size_z = grid[2];
	return AQL_OK;
}

/* Dynamic LDS starts where aql_dynamic_lds() puts it: the static size
 * rounded up, as aql/lds.h lays it out. */
static aql_status lds(const aql_kernel *k, const aql_launch_config *c,
		      const aql_agent_info *info, aql_dispatch_packet *d)
{
	uint32_t total = k->group_segment_size;
	aql_status st;

	if (c->dynamic_lds) {
		st = aql_lds_group_size(k, c->dynamic_lds, &total);
		if (st != AQL_OK)
			return st;
	}
	if (total > info->max_group_segment_size)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s': LDS of %u bytes (%u static + %u dynamic) exceeds the agent's %u",
				k->name, total, k->group_segment_size, c->dynamic_lds,
				info->max_group_segment_size);
	if (k->private_segment_size > info->max_private_segment_size)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s': %u bytes of private segment per work-item exceed the agent's %u",
				k->name, k->private_segment_size, info->max_private_segment_size);
	d->group_segment_size = total;
	d->private_segment_size = k->private_segment_size;
	return AQL_OK;
}

/*
 * The kernarg segment. check_args() has matched every explicit argument's
 * size with the metadata's, whose offsets the loader checked against the
 * segment, and geometry() and lds() made the packet: so the fill needs
 * none of aql_kernarg_build()'s checks again.
 */
static void fill_kernarg(const aql_kernel *k, const aql_dispatch_packet *d, const aql_arg *args,
			 uint32_t n, const struct use *uses, const aql_kernarg_hidden *hidden,
			 void *kernarg)
{
	const aql_kernel_arg *a = k->metadata->args;
	uint8_t *bytes = kernarg;
	uint32_t u = 0;

	memset(bytes, 0, k->kernarg_size);
	for (uint32_t i = 0; i < n; i++) {
		const void *src = args[i].tag == AQL_ARGV_BUFFER ? (const void *)&uses[u++].agent_ptr
				: args[i].tag == AQL_ARGV_BYTES ? args[i].bytes : args[i].v.raw;

		aql_kernarg_copy(bytes + a[i].offset, src, a[i].size);
	}
	if (k->metadata->arg_count > n)
		aql_kernarg_fill_hidden(k, d, hidden, kernarg);
}

/*
 * Under both locks, with the kernarg segment taken: plan, write and record
 * the launch. Whatever can fail does so before any packet is written.
 * packets[pre] holds the dispatch packet's geometry, made there rather than
 * copied: a copy would load it right after its narrow stores, which stalls
 * (no store forwarding). The packets that go before it, at most pre, end
 * up right below it.
 */
static aql_status submit(aql_queue *queue, struct aql_timeline *t, const aql_kernel *k,
			 const aql_launch_config *c, const aql_arg *args, uint32_t n,
			 struct use *uses, uint32_t nuses, aql_packet *packets, uint32_t pre,
			 const aql_kernarg_hidden *hidden, void *kernarg, aql_completion *done)
{
	aql_dispatch_packet *d = &packets[pre].dispatch;
	struct aql_queue_impl *q = aql_queue_impl(queue);
	/* Copies' kernarg memory follows the kernel's (aql_launch sized it). */
	unsigned char *copy_args = (unsigned char *)kernarg +
				   ((k->kernarg_size + AQL_KERNARG_ALIGN - 1) & ~(AQL_KERNARG_ALIGN - 1));
	struct aql_copy_plan in = { .agent = q->agent, .out = packets, .args = copy_args };
	uint32_t np, ndeps, ins;
	int moving = 0;		/* a buffer has storage of its own on the agent */
	aql_completion fin;
	aql_status st;

	for (uint32_t i = 0; i < nuses; i++) {
		st = aql_buf_check(uses[i].buf, queue, uses[i].writes, c->after, c->after_count);
		if (st == AQL_OK)
			st = aql_buf_bind(uses[i].buf, q->agent, &uses[i].agent_ptr);
		if (st == AQL_OK)
			st = aql_buf_reserve(uses[i].buf, nuses);
		if (st != AQL_OK)
			return st;
		moving |= !uses[i].buf->root->unified;
	}
	in.n = ndeps = c->after_count ? aql_timeline_deps(t, c->after, c->after_count, packets) : 0;
	for (uint32_t i = 0; moving && i < nuses; i++) {
		uint32_t before = in.n;
		uint64_t bytes = in.bytes;

		if (uses[i].copy_in && uses[i].first_use && !uses[i].buf->root->unified &&
		    (st = aql_buf_plan_in(uses[i].buf, &in)) != AQL_OK)
			return st;
		uses[i].filled = in.n - before;
		uses[i].fill_bytes = in.bytes - bytes;
	}
	np = ins = in.n;
	if (ins != pre) {
		memmove(&packets[pre - ins], packets, ins * sizeof(*packets));
		packets += pre - ins;
	}
	d->header = aql_timeline_header(AQL_PACKET_KERNEL_DISPATCH);
	d->kernel_object = k->kernel_object;
	d->kernarg_address = (uint64_t)(uintptr_t)kernarg;
	np++;
	if (np > queue->size)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s': the launch needs %u packets; the queue holds %u",
				k->name, np, queue->size);
	aql_timeline_sign(t, packets, np);
	fill_kernarg(k, d, args, n, uses, hidden, kernarg);
	st = aql_timeline_emit(t, queue, packets, np, &fin);
	if (st != AQL_OK)
		return st;
	aql_timeline_kernarg_commit(t, t->packets);
	/* Capacity was reserved above: none of this fails. A fill counts as
	 * a write, so that no unordered reader sees the agent's copy early.
	 * What the kernel writes stays on the agent until the host asks. */
	for (uint32_t i = 0; i < nuses; i++) {
		struct aql_buf_root *r = uses[i].buf->root;

		if (!r->unified) {
			aql_buf_mark_current(uses[i].buf);
			if (uses[i].writes)
				aql_buf_mark_written(uses[i].buf);
			r->moves_to_agent += uses[i].filled;
			r->bytes_to_agent += uses[i].fill_bytes;
		}
		aql_buf_track(uses[i].buf, uses[i].writes || uses[i].filled, fin, k->name);
	}
	t->stats.launches++;
	t->stats.copies_in += ins - ndeps;
	t->stats.bytes_in += in.bytes;
	if (done)
		*done = fin;
	return AQL_OK;
}

aql_status aql_launch(aql_queue *queue, const aql_kernel *kernel,
		      const aql_launch_config *config, const aql_arg *args, uint32_t n,
		      aql_completion *done)
{
	struct use uses[MAX_ARGS];
	aql_arg own[MAX_ARGS];
	aql_channel *printf_ch;
	aql_packet stack[STACK_PACKETS], *packets = stack;
	aql_kernarg_hidden hidden;
	struct aql_timeline *t;
	uint32_t nuses = 0, pre, most;
	aql_agent *agent;
	size_t kernarg_size;
	void *kernarg;
	aql_status st;

	if (!queue || !kernel || !config || (n && !args))
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_launch: %s is NULL",
				!queue ? "queue" : !kernel ? "kernel" : !config ? "config" : "args");
	if (!kernel->kernel_object)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s' is not loaded (its code object was only opened)",
				kernel->name);
	if (config->after_count && !config->after)
		return aql_fail(AQL_ERR_INVALID_ARG, "kernel '%s': after_count %u with after NULL",
				kernel->name, config->after_count);
	if (config->after_count > AQL_TIMELINE_MAX_AFTER)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel '%s': %u dependencies; a launch takes at most %u",
				kernel->name, config->after_count, AQL_TIMELINE_MAX_AFTER);
	agent = aql_queue_impl(queue)->agent;
	/* More than MAX_ARGS: check_args() refuses them. */
	for (uint32_t i = 0; n <= MAX_ARGS && i < n; i++) {
		if (args[i].tag != AQL_ARGV_PRINTF)
			continue;
		/* The queue's printf channel, made now if this is its first use. */
		st = aql_printf_queue_channel(queue, agent, &printf_ch);
		if (st != AQL_OK)
			return st;
		memcpy(own, args, n * sizeof(*args));
		for (uint32_t j = i; j < n; j++)
			if (own[j].tag == AQL_ARGV_PRINTF)
				own[j] = aql_arg_channel(printf_ch);
		args = own;
		break;
	}
	st = check_args(kernel, args, n, agent, uses, &nuses);
	if (st != AQL_OK)
		return st;
	/* Before any lock: the first kernel that names the device heap or
	 * hostcall makes them, and may fail doing so. */
	if (kernel->metadata->arg_count > n &&
	    (st = aql_queue_hidden_args(queue, kernel, &hidden)) != AQL_OK)
		return st;
	st = aql_timeline_get(queue, &t);
	if (st != AQL_OK)
		return st;
	/* Binding a buffer to an agent whose memory is the host's makes it
	 * unified there (aql_buf_bind()): no copies. Counted from the agent,
	 * not from where the buffers are now, which another thread may change
	 * before the lock is taken. */
	pre = config->after_count;
	if (!t->info.unified_memory)
		pre += nuses * AQL_BUF_MAX_PIECES;
	most = pre + 1;
	kernarg_size = kernel->kernarg_size;
	/* Room after the kernel's segment for the copies' arguments, where
	 * the agent's copies take some (submit()). */
	if (most > config->after_count + 1 && agent->copy_args)
		kernarg_size = ((kernarg_size + AQL_KERNARG_ALIGN - 1) & ~(AQL_KERNARG_ALIGN - 1)) +
			       (size_t)(most - config->after_count - 1) * agent->copy_args;
	if (most > STACK_PACKETS && !(packets = malloc(most * sizeof(*packets))))
		return aql_fail(AQL_ERR_NOMEM, "kernel '%s': %u packets: out of memory",
				kernel->name, most);
	packets[pre].dispatch = (aql_dispatch_packet){ 0 };
	st = geometry(kernel, config, &t->info, &packets[pre].dispatch);
	if (st == AQL_OK)
		st = lds(kernel, config, &t->info, &packets[pre].dispatch);
	if (st != AQL_OK) {
		if (packets != stack)
			free(packets);
		return st;
	}
	if (__builtin_expect(aql_graph_recording(queue, config->after, config->after_count), 0)) {
		st = aql_graph_record_launch(queue, kernel, config, args, n, &packets[pre].dispatch,
					     kernel->metadata->arg_count > n ? &hidden : NULL, done);
		if (packets != stack)
			free(packets);
		return st;
	}
	aql_lock_take(&t->lock);
	/* Taken before the buffer lock: it may wait for older launches. */
	st = aql_timeline_kernarg(t, queue, kernarg_size, &kernarg);
	if (st == AQL_OK) {
		if (nuses)
			aql_buf_lock();
		st = submit(queue, t, kernel, config, args, n, uses, nuses, packets, pre, &hidden,
			    kernarg, done);
		if (nuses)
			aql_buf_unlock();
		if (st != AQL_OK)
			aql_timeline_kernarg_cancel(t);
	}
	aql_lock_release(&t->lock);
	if (packets != stack)
		free(packets);
	return st;
}

aql_status aql_launch_get_stats(aql_queue *queue, aql_launch_stats *out)
{
	struct aql_timeline *t;

	if (!queue || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_launch_get_stats: queue and out are required");
	t = __atomic_load_n(&aql_queue_impl(queue)->timeline, __ATOMIC_ACQUIRE);
	if (!t) {
		*out = (aql_launch_stats){ 0 };
		return AQL_OK;
	}
	aql_lock_take(&t->lock);
	*out = t->stats;
	aql_lock_release(&t->lock);
	return AQL_OK;
}
