/* SPDX-License-Identifier: MIT */
/*
 * Typed buffers in MPI calls (libaql-mpi, include/aql/mpi.h), on 2 or more
 * ranks: each built-in type's datatype and a ring exchange of values that
 * only that type carries exactly; a struct; vector and subarray layouts
 * that move exactly their elements and leave the rest alone; broadcast,
 * allreduce and gather; refusals that name the problem; MPI's own errors
 * (a truncated message, a rank that does not exist) with rank, peer and
 * tag; and staging: a buffer last written by a launch on an agent with
 * memory of its own (a CPU agent with separate memory, or the test agent:
 * the emulated CUDA or KFD agent) is sent as the launch left it, and a
 * received buffer reaches the agent's next launch; a send while a launch
 * still writes the buffer is refused, not sent stale.
 *
 * Usage: mpiexec -n N test_mpi_typed LAUNCH_KERNELS.host.so [LAUNCH_KERNELS.{ptx,hsaco}]
 */
#include <inttypes.h>
#include <string.h>

#include <aql/mpi.h>

#include "helpers.h"

enum { N = 37 };

static int rank, size;
static MPI_Comm comm;	/* MPI_COMM_WORLD's duplicate, errors returned */

static int next(void)
{
	return (rank + 1) % size;
}

static int prev(void)
{
	return (rank + size - 1) % size;
}

static aql_buf *new_buf(const aql_type *type, uint64_t count, const char *name)
{
	aql_buf_config c = { .name = name };
	aql_buf *b = NULL;

	CHECK_OK(aql_buf_create(type, count, AQL_INOUT, &c, &b));
	if (!b)
		th_stop("no buffer");
	return b;
}

/* Element i of rank r, as the bytes of a value the type holds exactly. */
static uint64_t pattern(int r, uint64_t i, uint32_t size_bytes)
{
	uint64_t v = 0x8123456789abcdefull ^ ((uint64_t)r << 40) ^ (i * 0x9e3779b97f4a7c15ull);

	if (size_bytes < 8)
		v &= (1ull << (8 * size_bytes)) - 1;
	return v;
}

static void test_types(void)
{
	const struct {
		const aql_type *t;
		MPI_Datatype m;
	} types[] = {
		{ &aql_type_i8, MPI_INT8_T },	{ &aql_type_u8, MPI_UINT8_T },
		{ &aql_type_i16, MPI_INT16_T }, { &aql_type_u16, MPI_UINT16_T },
		{ &aql_type_i32, MPI_INT32_T }, { &aql_type_u32, MPI_UINT32_T },
		{ &aql_type_i64, MPI_INT64_T }, { &aql_type_u64, MPI_UINT64_T },
		{ &aql_type_f32, MPI_FLOAT },	{ &aql_type_f64, MPI_DOUBLE },
	};

	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
		const aql_type *t = types[k].t;
		MPI_Datatype m = MPI_DATATYPE_NULL;
		aql_buf *out = new_buf(t, N, "ring out"), *in = new_buf(t, N, "ring in");
		unsigned char *o = aql_buf_host(out, t);
		const unsigned char *got;
		MPI_Status status;
		int bad = 0, count = -1, msize = 0;

		CHECK_OK(aql_mpi_type(t, &m));
		CHECK(m == types[k].m, "%s maps to another MPI datatype", t->name);
		MPI_Type_size(m, &msize);
		CHECK(msize == (int)t->size, "%s: MPI size %d", t->name, msize);
		for (uint64_t i = 0; i < N && o; i++) {
			uint64_t v = pattern(rank, i, t->size);

			/* Floats: an ordinary value, never a NaN, whose bits must survive. */
			if (t == &aql_type_f32) {
				float f = (float)(int32_t)v / 7.0f;
				memcpy(o + i * 4, &f, 4);
			} else if (t == &aql_type_f64) {
				double d = (double)(int64_t)v / 7.0;
				memcpy(o + i * 8, &d, 8);
			} else {
				memcpy(o + i * t->size, &v, t->size);	/* little-endian */
			}
		}
		if (rank % 2 == 0) {
			CHECK_OK(aql_mpi_send(out, NULL, next(), (int)k, comm));
			CHECK_OK(aql_mpi_recv(in, NULL, prev(), (int)k, comm, &status));
		} else {
			CHECK_OK(aql_mpi_recv(in, NULL, prev(), (int)k, comm, &status));
			CHECK_OK(aql_mpi_send(out, NULL, next(), (int)k, comm));
		}
		MPI_Get_count(&status, m, &count);
		CHECK(count == N, "%s: %d elements received", t->name, count);
		/* The sender's values, computed as it computed them. */
		got = aql_buf_host_const(in, t);
		for (uint64_t i = 0; i < N && got; i++) {
			uint64_t v = pattern(prev(), i, t->size);
			unsigned char want[8];

			if (t == &aql_type_f32) {
				float f = (float)(int32_t)v / 7.0f;
				memcpy(want, &f, 4);
			} else if (t == &aql_type_f64) {
				double d = (double)(int64_t)v / 7.0;
				memcpy(want, &d, 8);
			} else {
				memcpy(want, &v, t->size);
			}
			bad += memcmp(got + i * t->size, want, t->size) != 0;
		}
		CHECK(got && bad == 0, "%s: %d of %d elements differ", t->name, bad, N);
		CHECK_OK(aql_buf_destroy(out));
		CHECK_OK(aql_buf_destroy(in));
	}
}

