/* SPDX-License-Identifier: MIT */
/*
 * aql-bench --mpi: queue-ordered MPI (libaql-mpi, aql/mpi.h) next to plain
 * MPI calls, in the same run, under `mpiexec -n 2`. Rank 0 prints; rank 1
 * is the peer of every row. Everything runs on CPU agent 0, in queues of
 * 4096 packets, MPI initialised at MPI_THREAD_MULTIPLE (queue-ordered rows
 * need at least MPI_THREAD_SERIALIZED, which this file honours too: the
 * main thread calls MPI only while no queue-ordered work is pending).
 *
 * mpi_pingpong_raw_ns, mpi_pingpong_queue_ns, mpi_pingpong_queue_over_raw_ns
 *	As OSU's osu_latency: rank 0 sends, rank 1 receives and sends back,
 *	half the round trip; per round trip, not averaged over a loop, so
 *	the percentiles are those of single messages (their mean is
 *	osu_latency's figure). Each round is one plain round trip
 *	(MPI_Send / MPI_Recv, 0 bytes) and then one queue-ordered one
 *	(aql_mpi_enqueue_send then aql_mpi_enqueue_recv on rank 0, the
 *	other way round on rank 1, timed on rank 0 from before the first
 *	enqueue publishes its packets to the host seeing the receive's
 *	completion with aql_completion_wait()); over_raw is each round's
 *	difference. A typed buffer holds at least one element, so the
 *	queue-ordered message is 1 byte (one uint8_t), not 0.
 *
 * mpi_pingpong_raw_8B_ns, mpi_pingpong_queue_8B_ns
 *	The same with 8 bytes on both (one uint64_t).
 *
 * mpi_trigger_ns
 *	From an empty kernel's completion to the call of MPI_Isend for the
 *	send queued behind it: by the communication agent, or by a waiting
 *	thread's wait helper (the packet processor at the send's hold, the
 *	program in aql_completion_wait(); docs/mpi.md). Per sample, rank 0
 *	holds a profiling queue behind a barrier, queues the empty kernel
 *	and the send of 1 byte, waits 1 ms (the communication agent waits
 *	meanwhile as it would behind a 1 ms kernel) and opens the barrier.
 *	The kernel's end is its
 *	profiling stamp (aql_signal_dispatch_time(), CLOCK_MONOTONIC); the
 *	send's start is stamped by this file's MPI_Isend, which interposes
 *	on the library's through MPI's profiling interface (PMPI_Isend) and
 *	reads the same clock. Rank 1 receives and acknowledges, so each
 *	sample starts idle.
 *
 * jacobi_step_host_ns, jacobi_step_queue_ns
 *	One step of examples/jacobi_mpi.c's 2-D Jacobi heat solver
 *	(examples/jacobi.h) on a 256 x 128 grid, 64 rows per rank: the
 *	interior rows (all but the block's first and last), the halo
 *	exchange with the other rank (one row each way), the two edge rows.
 *	host: one queue, the host waiting for each phase before the next:
 *	launch the interior, wait, aql_mpi_send / aql_mpi_recv the halos,
 *	launch the edges, wait. queue: the whole step submitted at once with
 *	no host wait, on the same queue: the interior, the exchange
 *	(queue-ordered), the edges. (The exchange cannot overlap the interior
 *	on a second queue: a queue-ordered receive declares its buffer written
 *	(aql_buf_host_written()), which work in flight on another queue that
 *	uses the buffer refuses, AQL_ERR_BUSY.) A round is 20 steps (--quick 5) of either,
 *	the ranks starting it together (MPI_Barrier) and the host waiting
 *	once at its end; a sample is the round's time per step. Rounds
 *	alternate host and queue, 200 of each (--quick 5): a round takes
 *	milliseconds, and on a 2-core machine running both ranks its time
 *	swings with where the scheduler puts their threads, so the medians
 *	of 30 rounds (0.1 s) moved by a third from run to run.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifdef AQL_BENCH_MPI

#include <aql/mpi.h>
#include "jacobi.h"

enum { TAG_PING = 1, TAG_TRIGGER, TAG_ACK, TAG_DOWN, TAG_UP };
/* The Jacobi grid: JW points a row, JH rows, split between the ranks. */
enum { JW = 256, JH = 128 };
#define TRIGGER_HOLD_NS 1000000ull

extern const unsigned char aql_bench_mpi_kernels[];
extern const size_t aql_bench_mpi_kernels_size;

