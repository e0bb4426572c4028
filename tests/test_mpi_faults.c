/* SPDX-License-Identifier: MIT */
/*
 * A rank that dies while the others have queue-ordered receives from it
 * pending (tests/test_mpi_faults.py runs it and checks the outcome). Each
 * surviving rank queues a receive from rank 1 and a launch behind it, says
 * so ("pending"), and waits for the receive's completion; rank 1 is then
 * killed (SIGKILL), after the others have their receives posted. Neither
 * Debian library reports the dead peer to those receives (docs/mpi.md):
 * the launcher ends the whole job instead, which the runner checks. Should
 * a library report it, a survivor prints how its receive ended ("ended")
 * and the runner fails, so that the documentation gets updated.
 *
 * Usage: mpiexec -n N test_mpi_faults LAUNCH_KERNELS.host.so
 */
#include <signal.h>
#include <string.h>

#include <aql/mpi.h>

#include "helpers.h"

enum { M = 64, DYING = 1 };

int main(int argc, char **argv)
{
	aql_launch_config lc = { .grid = { M } };
	aql_buf_config bc = { .name = "from the dying rank" };
	int rank, size, provided;
	const aql_kernel *add = NULL;
	aql_code_object *co = NULL;
	aql_completion done;
	aql_queue *q = NULL;
	aql_buf *b = NULL;
	aql_status st;
	MPI_Comm comm;

	if (argc != 2) {
		fprintf(stderr, "usage: mpiexec -n N test_mpi_faults LAUNCH_KERNELS.host.so\n");
		return 2;
	}
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (size < 2 || provided < MPI_THREAD_SERIALIZED) {
		fprintf(stderr, "test_mpi_faults needs 2 or more ranks and MPI_THREAD_MULTIPLE\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	CHECK_OK(aql_code_object_load_file(th_agent(), argv[1], NULL, &co));
	if (co)
		CHECK_OK(aql_code_object_kernel(co, "add_i32", &add));
	CHECK_OK(aql_queue_create(th_agent(), NULL, &q));
	CHECK_OK(aql_buf_create(AQL_TYPE(int32_t), M, AQL_INOUT, &bc, &b));
	if (!add || !q || !b)
		MPI_Abort(MPI_COMM_WORLD, 2);
	if (rank != DYING) {
		CHECK_OK(aql_mpi_enqueue_recv(q, b, NULL, DYING, 9, comm, &done));
		CHECK_OK(AQL_LAUNCH(q, add, &lc, NULL, AQL_ARG(b), AQL_ARG(1), AQL_ARG((uint32_t)M)));
		/* The agent posts the receive at once: its queue was empty. */
		th_sleep_ms(100);
		printf("rank %d: pending: a receive from rank %d and a launch behind it\n", rank,
		       DYING);
		fflush(stdout);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == DYING) {
		/* Time for the launcher to forward what the others printed. */
		th_sleep_ms(300);
		fprintf(stderr, "rank %d: dies now (SIGKILL)\n", rank);
		raise(SIGKILL);
	}
	st = aql_completion_wait(done, TH_TIMEOUT_NS);
	printf("rank %d: ended: the receive from the dead rank ended with %s (%s)\n", rank,
	       aql_status_str(st), aql_error_message());
	fflush(stdout);
	aql_mpi_shutdown();
	MPI_Finalize();
	return 1;
}
