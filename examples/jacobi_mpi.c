/* SPDX-License-Identifier: MIT */
/*
 * The 2-D heat equation by Jacobi steps, the grid split into blocks of
 * rows, one per MPI rank. Each rank ping-pongs two typed buffers of its
 * block plus a halo row above and below. One queue orders everything:
 * step t's launch, then the halo exchange of what it wrote (queue-ordered
 * MPI: aql_mpi_enqueue_send/recv, which libaql-mpi's communication agent
 * posts when the queue reaches them), then step t + 1. The host submits
 * all steps up front and waits once, at the end. Each launch reports its
 * step over the rank's channel (struct progress, as progress.c), served
 * by a thread that prints the rank's progress.
 *
 * The check: each rank also runs the whole grid alone (one block, no
 * exchange) on the same kernel, and compares its own rows bit for bit
 * (memcmp): each point is the same expression of the same inputs in
 * either run, so any difference is a halo that did not arrive or came
 * from the wrong step. Usage: mpiexec -n N jacobi_mpi [jacobi.so]; exits
 * 0 on every rank when every rank's rows agree, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <aql/aql.h>
#include <aql/mpi.h>
#include "jacobi.h"
#include "progress.h"

#define CHECK(call)                                                            \
	do {                                                                   \
		if ((call) != AQL_OK) {                                        \
			fprintf(stderr, "jacobi_mpi: rank %d: %s: %s\n", rank, \
				#call, aql_error_message());                   \
			MPI_Abort(MPI_COMM_WORLD, 1);                          \
		}                                                              \
	} while (0)

enum { W = 48, H = 30, STEPS = 40, REPORT = 10 };
enum { TAG_DOWN = 1, TAG_UP = 2 };	/* rows going to the rank below, above */

static int rank;

struct seen {
	uint32_t rows;
	uint32_t step[STEPS];	/* messages per step: one per run (split, whole) */
	uint32_t bad;
};

/* On the serve thread, for each step's message; no MPI here. */
static int on_progress(const aql_channel_msg *msg, void *ctx)
{
	struct seen *s = (struct seen *)ctx;
	struct progress p;

	if (msg->size != sizeof(p)) {
		s->bad++;
		return 0;
	}
	memcpy(&p, msg->data, sizeof(p));
	if (p.group >= STEPS || (p.first != s->rows && p.first != H)) {
		s->bad++;
		return 0;
	}
	s->step[p.group]++;
	if (p.first == s->rows && (p.group + 1) % REPORT == 0)
		printf("rank %d: step %u of %d\n", rank, p.group + 1, STEPS);
	return 0;
}

/* Row i of a block buffer of w points per row, for MPI. */
static aql_mpi_layout row(uint32_t i)
{
	aql_mpi_layout l = { .kind = AQL_MPI_VECTOR, .first = (uint64_t)i * W, .blocks = 1,
			     .blocklen = W, .stride = W };

	return l;
}

/*
 * STEPS steps of rows rows from grid row first, queued on q; with MPI
 * (comm not MPI_COMM_NULL), each step's halos are exchanged after it.
 * Returns the buffer that holds the last step; *done: the last launch's
 * completion (every packet sets the barrier bit: all before it are done).
 */