struct particle {
	double pos[3];
	uint32_t id;
	uint32_t flags;
};

static void test_struct(void)
{
	const aql_type *t = NULL;
	MPI_Datatype m;
	aql_buf *out, *in, *sum;
	struct particle *p;
	const struct particle *q;
	int bad = 0;

	CHECK_OK(AQL_TYPE_REGISTER(struct particle, &t));
	if (!t)
		return;
	CHECK(aql_mpi_type(t, &m) == AQL_ERR_INVALID_ARG && th_error_has("struct particle"),
	      "a struct has no predefined datatype");
	out = new_buf(t, N, "particles out");
	in = new_buf(t, N, "particles in");
	p = aql_buf_host(out, t);
	for (uint32_t i = 0; i < N && p; i++)
		p[i] = (struct particle){ { rank + i / 3.0, -1.0 * i, 1e300 }, i * 1000u + (uint32_t)rank,
					  0xa5a5a5a5u };
	if (rank % 2 == 0) {
		CHECK_OK(aql_mpi_send(out, NULL, next(), 100, comm));
		CHECK_OK(aql_mpi_recv(in, NULL, prev(), 100, comm, MPI_STATUS_IGNORE));
	} else {
		CHECK_OK(aql_mpi_recv(in, NULL, prev(), 100, comm, MPI_STATUS_IGNORE));
		CHECK_OK(aql_mpi_send(out, NULL, next(), 100, comm));
	}
	q = aql_buf_host_const(in, t);
	for (uint32_t i = 0; i < N && q; i++) {
		struct particle w = { { prev() + i / 3.0, -1.0 * i, 1e300 },
				      i * 1000u + (uint32_t)prev(), 0xa5a5a5a5u };
		bad += memcmp(&q[i], &w, sizeof(w)) != 0;
	}
	CHECK(q && bad == 0, "struct particle: %d of %d differ", bad, N);
	/* A struct is sent, never reduced. */
	sum = new_buf(t, N, "particle sum");
	CHECK(aql_mpi_allreduce(NULL, sum, MPI_SUM, comm) == AQL_ERR_INVALID_ARG &&
	      th_error_has("struct particle") && th_error_has("particle sum"),
	      "allreduce of a struct refused");
	CHECK_OK(aql_buf_destroy(out));
	CHECK_OK(aql_buf_destroy(in));
	CHECK_OK(aql_buf_destroy(sum));
}

enum { ROWS = 6, COLS = 8 };

static aql_buf *grid(const char *name, float base)
{
	aql_buf_config c = { .name = name, .ndim = 2, .shape = { ROWS, COLS } };
	aql_buf *b = NULL;
	float *h;

	CHECK_OK(aql_buf_create(AQL_TYPE(float), ROWS * COLS, AQL_INOUT, &c, &b));
	if (!b)
		th_stop("no grid");
	h = aql_buf_data(b, float);
	for (int i = 0; h && i < ROWS * COLS; i++)
		h[i] = base + (float)i;
	return b;
}

/* Element i of a grid after receiving: inside the box, the sender's; else our own. */
static int count_grid_bad(aql_buf *b, float mine, float theirs, int (*inside)(int r, int c),
			  int (*from)(int r, int c))
{
	const float *h = aql_buf_data_const(b, float);
	int bad = 0;

	if (!h)
		return -1;
	for (int r = 0; r < ROWS; r++)
		for (int c = 0; c < COLS; c++) {
			float want = inside(r, c) ? theirs + (float)from(r, c) : mine + (float)(r * COLS + c);

			bad += h[r * COLS + c] != want;
		}
	return bad;
}

