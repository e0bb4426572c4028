/* SPDX-License-Identifier: MIT */
/*
 * Typed buffers in MPI calls: datatypes from element types, derived
 * datatypes from layouts, and the blocking calls over the buffers' host
 * storage (staged back from a GPU agent by host access).
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <aql/mpi.h>

#include "mpi/mpi_impl.h"

aql_status aql_mpi_type(const aql_type *type, MPI_Datatype *out)
{
	static const struct {
		const aql_type *type;
		MPI_Datatype mpi;
	} map[] = {
		{ &aql_type_i8, MPI_INT8_T },	{ &aql_type_u8, MPI_UINT8_T },
		{ &aql_type_i16, MPI_INT16_T }, { &aql_type_u16, MPI_UINT16_T },
		{ &aql_type_i32, MPI_INT32_T }, { &aql_type_u32, MPI_UINT32_T },
		{ &aql_type_i64, MPI_INT64_T }, { &aql_type_u64, MPI_UINT64_T },
		{ &aql_type_f32, MPI_FLOAT },	{ &aql_type_f64, MPI_DOUBLE },
	};

	if (!type || !out)
		return aql_error_set(AQL_ERR_INVALID_ARG, "aql_mpi_type: type and out are required");
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (map[i].type == type) {
			*out = map[i].mpi;
			return AQL_OK;
		}
	}
	return aql_error_set(AQL_ERR_INVALID_ARG,
			     "aql_mpi_type: %s has no predefined MPI datatype (a struct: aql_mpi_describe() makes a contiguous one of its %u bytes)",
			     type->name, type->size);
}

aql_status aql_mpi_fail(int err, const char *call, const char *what, MPI_Comm comm, int peer,
			int tag)
{
	char text[MPI_MAX_ERROR_STRING];
	int len = 0, rank = -1, cls = 0;

	if (MPI_Error_string(err, text, &len) != MPI_SUCCESS)
		snprintf(text, sizeof(text), "MPI error %d", err);
	MPI_Error_class(err, &cls);
	MPI_Comm_rank(comm, &rank);
	return aql_error_set(AQL_ERR_SYSTEM, "%s of %s failed on rank %d (peer %d, tag %d): %s%s",
			     call, what, rank, peer, tag,
			     cls == MPI_ERR_TRUNCATE && !strstr(text, "MPI_ERR_TRUNCATE") ?
			     "MPI_ERR_TRUNCATE: " : "", text);
}

/* One element of type: predefined, or a new contiguous run of its bytes. */
static aql_status element_type(const aql_type *type, MPI_Datatype *out, int *derived)
{
	int err;

	*derived = 0;
	if (type->cls != AQL_TYPE_STRUCT)
		return aql_mpi_type(type, out);
	err = MPI_Type_contiguous((int)type->size, MPI_BYTE, out);
	if (err != MPI_SUCCESS)
		return aql_mpi_fail(err, "MPI_Type_contiguous", type->name, MPI_COMM_SELF, -1, -1);
	*derived = 1;
	return AQL_OK;
}

static aql_status too_big(const aql_buf_info *info, const char *what, uint64_t v)
{
	return aql_error_set(AQL_ERR_INVALID_ARG,
			     "buffer '%s': %s %" PRIu64 " is above MPI's int limit %d",
			     info->name, what, v, INT_MAX);
}

static aql_status vector_type(const aql_buf_info *info, const aql_mpi_layout *l, MPI_Datatype elem,
			      MPI_Datatype *out, uint64_t *first)
{
	uint64_t span;
	int err;

	if (!l->blocks || !l->blocklen || (l->blocks > 1 && l->stride < l->blocklen))
		return aql_error_set(AQL_ERR_INVALID_ARG,
				     "buffer '%s': a vector layout needs blocks and blocklen of 1 or more and a stride of at least blocklen (blocks %" PRIu64 ", blocklen %" PRIu64 ", stride %" PRIu64 ")",
				     info->name, l->blocks, l->blocklen, l->stride);
	if (l->blocks > INT_MAX)
		return too_big(info, "blocks", l->blocks);
	if (l->blocklen > INT_MAX)
		return too_big(info, "blocklen", l->blocklen);
	if (l->stride > INT_MAX)
		return too_big(info, "stride", l->stride);
	/* The last element: first + (blocks - 1) * stride + blocklen - 1 < count. */
	span = (l->blocks - 1) * l->stride + l->blocklen;
	if (l->first >= info->count || span > info->count - l->first)
		return aql_error_set(AQL_ERR_INVALID_ARG,
				     "buffer '%s': the vector layout from element %" PRIu64 " spans %" PRIu64 " elements, past the buffer's %" PRIu64,
				     info->name, l->first, span, info->count);
	err = MPI_Type_vector((int)l->blocks, (int)l->blocklen, (int)l->stride, elem, out);
	if (err != MPI_SUCCESS)
		return aql_mpi_fail(err, "MPI_Type_vector", info->name, MPI_COMM_SELF, -1, -1);
	*first = l->first;
	return AQL_OK;
}