static aql_buf *run(aql_queue *q, const aql_kernel *step, aql_channel *log, aql_buf *u[2],
		    uint32_t rows, uint32_t first, MPI_Comm comm, int size, aql_completion *done)
{
	const float r = 0.2f;	/* alpha * dt / dx^2, stable below 0.25 */
	aql_launch_config cfg = { .grid = { rows * W } };
	aql_mpi_layout top = row(1), bottom = row(rows), above = row(0), below = row(rows + 1);
	float *h = aql_buf_data(u[0], float);
	int up = rank - 1, down = rank + 1;

	for (uint32_t i = 0; i < rows + 2; i++)
		for (uint32_t j = 0; j < W; j++)
			h[i * W + j] = first + i >= 1 && first + i <= H ?
					       jacobi_initial(first + i - 1, j) : 0.0f;
	for (uint32_t t = 0; t < STEPS; t++) {
		aql_buf *next = u[(t + 1) % 2];

		CHECK(AQL_LAUNCH(q, step, &cfg, done, AQL_ARG(log), AQL_ARG(u[t % 2]),
				 AQL_ARG(next), AQL_ARG(r), AQL_ARG((uint32_t)W), AQL_ARG(rows),
				 AQL_ARG(first), AQL_ARG((uint32_t)H), AQL_ARG(t)));
		if (comm == MPI_COMM_NULL || t == STEPS - 1)
			continue;
		/*
		 * The queue runs one operation at a time, so each boundary
		 * is crossed in pairs that cannot wait on each other, even
		 * where MPI sends synchronously: first the boundaries below
		 * even ranks, then those below odd ranks; across each, the
		 * upper rank sends first and the lower receives first.
		 */
		for (int phase = 0; phase < 2; phase++) {
			if (rank % 2 == phase && down < size) {
				CHECK(aql_mpi_enqueue_send(q, next, &bottom, down, TAG_DOWN, comm, NULL));
				CHECK(aql_mpi_enqueue_recv(q, next, &below, down, TAG_UP, comm, NULL));
			} else if (rank % 2 != phase && up >= 0) {
				CHECK(aql_mpi_enqueue_recv(q, next, &above, up, TAG_DOWN, comm, NULL));
				CHECK(aql_mpi_enqueue_send(q, next, &top, up, TAG_UP, comm, NULL));
			}
		}
	}
	return u[STEPS % 2];
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "jacobi.so";
	int size, provided, wrong = 0, wrong_all = 0;
	MPI_Comm comm;
	aql_agent *agent;
	aql_queue *q;
	aql_code_object *co;
	const aql_kernel *step;
	aql_channel *log;
	aql_buf *u[2], *whole[2];
	aql_completion done;
	struct seen seen;

	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size > H) {
		fprintf(stderr, "jacobi_mpi: %d ranks for %d rows: at most one rank per row\n",
			size, H);
		MPI_Finalize();
		return 1;
	}
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	/* MPI's errors fail the queue with their message, rather than abort. */
	MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

	/* This rank's rows: [first, first + rows) of the grid. */
	uint32_t first, rows;

	jacobi_block(H, rank, size, &first, &rows);

	memset(&seen, 0, sizeof(seen));
	seen.rows = rows;
	CHECK(aql_agent_default(&agent));
	CHECK(aql_queue_create(agent, NULL, &q));
	CHECK(aql_code_object_load_file(agent, path, NULL, &co));
	CHECK(aql_code_object_kernel(co, "jacobi_step", &step));
	CHECK(aql_channel_create(agent, NULL, &log));
	CHECK(aql_channel_serve_start(log, on_progress, &seen));
	for (int i = 0; i < 2; i++) {
		CHECK(aql_buf_create(AQL_TYPE(float), (rows + 2) * W, AQL_INOUT, NULL, &u[i]));
		CHECK(aql_buf_create(AQL_TYPE(float), (H + 2) * W, AQL_INOUT, NULL, &whole[i]));
	}

	/* The split run, then the whole grid on the same queue; one wait. */
	aql_buf *res = run(q, step, log, u, rows, first, comm, size, &done);
	aql_buf *ref = run(q, step, log, whole, H, 0, MPI_COMM_NULL, size, &done);
	CHECK(aql_completion_wait(done, AQL_TIMEOUT_INFINITE));
	CHECK(aql_channel_serve_stop(log));

	/* Bit for bit: this rank's rows of the whole grid, past their halos. */
	const float *a = aql_buf_data_const(res, float) + W;
	const float *b = aql_buf_data_const(ref, float) + (first + 1) * W;
	for (uint32_t k = 0; k < rows * W; k++)
		wrong += memcmp(&a[k], &b[k], sizeof(float)) != 0;
	for (uint32_t t = 0; t < STEPS; t++)
		seen.bad += seen.step[t] != 2;
	MPI_Allreduce(&wrong, &wrong_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	printf("jacobi_mpi: rank %d of %d: rows %u..%u of %d x %d, %d steps: %d of %u points differ "
	       "from the one-rank run, %u bad progress messages; %d differ on all ranks\n",
	       rank, size, first, first + rows - 1, H, W, STEPS, wrong, rows * W, seen.bad,
	       wrong_all);

	CHECK(aql_mpi_cancel(q));
	aql_mpi_shutdown();
	for (int i = 0; i < 2; i++) {
		aql_buf_destroy(u[i]);
		aql_buf_destroy(whole[i]);
	}
	aql_channel_destroy(log);
	aql_queue_destroy(q);
	aql_code_object_destroy(co);
	MPI_Comm_free(&comm);
	MPI_Finalize();
	return wrong_all != 0 || seen.bad != 0;
}