/* Vector: the sender's column 5 lands in our column 2. */
static int in_col2(int r, int c)
{
	(void)r;
	return c == 2;
}

static int from_col5(int r, int c)
{
	(void)c;
	return r * COLS + 5;
}

/* Subarray: the sender's box rows 1..3, cols 2..5 lands at rows 2..4, cols 4..7. */
static int in_box(int r, int c)
{
	return r >= 2 && r < 5 && c >= 4;
}

static int from_box(int r, int c)
{
	return (r - 1) * COLS + (c - 2);
}

static void test_layouts(void)
{
	aql_mpi_layout col5 = { .kind = AQL_MPI_VECTOR, .first = 5, .blocks = ROWS, .blocklen = 1,
				.stride = COLS };
	aql_mpi_layout col2 = col5;
	aql_mpi_layout box_out = { .kind = AQL_MPI_SUBARRAY, .start = { 1, 2 }, .size = { 3, 4 } };
	aql_mpi_layout box_in = { .kind = AQL_MPI_SUBARRAY, .start = { 2, 4 }, .size = { 3, 4 } };
	float mine = 1000.0f * (float)rank, theirs = 1000.0f * (float)prev();
	aql_buf *out = grid("grid out", mine), *in = grid("grid in", mine), *view = NULL;
	MPI_Datatype dt;
	uint64_t first;
	int count, derived, bad;

	col2.first = 2;
	/* A derived datatype, one of it, not a packed copy. */
	CHECK_OK(aql_mpi_describe(out, &col5, &dt, &count, &first, &derived));
	if (derived) {
		int combiner, ni, na, nd;

		MPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner);
		CHECK(combiner == MPI_COMBINER_VECTOR && count == 1 && first == 5,
		      "vector: combiner %d count %d first %" PRIu64, combiner, count, first);
		MPI_Type_free(&dt);
	}
	CHECK(derived, "a vector layout gives a derived datatype");
	CHECK_OK(aql_mpi_describe(out, &box_out, &dt, &count, &first, &derived));
	if (derived) {
		int combiner, ni, na, nd;

		MPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner);
		CHECK(combiner == MPI_COMBINER_SUBARRAY && count == 1 && first == 0,
		      "subarray: combiner %d count %d", combiner, count);
		MPI_Type_free(&dt);
	}

	if (rank % 2 == 0) {
		CHECK_OK(aql_mpi_send(out, &col5, next(), 200, comm));
		CHECK_OK(aql_mpi_recv(in, &col2, prev(), 200, comm, MPI_STATUS_IGNORE));
	} else {
		CHECK_OK(aql_mpi_recv(in, &col2, prev(), 200, comm, MPI_STATUS_IGNORE));
		CHECK_OK(aql_mpi_send(out, &col5, next(), 200, comm));
	}
	bad = count_grid_bad(in, mine, theirs, in_col2, from_col5);
	CHECK(bad == 0, "vector: %d elements wrong", bad);

	CHECK_OK(aql_buf_destroy(in));
	in = grid("grid in", mine);
	if (rank % 2 == 0) {
		CHECK_OK(aql_mpi_send(out, &box_out, next(), 201, comm));
		CHECK_OK(aql_mpi_recv(in, &box_in, prev(), 201, comm, MPI_STATUS_IGNORE));
	} else {
		CHECK_OK(aql_mpi_recv(in, &box_in, prev(), 201, comm, MPI_STATUS_IGNORE));
		CHECK_OK(aql_mpi_send(out, &box_out, next(), 201, comm));
	}
	bad = count_grid_bad(in, mine, theirs, in_box, from_box);
	CHECK(bad == 0, "subarray: %d elements wrong", bad);

	/* A vector over a view counts from the view's first element. */
	CHECK_OK(aql_buf_slice(out, COLS, 2 * COLS, &view));
	if (view) {
		aql_mpi_layout pair = { .kind = AQL_MPI_VECTOR, .first = 1, .blocks = 2,
					.blocklen = 2, .stride = COLS };
		aql_mpi_layout past = pair;
		aql_mpi_layout box = { .kind = AQL_MPI_SUBARRAY, .size = { 1, 1 } };
		float got[4] = { 0 };

		past.first = COLS - 1;
		CHECK(aql_mpi_describe(view, &past, &dt, &count, &first, &derived) ==
		      AQL_ERR_INVALID_ARG && th_error_has("past the buffer's 16"),
		      "a vector past the view's end refused");
		CHECK(aql_mpi_describe(view, &box, &dt, &count, &first, &derived) ==
		      AQL_ERR_INVALID_ARG && th_error_has("a view"), "a subarray of a view refused");
		if (rank == 0)
			CHECK_OK(aql_mpi_send(view, &pair, 1, 202, comm));
		if (rank == 1) {
			MPI_Recv(got, 4, MPI_FLOAT, 0, 202, comm, MPI_STATUS_IGNORE);
			/* Elements 1, 2, 9, 10 of the view: 9, 10, 17, 18 of the grid. */
			CHECK(got[0] == 9.0f && got[1] == 10.0f && got[2] == 17.0f && got[3] == 18.0f,
			      "view vector: %g %g %g %g", got[0], got[1], got[2], got[3]);
		}
		CHECK_OK(aql_buf_destroy(view));
	}
	{
		aql_mpi_layout bad_stride = { .kind = AQL_MPI_VECTOR, .blocks = 2, .blocklen = 3,
					      .stride = 2 };
		aql_mpi_layout bad_box = { .kind = AQL_MPI_SUBARRAY, .start = { 4, 0 },
					   .size = { 3, 1 } };
		aql_mpi_layout bad_kind = { .kind = (enum aql_mpi_layout_kind)9 };

		CHECK(aql_mpi_send(out, &bad_stride, next(), 203, comm) == AQL_ERR_INVALID_ARG &&
		      th_error_has("stride of at least blocklen"), "overlapping blocks refused");
		CHECK(aql_mpi_send(out, &bad_box, next(), 203, comm) == AQL_ERR_INVALID_ARG &&
		      th_error_has("dimension 0") && th_error_has("grid out"),
		      "a box past the extent refused");
		CHECK(aql_mpi_send(out, &bad_kind, next(), 203, comm) == AQL_ERR_INVALID_ARG &&
		      th_error_has("unknown layout kind 9"), "unknown kind refused");
	}
	CHECK_OK(aql_buf_destroy(out));
	CHECK_OK(aql_buf_destroy(in));
}