static aql_status subarray_type(const aql_buf_info *info, const aql_mpi_layout *l,
				MPI_Datatype elem, MPI_Datatype *out)
{
	int sizes[4], subsizes[4], starts[4], err;

	if (info->ndim < 2)
		return aql_error_set(AQL_ERR_INVALID_ARG,
				     "buffer '%s': a subarray layout needs a root buffer created with a shape of 2 to 4 dimensions (this one has %u%s)",
				     info->name, info->ndim, info->is_view ? ", a view" : "");
	for (uint32_t d = 0; d < info->ndim; d++) {
		if (!l->size[d] || l->start[d] >= info->shape[d] ||
		    l->size[d] > info->shape[d] - l->start[d])
			return aql_error_set(AQL_ERR_INVALID_ARG,
					     "buffer '%s': subarray dimension %u is [%" PRIu64 ", +%" PRIu64 "), outside the extent %" PRIu64 " (or empty)",
					     info->name, d, l->start[d], l->size[d], info->shape[d]);
		if (info->shape[d] > INT_MAX)
			return too_big(info, "an extent", info->shape[d]);
		sizes[d] = (int)info->shape[d];
		subsizes[d] = (int)l->size[d];
		starts[d] = (int)l->start[d];
	}
	err = MPI_Type_create_subarray((int)info->ndim, sizes, subsizes, starts, MPI_ORDER_C, elem,
				       out);
	if (err != MPI_SUCCESS)
		return aql_mpi_fail(err, "MPI_Type_create_subarray", info->name, MPI_COMM_SELF, -1, -1);
	return AQL_OK;
}

aql_status aql_mpi_describe(aql_buf *buf, const aql_mpi_layout *layout, MPI_Datatype *datatype,
			    int *count, uint64_t *first, int *derived)
{
	enum aql_mpi_layout_kind kind = layout ? layout->kind : AQL_MPI_WHOLE;
	MPI_Datatype elem, t;
	aql_buf_info info;
	int elem_derived, err;
	aql_status st;

	if (!buf || !datatype || !count || !first || !derived)
		return aql_error_set(AQL_ERR_INVALID_ARG,
				     "aql_mpi_describe: buffer, datatype, count, first and derived are required");
	st = aql_buf_get_info(buf, &info);
	if (st != AQL_OK)
		return st;
	if (kind != AQL_MPI_WHOLE && kind != AQL_MPI_VECTOR && kind != AQL_MPI_SUBARRAY)
		return aql_error_set(AQL_ERR_INVALID_ARG, "buffer '%s': unknown layout kind %d",
				     info.name, (int)kind);
	if (kind == AQL_MPI_WHOLE && info.count > INT_MAX)
		return too_big(&info, "count", info.count);
	st = element_type(info.type, &elem, &elem_derived);
	if (st != AQL_OK)
		return st;
	*first = 0;
	if (kind == AQL_MPI_WHOLE) {
		*datatype = elem;
		*count = (int)info.count;
		*derived = elem_derived;
		if (!elem_derived)
			return AQL_OK;
		err = MPI_Type_commit(datatype);
		if (err == MPI_SUCCESS)
			return AQL_OK;
		MPI_Type_free(datatype);
		return aql_mpi_fail(err, "MPI_Type_commit", info.name, MPI_COMM_SELF, -1, -1);
	}
	if (kind == AQL_MPI_VECTOR)
		st = vector_type(&info, layout, elem, &t, first);
	else
		st = subarray_type(&info, layout, elem, &t);
	/* The derived type keeps what it needs of elem. */
	if (elem_derived)
		MPI_Type_free(&elem);
	if (st != AQL_OK)
		return st;
	err = MPI_Type_commit(&t);
	if (err != MPI_SUCCESS) {
		MPI_Type_free(&t);
		return aql_mpi_fail(err, "MPI_Type_commit", info.name, MPI_COMM_SELF, -1, -1);
	}
	*datatype = t;
	*count = 1;
	*derived = 1;
	return AQL_OK;
}