static struct {
	int rank, size, provided, up, dup;
	char version[MPI_MAX_LIBRARY_VERSION_STRING];
	MPI_Comm comm;
	aql_agent *cpu;
	aql_agent_info info;
	aql_queue *q;		/* every row's */
	aql_buf *b1, *b8;
	aql_signal *ksig, *gate;
	aql_code_object *co;
	const aql_kernel *rows_k, *edges_k;
	aql_buf *u[2];
	uint32_t first, rows;
	uint32_t warmup, samples, trigger_samples, rounds, steps;
	struct latency pp0[3], pp8[3], step_host, step_queue;
} M;

/* This file's MPI_Isend stamps its calls while armed (mpi_trigger_ns). */
static int isend_armed;
static uint64_t isend_ns;

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
	      MPI_Comm comm, MPI_Request *request)
{
	/* Relaxed: the communication agent's completion of the send (a
	 * release store) publishes the stamp to the thread that waited. */
	if (__atomic_load_n(&isend_armed, __ATOMIC_RELAXED))
		__atomic_store_n(&isend_ns, now_ns(), __ATOMIC_RELAXED);
	return PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
}

static int mpi_fail(const char *call, int err)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(err, msg, &len);
	fprintf(stderr, "aql-bench: rank %d: %s: %s\n", M.rank, call, msg);
	return -1;
}

/* ---- ping-pong -------------------------------------------------------- */

static char raw_msg[8];

struct pingpong {
	int bytes;	/* of the plain round trip */
	aql_buf *buf;	/* of the queue-ordered one */
};

static int pingpong_round(void *user, double *r, double *t)
{
	struct pingpong *p = user;
	int peer = 1 - M.rank, err;
	aql_completion done;
	uint64_t t0, t1, t2;
	aql_status st;

	t0 = now_ns();
	if (M.rank == 0) {
		err = MPI_Send(raw_msg, p->bytes, MPI_BYTE, peer, TAG_PING, M.comm);
		if (err == MPI_SUCCESS)
			err = MPI_Recv(raw_msg, p->bytes, MPI_BYTE, peer, TAG_PING, M.comm,
				       MPI_STATUS_IGNORE);
	} else {
		err = MPI_Recv(raw_msg, p->bytes, MPI_BYTE, peer, TAG_PING, M.comm,
			       MPI_STATUS_IGNORE);
		if (err == MPI_SUCCESS)
			err = MPI_Send(raw_msg, p->bytes, MPI_BYTE, peer, TAG_PING, M.comm);
	}
	if (err != MPI_SUCCESS)
		return mpi_fail("MPI_Send/MPI_Recv", err);
	t1 = now_ns();
	if (M.rank == 0) {
		st = aql_mpi_enqueue_send(M.q, p->buf, NULL, peer, TAG_PING, M.comm, NULL);
		if (st == AQL_OK)
			st = aql_mpi_enqueue_recv(M.q, p->buf, NULL, peer, TAG_PING, M.comm, &done);
	} else {
		st = aql_mpi_enqueue_recv(M.q, p->buf, NULL, peer, TAG_PING, M.comm, NULL);
		if (st == AQL_OK)
			st = aql_mpi_enqueue_send(M.q, p->buf, NULL, peer, TAG_PING, M.comm, &done);
	}
	if (st != AQL_OK)
		return fail("aql_mpi_enqueue_send/recv", st);
	st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
	if (st != AQL_OK)
		return fail("aql_completion_wait (queue-ordered ping-pong)", st);
	t2 = now_ns();
	*r = (double)(t1 - t0) / 2;
	*t = (double)(t2 - t1) / 2;
	return 0;
}

static int pingpong(struct result *res, struct latency out[3], int bytes, aql_buf *buf)
{
	struct pingpong p = { bytes, buf };

	if (pair_rounds(M.samples, M.warmup, pingpong_round, &p, out))
		return -1;
	res->kind = RESULT_LATENCY;
	res->lat = out[0];
	return 0;
}

static int bench_pingpong0(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return pingpong(res, M.pp0, 0, M.b1);
}

static int bench_pingpong8(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return pingpong(res, M.pp8, 8, M.b8);
}

LATENCY_ROW(row_queue0, M.pp0[1])
LATENCY_ROW(row_over0, M.pp0[2])
LATENCY_ROW(row_queue8, M.pp8[1])

/* ---- trigger ---------------------------------------------------------- */