static void test_collectives(void)
{
	aql_buf *b = new_buf(AQL_TYPE(double), N, "bcast"), *s = new_buf(AQL_TYPE(int32_t), N, "sum in");
	aql_buf *r = new_buf(AQL_TYPE(int32_t), N, "sum out"), *g = NULL, *part;
	aql_buf *short_r = new_buf(AQL_TYPE(int32_t), N - 1, "short sum");
	aql_mpi_layout odd = { .kind = AQL_MPI_VECTOR, .first = 1, .blocks = N / 2, .blocklen = 1,
			       .stride = 2 };
	double *hb = aql_buf_data(b, double);
	int32_t *hs = aql_buf_data(s, int32_t);
	const int32_t *hr;
	const double *cb;
	int bad = 0;

	for (int i = 0; i < N && hb && hs; i++) {
		hb[i] = rank == 1 ? 0.1 * i : -1.0;
		hs[i] = (rank + 1) * i - 3 * rank;
	}
	/* Broadcast from rank 1. */
	CHECK_OK(aql_mpi_bcast(b, NULL, 1, comm));
	cb = aql_buf_data_const(b, double);
	for (int i = 0; i < N && cb; i++)
		bad += cb[i] != 0.1 * i;
	CHECK(cb && bad == 0, "bcast: %d wrong", bad);

	/* Allreduce, into another buffer and in place. */
	CHECK_OK(aql_mpi_allreduce(s, r, MPI_SUM, comm));
	hr = aql_buf_data_const(r, int32_t);
	bad = 0;
	for (int i = 0; i < N && hr; i++) {
		int32_t want = 0;

		for (int k = 0; k < size; k++)
			want += (k + 1) * i - 3 * k;
		bad += hr[i] != want;
	}
	CHECK(hr && bad == 0, "allreduce: %d wrong", bad);
	CHECK_OK(aql_mpi_allreduce(NULL, s, MPI_MAX, comm));
	hr = aql_buf_data_const(s, int32_t);
	bad = 0;
	for (int i = 0; i < N && hr; i++) {
		int32_t want = i;

		for (int k = 1; k < size; k++)
			want = (k + 1) * i - 3 * k > want ? (k + 1) * i - 3 * k : want;
		bad += hr[i] != want;
	}
	CHECK(hr && bad == 0, "allreduce in place: %d wrong", bad);
	CHECK(aql_mpi_allreduce(s, s, MPI_SUM, comm) == AQL_ERR_INVALID_ARG &&
	      th_error_has("in place"), "the same buffer twice refused");
	CHECK(aql_mpi_allreduce(s, short_r, MPI_SUM, comm) == AQL_ERR_INVALID_ARG &&
	      th_error_has("short sum") && th_error_has("sum in"), "counts that differ refused");

	/* Gather the odd elements of each rank's sum in into rank 0. */
	if (rank == 0)
		g = new_buf(AQL_TYPE(int32_t), (uint64_t)size * (N / 2), "gathered");
	hs = aql_buf_data(s, int32_t);
	for (int i = 0; i < N && hs; i++)
		hs[i] = rank * 100 + i;
	CHECK_OK(aql_mpi_gather(s, &odd, g, 0, comm));
	if (rank == 0) {
		hr = aql_buf_data_const(g, int32_t);
		bad = 0;
		for (int k = 0; k < size && hr; k++)
			for (int j = 0; j < N / 2; j++)
				bad += hr[k * (N / 2) + j] != k * 100 + 2 * j + 1;
		CHECK(hr && bad == 0, "gather: %d wrong", bad);
		/* A receive buffer too small for every rank: refused before MPI is called. */
		CHECK_OK(aql_buf_slice(g, 0, N / 2, &part));
		CHECK(aql_mpi_gather(s, &odd, part, 0, comm) == AQL_ERR_INVALID_ARG &&
		      th_error_has("cannot hold"), "a short gather buffer refused");
		CHECK_OK(aql_buf_destroy(part));
		CHECK_OK(aql_buf_destroy(g));
	}
	CHECK_OK(aql_buf_destroy(b));
	CHECK_OK(aql_buf_destroy(s));
	CHECK_OK(aql_buf_destroy(r));
	CHECK_OK(aql_buf_destroy(short_r));
}