uint64_t aql_mpi_elements(const aql_buf_info *info, const aql_mpi_layout *layout)
{
	uint64_t n = 1;

	if (!layout || layout->kind == AQL_MPI_WHOLE)
		return info->count;
	if (layout->kind == AQL_MPI_VECTOR)
		return layout->blocks * layout->blocklen;
	for (uint32_t d = 0; d < info->ndim; d++)
		n *= layout->size[d];
	return n;
}

aql_status aql_mpi_args(aql_buf *buf, const aql_mpi_layout *layout, int write, const char *call,
			struct aql_mpi_args *out)
{
	aql_status st;
	void *host;

	st = aql_buf_get_info(buf, &out->info);
	if (st != AQL_OK)
		return aql_error_set(st, "%s: a buffer is required", call);
	st = aql_mpi_describe(buf, layout, &out->datatype, &out->count, &out->first,
			      &out->derived);
	if (st != AQL_OK)
		return st;
	/* Host access brings the host copy current (staging a GPU agent's). */
	if (write)
		host = aql_buf_host(buf, out->info.type);
	else
		host = (void *)aql_buf_host_const(buf, out->info.type);
	if (!host) {
		char why[512];

		aql_mpi_args_done(out);
		snprintf(why, sizeof(why), "%s", aql_error_message());
		return aql_error_set(AQL_ERR_BUSY, "%s of '%s': %s", call, out->info.name, why);
	}
	out->ptr = (char *)host + out->first * out->info.type->size;
	return AQL_OK;
}

void aql_mpi_args_done(struct aql_mpi_args *a)
{
	if (a->derived)
		MPI_Type_free(&a->datatype);
	a->derived = 0;
}

aql_status aql_mpi_send(aql_buf *buf, const aql_mpi_layout *layout, int dest, int tag,
			MPI_Comm comm)
{
	struct aql_mpi_args a;
	aql_status st = aql_mpi_args(buf, layout, 0, "aql_mpi_send", &a);
	int err;

	if (st != AQL_OK)
		return st;
	err = MPI_Send(a.ptr, a.count, a.datatype, dest, tag, comm);
	aql_mpi_args_done(&a);
	if (err != MPI_SUCCESS)
		return aql_mpi_fail(err, "MPI_Send", a.info.name, comm, dest, tag);
	return AQL_OK;
}

aql_status aql_mpi_recv(aql_buf *buf, const aql_mpi_layout *layout, int source, int tag,
			MPI_Comm comm, MPI_Status *status)
{
	struct aql_mpi_args a;
	aql_status st = aql_mpi_args(buf, layout, 1, "aql_mpi_recv", &a);
	int err;

	if (st != AQL_OK)
		return st;
	err = MPI_Recv(a.ptr, a.count, a.datatype, source, tag, comm, status);
	aql_mpi_args_done(&a);
	if (err != MPI_SUCCESS)
		return aql_mpi_fail(err, "MPI_Recv", a.info.name, comm, source, tag);
	return AQL_OK;
}

aql_status aql_mpi_bcast(aql_buf *buf, const aql_mpi_layout *layout, int root, MPI_Comm comm)
{
	struct aql_mpi_args a;
	int rank = -1, err;
	aql_status st;

	err = MPI_Comm_rank(comm, &rank);
	if (err != MPI_SUCCESS)
		return aql_mpi_fail(err, "MPI_Comm_rank", "aql_mpi_bcast", MPI_COMM_SELF, root, -1);
	st = aql_mpi_args(buf, layout, rank != root, "aql_mpi_bcast", &a);
	if (st != AQL_OK)
		return st;
	err = MPI_Bcast(a.ptr, a.count, a.datatype, root, comm);
	aql_mpi_args_done(&a);
	if (err != MPI_SUCCESS)
		return aql_mpi_fail(err, "MPI_Bcast", a.info.name, comm, root, -1);
	return AQL_OK;
}