/* Rank 0's sample: kernel end to MPI_Isend, in *ns. */
static int trigger_once(uint64_t *ns)
{
	aql_packet k = empty_dispatch(1, M.ksig);
	uint64_t start = 0, end = 0, sent;
	struct timespec hold = { 0, TRIGGER_HOLD_NS };
	aql_completion done;
	aql_status st;
	int err;

	aql_signal_store(M.ksig, 1, AQL_RELAXED);
	__atomic_store_n(&isend_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&isend_armed, 1, __ATOMIC_RELAXED);
	if (queue_hold(M.q, M.gate))
		return -1;
	st = aql_queue_submit(M.q, &k);
	if (st == AQL_OK)
		st = aql_mpi_enqueue_send(M.q, M.b1, NULL, 1, TAG_TRIGGER, M.comm, &done);
	if (st != AQL_OK) {
		aql_signal_store(M.gate, 0, AQL_RELEASE);
		return fail("submitting the kernel and the send", st);
	}
	nanosleep(&hold, NULL);
	aql_signal_store(M.gate, 0, AQL_RELEASE);
	st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
	__atomic_store_n(&isend_armed, 0, __ATOMIC_RELAXED);
	if (st != AQL_OK)
		return fail("aql_completion_wait (the send after the kernel)", st);
	st = aql_signal_dispatch_time(M.cpu, M.ksig, &start, &end);
	if (st != AQL_OK)
		return fail("aql_signal_dispatch_time", st);
	sent = __atomic_load_n(&isend_ns, __ATOMIC_RELAXED);
	if (!end || !sent) {
		fprintf(stderr, "aql-bench: mpi_trigger_ns: no %s stamp\n",
			end ? "MPI_Isend" : "kernel end");
		return -1;
	}
	*ns = sent > end ? sent - end : 0;
	err = MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, M.comm, MPI_STATUS_IGNORE);
	return err == MPI_SUCCESS ? 0 : mpi_fail("MPI_Recv (acknowledgement)", err);
}

static int bench_trigger(struct ctx *ctx, struct result *res)
{
	uint32_t n = M.trigger_samples, warm = M.warmup / 10 + 1;
	uint64_t *s = alloc_samples(n), ns = 0;
	int err, rc = -1;

	(void)ctx;
	if (!s)
		return fail_errno("malloc", ENOMEM);
	for (uint32_t i = 0; i < n + warm; i++) {
		if (M.rank == 0) {
			if (trigger_once(&ns))
				goto out;
			if (i >= warm)
				s[i - warm] = ns;
			continue;
		}
		err = MPI_Recv(aql_buf_host_storage(M.b1), 1, MPI_BYTE, 0, TAG_TRIGGER, M.comm,
			       MPI_STATUS_IGNORE);
		if (err == MPI_SUCCESS)
			err = MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, M.comm);
		if (err != MPI_SUCCESS) {
			mpi_fail("MPI_Recv/MPI_Send (trigger peer)", err);
			goto out;
		}
	}
	latency_stats(s, n, &res->lat);
	res->kind = RESULT_LATENCY;
	rc = 0;
out:
	free(s);
	return rc;
}

/* ---- Jacobi step ------------------------------------------------------ */

/* Row i of a block buffer, for MPI. */
static aql_mpi_layout row(uint32_t i)
{
	aql_mpi_layout l = { .kind = AQL_MPI_VECTOR, .first = (uint64_t)i * JW, .blocks = 1,
			     .blocklen = JW, .stride = JW };

	return l;
}

static aql_status launch_interior(aql_buf *u, aql_buf *next, aql_completion *done)
{
	aql_launch_config cfg = { .grid = { (M.rows - 2) * JW } };

	return AQL_LAUNCH(M.q, M.rows_k, &cfg, done, AQL_ARG(u), AQL_ARG(next), AQL_ARG(0.2f),
			  AQL_ARG((uint32_t)JW), AQL_ARG(M.first), AQL_ARG((uint32_t)JH),
			  AQL_ARG((uint32_t)2), AQL_ARG(M.rows - 2));
}

static aql_status launch_edges(aql_buf *u, aql_buf *next, const aql_completion *after,
			       aql_completion *done)
{
	aql_launch_config cfg = { .grid = { 2 * JW }, .after = after,
				  .after_count = after ? 1 : 0 };

	return AQL_LAUNCH(M.q, M.edges_k, &cfg, done, AQL_ARG(u), AQL_ARG(next), AQL_ARG(0.2f),
			  AQL_ARG((uint32_t)JW), AQL_ARG(M.first), AQL_ARG((uint32_t)JH),
			  AQL_ARG(M.rows));
}