/* MPI's own errors, returned on comm: rank, peer, tag and MPI's string. */
static void test_mpi_errors(void)
{
	aql_buf *big = new_buf(AQL_TYPE(int32_t), 10, "ten"), *small = new_buf(AQL_TYPE(int32_t), 5, "five");
	char want[64];

	if (rank == 0)
		CHECK_OK(aql_mpi_send(big, NULL, 1, 77, comm));
	if (rank == 1) {
		CHECK(aql_mpi_recv(small, NULL, 0, 77, comm, MPI_STATUS_IGNORE) == AQL_ERR_SYSTEM,
		      "a truncated message fails");
		CHECK(th_error_has("MPI_ERR_TRUNCATE") && th_error_has("MPI_Recv of five") &&
		      th_error_has("rank 1 (peer 0, tag 77)"), "the truncation is named");
	}
	CHECK(aql_mpi_send(big, NULL, size + 3, 78, comm) == AQL_ERR_SYSTEM,
	      "a send to rank %d (of %d) fails", size + 3, size);
	snprintf(want, sizeof(want), "rank %d (peer %d, tag 78)", rank, size + 3);
	CHECK(th_error_has("MPI_Send of ten") && th_error_has(want), "the bad peer is named");
	CHECK_OK(aql_buf_destroy(big));
	CHECK_OK(aql_buf_destroy(small));
}

/*
 * Staging: data last written on agent goes out as written, data received
 * reaches the agent's next launch, and a send while a launch writes the
 * buffer is refused.
 */