aql_status aql_mpi_allreduce(aql_buf *send, aql_buf *recv, MPI_Op op, MPI_Comm comm)
{
	struct aql_mpi_args r, s = { .ptr = MPI_IN_PLACE };
	aql_status st;
	int err;

	if (send && send == recv)
		return aql_error_set(AQL_ERR_INVALID_ARG,
				     "aql_mpi_allreduce: send and receive are the same buffer; pass send NULL to reduce in place");
	st = aql_mpi_args(recv, NULL, 1, "aql_mpi_allreduce", &r);
	if (st != AQL_OK)
		return st;
	if (r.derived) {
		aql_mpi_args_done(&r);
		return aql_error_set(AQL_ERR_INVALID_ARG,
				     "aql_mpi_allreduce: buffer '%s' holds %s: only built-in scalar types reduce",
				     r.info.name, r.info.type->name);
	}
	if (send) {
		st = aql_mpi_args(send, NULL, 0, "aql_mpi_allreduce", &s);
		if (st != AQL_OK)
			return st;
		if (s.info.type != r.info.type || s.info.count != r.info.count) {
			aql_mpi_args_done(&s);
			return aql_error_set(AQL_ERR_INVALID_ARG,
					     "aql_mpi_allreduce: send '%s' (%" PRIu64 " %s) and receive '%s' (%" PRIu64 " %s) differ",
					     s.info.name, s.info.count, s.info.type->name,
					     r.info.name, r.info.count, r.info.type->name);
		}
	}
	err = MPI_Allreduce(s.ptr, r.ptr, r.count, r.datatype, op, comm);
	if (err != MPI_SUCCESS)
		return aql_mpi_fail(err, "MPI_Allreduce", r.info.name, comm, -1, -1);
	return AQL_OK;
}

aql_status aql_mpi_gather(aql_buf *send, const aql_mpi_layout *layout, aql_buf *recv, int root,
			  MPI_Comm comm)
{
	struct aql_mpi_args s, r = { .ptr = NULL };
	uint64_t n;
	int rank = -1, size = 0, err;
	aql_status st;

	err = MPI_Comm_rank(comm, &rank);
	if (err == MPI_SUCCESS)
		err = MPI_Comm_size(comm, &size);
	if (err != MPI_SUCCESS)
		return aql_mpi_fail(err, "MPI_Comm_size", "aql_mpi_gather", MPI_COMM_SELF, root, -1);
	st = aql_mpi_args(send, layout, 0, "aql_mpi_gather", &s);
	if (st != AQL_OK)
		return st;
	n = aql_mpi_elements(&s.info, layout);
	if (rank == root) {
		st = aql_mpi_args(recv, NULL, 1, "aql_mpi_gather", &r);
		if (st == AQL_OK && (r.info.type != s.info.type || r.info.count / (uint64_t)size < n)) {
			st = aql_error_set(AQL_ERR_INVALID_ARG,
					   "aql_mpi_gather: receive '%s' (%" PRIu64 " %s) cannot hold %d ranks' %" PRIu64 " %s of '%s'",
					   r.info.name, r.info.count, r.info.type->name, size, n,
					   s.info.type->name, s.info.name);
			aql_mpi_args_done(&r);
		}
		if (st == AQL_OK && n > INT_MAX)
			st = too_big(&s.info, "a rank's element count", n);
		if (st != AQL_OK) {
			aql_mpi_args_done(&s);
			return st;
		}
	}
	/* Each rank's part lands as n plain elements: recv's own datatype. */
	err = MPI_Gather(s.ptr, s.count, s.datatype, r.ptr, (int)n,
			 rank == root ? r.datatype : s.datatype, root, comm);
	aql_mpi_args_done(&s);
	aql_mpi_args_done(&r);
	if (err != MPI_SUCCESS)
		return aql_mpi_fail(err, "MPI_Gather", s.info.name, comm, root, -1);
	return AQL_OK;
}

int aql_mpi_gpu_aware(enum aql_agent_kind kind)
{
	int yes = 0;

#if defined(MPICH_VERSION) && defined(MPIX_GPU_SUPPORT_CUDA)
	if (kind == AQL_AGENT_NVIDIA && MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes))
		yes = 0;
	if (kind == AQL_AGENT_AMD && MPIX_GPU_query_support(MPIX_GPU_SUPPORT_HIP, &yes))
		yes = 0;
#elif defined(OMPI_HAVE_MPI_EXT_CUDA)
	if (kind == AQL_AGENT_NVIDIA)
		yes = MPIX_Query_cuda_support();
#else
	(void)kind;
#endif
	return yes != 0;
}