/* u's edge rows out, its halo row in: rank 0 holds the top block. */
static aql_status exchange_host(aql_buf *u)
{
	aql_mpi_layout mine = row(M.rank == 0 ? M.rows : 1);
	aql_mpi_layout halo = row(M.rank == 0 ? M.rows + 1 : 0);
	int peer = 1 - M.rank;
	aql_status st;

	if (M.rank == 0) {
		st = aql_mpi_send(u, &mine, peer, TAG_DOWN, M.comm);
		return st != AQL_OK ? st :
				      aql_mpi_recv(u, &halo, peer, TAG_UP, M.comm, MPI_STATUS_IGNORE);
	}
	st = aql_mpi_recv(u, &halo, peer, TAG_DOWN, M.comm, MPI_STATUS_IGNORE);
	return st != AQL_OK ? st : aql_mpi_send(u, &mine, peer, TAG_UP, M.comm);
}

/* The same queue-ordered on q; *done: the second operation's completion. */
static aql_status exchange_queued(aql_buf *u, aql_completion *done)
{
	aql_mpi_layout mine = row(M.rank == 0 ? M.rows : 1);
	aql_mpi_layout halo = row(M.rank == 0 ? M.rows + 1 : 0);
	int peer = 1 - M.rank;
	aql_status st;

	if (M.rank == 0) {
		st = aql_mpi_enqueue_send(M.q, u, &mine, peer, TAG_DOWN, M.comm, NULL);
		return st != AQL_OK ? st :
				      aql_mpi_enqueue_recv(M.q, u, &halo, peer, TAG_UP, M.comm, done);
	}
	st = aql_mpi_enqueue_recv(M.q, u, &halo, peer, TAG_DOWN, M.comm, NULL);
	return st != AQL_OK ? st : aql_mpi_enqueue_send(M.q, u, &mine, peer, TAG_UP, M.comm, done);
}

static aql_status step_host(uint32_t t)
{
	aql_buf *u = M.u[t % 2], *next = M.u[(t + 1) % 2];
	aql_completion done;
	aql_status st;

	st = launch_interior(u, next, &done);
	if (st == AQL_OK)
		st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
	if (st == AQL_OK)
		st = exchange_host(u);
	if (st == AQL_OK)
		st = launch_edges(u, next, NULL, &done);
	if (st == AQL_OK)
		st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
	return st;
}

/* Step t queued; *edges: its edges' completion. */
static aql_status step_queued(uint32_t t, aql_completion *edges)
{
	aql_buf *u = M.u[t % 2], *next = M.u[(t + 1) % 2];
	aql_completion halo;
	aql_status st = launch_interior(u, next, NULL);

	if (st == AQL_OK)
		st = exchange_queued(u, &halo);
	if (st == AQL_OK)
		st = launch_edges(u, next, &halo, edges);
	return st;
}

/* One round of M.steps steps; *ns per step. */
static int jacobi_round(int queued, uint64_t *ns)
{
	aql_completion edges = { 0 };
	aql_status st = AQL_OK;
	uint64_t t0;
	int err;

	err = MPI_Barrier(M.comm);
	if (err != MPI_SUCCESS)
		return mpi_fail("MPI_Barrier", err);
	t0 = now_ns();
	for (uint32_t t = 0; t < M.steps && st == AQL_OK; t++)
		st = queued ? step_queued(t, &edges) : step_host(t);
	if (st == AQL_OK && queued)
		st = aql_completion_wait(edges, WAIT_TIMEOUT_NS);
	if (st != AQL_OK)
		return fail(queued ? "Jacobi step, queue-ordered" : "Jacobi step, host waits", st);
	*ns = (now_ns() - t0) / M.steps;
	return 0;
}