static void test_staging(aql_agent *agent, const aql_kernel *add)
{
	enum { M = 1000 };
	aql_buf *d = new_buf(AQL_TYPE(int32_t), M, "staged out");
	aql_buf *e = new_buf(AQL_TYPE(int32_t), M, "staged in");
	aql_launch_config c = { .grid = { M } };
	aql_buf_info before, after;
	aql_agent_info ai;
	aql_completion done;
	aql_queue *q = NULL;
	aql_signal *gate;
	int32_t *h = aql_buf_data(d, int32_t);
	const int32_t *g;
	int bad = 0, separate;

	CHECK_OK(aql_agent_get_info(agent, &ai));
	separate = !ai.unified_memory;
	CHECK_OK(aql_queue_create(agent, NULL, &q));
	if (!q || !h)
		th_stop("no queue");
	for (int i = 0; i < M; i++)
		h[i] = i + 1000 * rank;
	/* d: +5 on the agent, where only its copy is current. e: lives there too. */
	CHECK_OK(AQL_LAUNCH(q, add, &c, NULL, AQL_ARG(d), AQL_ARG(5), AQL_ARG((uint32_t)M)));
	CHECK_OK(AQL_LAUNCH(q, add, &c, &done, AQL_ARG(e), AQL_ARG(0), AQL_ARG((uint32_t)M)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));

	/* In order: while a launch still writes d, it is not sent. */
	gate = th_gate_close(q);
	CHECK_OK(AQL_LAUNCH(q, add, &c, &done, AQL_ARG(d), AQL_ARG(0), AQL_ARG((uint32_t)M)));
	CHECK(aql_mpi_send(d, NULL, next(), 300, comm) == AQL_ERR_BUSY &&
	      th_error_has("staged out") && th_error_has("add_i32"),
	      "a send while a launch writes the buffer is refused");
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	aql_signal_destroy(gate);

	CHECK_OK(aql_buf_get_info(d, &before));
	if (rank % 2 == 0) {
		CHECK_OK(aql_mpi_send(d, NULL, next(), 301, comm));
		CHECK_OK(aql_mpi_recv(e, NULL, prev(), 301, comm, MPI_STATUS_IGNORE));
	} else {
		CHECK_OK(aql_mpi_recv(e, NULL, prev(), 301, comm, MPI_STATUS_IGNORE));
		CHECK_OK(aql_mpi_send(d, NULL, next(), 301, comm));
	}
	CHECK_OK(aql_buf_get_info(d, &after));
	CHECK(after.moves_to_host == before.moves_to_host + (uint64_t)separate,
	      "the send staged d back %" PRIu64 " time(s) (agent has %s memory)",
	      after.moves_to_host - before.moves_to_host, separate ? "separate" : "unified");
	/* What e received reaches the agent: +1 there, then read back. */
	CHECK_OK(aql_buf_get_info(e, &before));
	CHECK_OK(AQL_LAUNCH(q, add, &c, &done, AQL_ARG(e), AQL_ARG(1), AQL_ARG((uint32_t)M)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_buf_get_info(e, &after));
	CHECK(after.moves_to_agent == before.moves_to_agent + (uint64_t)separate,
	      "the received data moved to the agent %" PRIu64 " time(s)",
	      after.moves_to_agent - before.moves_to_agent);
	g = aql_buf_data_const(e, int32_t);
	for (int i = 0; i < M && g; i++)
		bad += g[i] != i + 1000 * prev() + 5 + 1;
	CHECK(g && bad == 0, "staged round trip: %d of %d wrong (e[0] %d)", bad, M, g ? g[0] : -1);
	CHECK_OK(aql_buf_destroy(d));
	CHECK_OK(aql_buf_destroy(e));
	CHECK_OK(aql_queue_destroy(q));
}

int main(int argc, char **argv)
{
	aql_host_agent_config cfg = { .workers = 2, .separate_memory = 1 };
	aql_agent *agent = NULL;
	const aql_kernel *add = NULL;
	aql_code_object *co;
	int provided, st;

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: mpiexec -n N test_mpi_typed LAUNCH_KERNELS.host.so [LAUNCH_KERNELS.{ptx,hsaco}]\n");
		return 2;
	}
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		fprintf(stderr, "test_mpi_typed needs 2 or more ranks (mpiexec -n 2)\n");
		MPI_Finalize();
		return 2;
	}
	MPI_Comm_dup(MPI_COMM_WORLD, &comm);
	MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	CHECK(aql_mpi_gpu_aware(AQL_AGENT_CPU) == 0, "the CPU agent needs no GPU support");
	printf("rank %d of %d: MPI GPU-aware for CUDA %d, for HIP %d\n", rank, size,
	       aql_mpi_gpu_aware(AQL_AGENT_NVIDIA), aql_mpi_gpu_aware(AQL_AGENT_AMD));

	test_types();
	test_struct();
	test_layouts();
	test_collectives();
	test_mpi_errors();

	co = th_load_kernels(argv[1], argc == 3 ? argv[2] : NULL);
	CHECK_OK(aql_code_object_kernel(co, "add_i32", &add));
	if (th_test_gpu())
		agent = th_test_agent();
	else
		CHECK_OK(aql_host_agent_create(&cfg, &agent));
	if (add && agent)
		test_staging(agent, add);
	CHECK_OK(aql_code_object_destroy(co));
	if (!th_test_gpu())
		CHECK_OK(aql_agent_destroy(agent));

	MPI_Comm_free(&comm);
	st = th_finish();
	MPI_Finalize();
	return st;
}
