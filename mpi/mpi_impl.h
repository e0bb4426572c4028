/* SPDX-License-Identifier: MIT */
/* Internal to libaql-mpi: one call's buffer, as MPI takes it. */
#ifndef AQL_MPI_IMPL_H
#define AQL_MPI_IMPL_H

#include <aql/mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>	/* MPIX_Query_cuda_support() */
#endif

struct aql_mpi_args {
	aql_buf_info info;
	void *ptr;		/* host storage of the layout's first element */
	MPI_Datatype datatype;
	int count;
	int derived;		/* datatype is to be freed */
	uint64_t first;
};

/*
 * Describe layout over buf and get its host storage, current (written:
 * marked changed on the host). call names the caller in messages. On
 * success, aql_mpi_args_done() frees what it made.
 */
aql_status aql_mpi_args(aql_buf *buf, const aql_mpi_layout *layout, int write, const char *call,
			struct aql_mpi_args *out);
void aql_mpi_args_done(struct aql_mpi_args *a);

/* The elements layout covers in a buffer described by info. */
uint64_t aql_mpi_elements(const aql_buf_info *info, const aql_mpi_layout *layout);

/*
 * AQL_ERR_SYSTEM with "call of what failed on rank R (peer P, tag T):
 * MPI's error string"; MPI_ERR_TRUNCATE is named as such.
 */
aql_status aql_mpi_fail(int err, const char *call, const char *what, MPI_Comm comm, int peer,
			int tag);

#endif