static int bench_jacobi(struct ctx *ctx, struct result *res)
{
	uint64_t *host = alloc_samples(M.rounds), *queued = alloc_samples(M.rounds), ns = 0;
	int rc = -1;

	(void)ctx;
	if (!host || !queued) {
		rc = fail_errno("malloc", ENOMEM);
		goto out;
	}
	/* One round of each warms up. */
	for (uint32_t i = 0; i <= M.rounds; i++) {
		if (jacobi_round(0, &ns))
			goto out;
		if (i)
			host[i - 1] = ns;
		if (jacobi_round(1, &ns))
			goto out;
		if (i)
			queued[i - 1] = ns;
	}
	latency_stats(host, M.rounds, &M.step_host);
	latency_stats(queued, M.rounds, &M.step_queue);
	res->kind = RESULT_LATENCY;
	res->lat = M.step_host;
	rc = 0;
out:
	free(host);
	free(queued);
	return rc;
}

LATENCY_ROW(row_jacobi_queue, M.step_queue)

/* ---- set-up ----------------------------------------------------------- */

static int jacobi_setup(void)
{
	aql_status st;

	jacobi_block(JH, M.rank, M.size, &M.first, &M.rows);
	st = aql_code_object_load(M.cpu, aql_bench_mpi_kernels, aql_bench_mpi_kernels_size, NULL,
				  &M.co);
	if (st == AQL_OK)
		st = aql_code_object_kernel(M.co, "jacobi_rows", &M.rows_k);
	if (st == AQL_OK)
		st = aql_code_object_kernel(M.co, "jacobi_edges", &M.edges_k);
	for (int i = 0; i < 2 && st == AQL_OK; i++) {
		st = aql_buf_create(AQL_TYPE(float), (uint64_t)(M.rows + 2) * JW, AQL_INOUT, NULL,
				    &M.u[i]);
		if (st != AQL_OK)
			break;
		float *h = aql_buf_data(M.u[i], float);

		for (uint32_t r = 0; r < M.rows + 2; r++)
			for (uint32_t j = 0; j < JW; j++)
				h[r * JW + j] = M.first + r >= 1 && M.first + r <= JH ?
							jacobi_initial(M.first + r - 1, j) : 0.0f;
	}
	return st == AQL_OK ? 0 : fail("the Jacobi kernels and buffers", st);
}

static int mpi_setup(struct ctx *ctx)
{
	aql_queue_config qc = { .size = ctx->queue_size, .flags = AQL_QUEUE_PROFILING };
	int len = 0, err;
	aql_status st;

	err = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &M.provided);
	if (err != MPI_SUCCESS)
		return mpi_fail("MPI_Init_thread", err);
	M.up = 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &M.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &M.size);
	MPI_Get_library_version(M.version, &len);
	/* Its first line, up to a comma: "MPICH Version: 4.0.2", "Open MPI v4.1.4". */
	M.version[strcspn(M.version, "\n,")] = '\0';
	for (char *c = M.version; *c; c++)
		if (*c == '\t')
			*c = ' ';
	if (M.rank)
		progress_on = false;
	if (M.size != 2) {
		if (M.rank == 0)
			fprintf(stderr, "aql-bench --mpi: run it on 2 ranks (mpiexec -n 2 aql-bench "
				"--mpi); this job has %d\n", M.size);
		return -1;
	}
	if (M.provided < MPI_THREAD_SERIALIZED) {
		fprintf(stderr, "aql-bench --mpi: rank %d: %s provides thread level %d, below "
			"MPI_THREAD_SERIALIZED, which queue-ordered operations need\n", M.rank,
			M.version, M.provided);
		return -1;
	}
	err = MPI_Comm_dup(MPI_COMM_WORLD, &M.comm);
	if (err != MPI_SUCCESS)
		return mpi_fail("MPI_Comm_dup", err);
	M.dup = 1;
	/* MPI's errors come back to be reported, rather than abort. */
	MPI_Comm_set_errhandler(M.comm, MPI_ERRORS_RETURN);
	ctx->quiet = M.rank != 0;
	M.warmup = ctx->opts->quick ? 100 : 1000;
	M.samples = ctx->opts->quick ? 1000 : 10000;
	M.trigger_samples = ctx->opts->quick ? 50 : 1000;
	M.rounds = ctx->opts->quick ? 5 : 200;
	M.steps = ctx->opts->quick ? 5 : 20;
	st = aql_agent_open(AQL_AGENT_CPU, 0, &M.cpu);
	if (st == AQL_OK)
		st = aql_agent_get_info(M.cpu, &M.info);
	if (st == AQL_OK)
		st = aql_queue_create(M.cpu, &qc, &M.q);
	if (st == AQL_OK)
		st = aql_buf_create(AQL_TYPE(uint8_t), 1, AQL_INOUT, NULL, &M.b1);
	if (st == AQL_OK)
		st = aql_buf_create(AQL_TYPE(uint64_t), 1, AQL_INOUT, NULL, &M.b8);
	if (st == AQL_OK)
		st = aql_signal_create(0, &M.ksig);
	if (st == AQL_OK)
		st = aql_signal_create(0, &M.gate);
	if (st != AQL_OK)
		return fail("aql-bench --mpi set-up", st);
	return jacobi_setup();
}

static const struct bench mpi_benches[] = {
	{ "mpi_pingpong_raw_ns", bench_pingpong0 },
	{ "mpi_pingpong_queue_ns", row_queue0 },
	{ "mpi_pingpong_queue_over_raw_ns", row_over0 },
	{ "mpi_pingpong_raw_8B_ns", bench_pingpong8 },
	{ "mpi_pingpong_queue_8B_ns", row_queue8 },
	{ "mpi_trigger_ns", bench_trigger },
	{ "jacobi_step_host_ns", bench_jacobi },
	{ "jacobi_step_queue_ns", row_jacobi_queue },
};

static void mpi_cleanup(struct ctx *ctx)
{
	if (!M.up)
		return;
	/* A rank that stopped half-way leaves its peer in a receive. */
	if (ctx->nresults != ARRAY_SIZE(mpi_benches) && M.size == 2) {
		fflush(stdout);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (M.q)
		aql_mpi_cancel(M.q);
	aql_mpi_shutdown();
	aql_queue_destroy(M.q);
	for (int i = 0; i < 2; i++)
		aql_buf_destroy(M.u[i]);
	aql_buf_destroy(M.b1);
	aql_buf_destroy(M.b8);
	aql_signal_destroy(M.ksig);
	aql_signal_destroy(M.gate);
	aql_code_object_destroy(M.co);
	aql_agent_destroy(M.cpu);
	if (M.dup)
		MPI_Comm_free(&M.comm);
	MPI_Finalize();
}

static const char *level_name(int level)
{
	return level == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE" : "MPI_THREAD_SERIALIZED";
}

static int mpi_banner(const struct ctx *ctx)
{
	double load[3] = { 0 };

	getloadavg(load, 3);
	printf("aql-bench --mpi: 2 ranks of %s, %s; CPU agent 0: %s, %" PRIu32 " workers; "
	       "load average %.2f %.2f %.2f; %s run\n", M.version, level_name(M.provided),
	       M.info.name, M.info.compute_units, load[0], load[1], load[2],
	       ctx->opts->quick ? "quick" : "full");
	printf("goals: queue-ordered ping-pong (1 B) <= plain (0 B) + 1 us; Jacobi step "
	       "queue-ordered / host waits <= 0.9\n\n");
	return 0;
}

static const struct goal mpi_goals[] = {
	{ "mpi_pingpong_queue_goal_ns", "queue-ordered ping-pong over plain (ns)",
	  "mpi_pingpong_queue_over_raw_ns", NULL, false, 1000, "ns" },
	{ "jacobi_step_goal", "Jacobi step, queue-ordered / host waits", "jacobi_step_queue_ns",
	  "jacobi_step_host_ns", false, 0.9, NULL },
};

static const struct peer mpi_peers[] = {
	{ "mpi_pingpong_queue_ns", "mpi_pingpong_raw_ns" },
	{ "mpi_pingpong_queue_8B_ns", "mpi_pingpong_raw_8B_ns" },
};

const struct mode bench_mode_mpi = {
	.name = "mpi",
	.benches = mpi_benches,
	.nbenches = ARRAY_SIZE(mpi_benches),
	.goals = mpi_goals,
	.ngoals = ARRAY_SIZE(mpi_goals),
	.peers = mpi_peers,
	.npeers = ARRAY_SIZE(mpi_peers),
	.setup = mpi_setup,
	.cleanup = mpi_cleanup,
	.banner = mpi_banner,
};

#else

/* Built without MPI: the mode says so and skips. */
static int mpi_refuse(struct ctx *ctx)
{
	(void)ctx;
	fprintf(stderr, "aql-bench: --mpi: this aql-bench was built without MPI (meson found "
		"neither MPICH nor Open MPI, or -Dmpi=disabled); install one (bootstrap.sh "
		"installs both) and reconfigure\n");
	return BENCH_SKIP;
}

const struct mode bench_mode_mpi = {
	.name = "mpi",
	.setup = mpi_refuse,
};

#endif
