/* SPDX-License-Identifier: MIT */
/*
 * aql-bench: microbenchmarks for libaql on the default agent, each next to
 * this machine's own limits and to peers measured in the same run. One
 * mode runs per invocation; each mode's file in tools/bench/ says what its
 * metrics measure and how:
 *
 *	(default)	dispatch.c: dispatch round trips and throughput, and
 *			hsa.c: the same through aql's libhsa-runtime64.so.1
 *	--contention N	the default mode idle, then beside N busy threads
 *	--load FILE	load.c: code-object loading, metadata vs comgr
 *	--read FILE	read.c: file loads, io_uring vs read()
 *	--channel	channel.c: device-to-host channels, vs DPDK rte_ring
 *	--agent cuda	cuda.c: the CUDA agent, vs the raw driver API
 *	--agent amd	amd.c: the AMD agent over /dev/kfd
 *	--mpi		mpi.c: queue-ordered MPI vs plain MPI calls, under
 *			mpiexec -n 2 (built against one MPI, or refused)
 *
 * --plot DIR also writes the run's JSON lines to DIR/aql-bench-MODE.json
 * and has tools/aql-bench-plot draw each latency row's distribution next
 * to its peer's (DIR/aql-bench-MODE.png and .svg).
 *
 * The goals printed at the end are reported, never enforced: the exit
 * status only says whether every run succeeded.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"

#define QUEUE_SIZE		4096u
#define MAX_CONTENTION		64u

static const struct sizes full_sizes = {
	.warmup = 2000,
	.spin_samples = 50000,
	.block_samples = 20000,
	.packets = 200000,
	.rounds = 9,
	.load_rounds = 21,
	.meta_rounds = 21,
	.meta_round_ns = 20000000,
};

static const struct sizes quick_sizes = {
	.warmup = 200,
	.spin_samples = 5000,
	.block_samples = 2000,
	.packets = 20000,
	.rounds = 5,
	.load_rounds = 5,
	.meta_rounds = 5,
	.meta_round_ns = 2000000,
};

static const struct mode *const modes[] = {
	&bench_mode_dispatch,
	&bench_mode_load,
	&bench_mode_read,
	&bench_mode_channel,
	&bench_mode_cuda,
	&bench_mode_amd,
	&bench_mode_mpi,
};

static const struct mode *find_mode(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(modes); i++)
		if (!strcmp(modes[i]->name, name))
			return modes[i];
	return NULL;
}

/*
 * --contention compares each row across two runs, which means nothing if
 * the machine changed in between. A virtual machine's can: on the 2-vCPU
 * VM of issue 23 the round trip of cache lines between the two CPUs (each
 * side writing its own) was 80-150 ns for seconds, then 480-530 ns, idle
 * or busy, in plain programs as well (the host's doing, where it runs the
 * virtual CPUs most likely), and every hand-off between a submitter and
 * its queue's processor moved with it (dispatch_rtt_spin_so 170 -> 560
 * ns). So in both runs xcpu_rtt_ns() brackets each row, and a row is kept
 * when its two figures and, in the busy run, the idle row's show one
 * machine (xcpu_same(); on one CPU, always). Otherwise the row runs once
 * more: in the idle run at once, in the busy run once the machine is the
 * idle row's again (polled every XCPU_POLL_NS, for at most XCPU_ROW_NS,
 * and XCPU_RUN_NS per run, so that a run stays short; not at all if it
 * does not come back). A row still measured on two machines stands, and
 * report.c gives its ratio no verdict. Rows that report another row's
 * figure (as the _hsa rows do) come right after it and keep it.
 */
#define XCPU_TRIES	2
#define XCPU_POLL_NS	(50ull * 1000000ull)
#define XCPU_ROW_NS	(2ull * 1000000000ull)
#define XCPU_RUN_NS	(10ull * 1000000000ull)

static bool xcpu_kept(const struct result *res, const struct result *was)
{
	const uint64_t ns[4] = { res->xcpu_ns[0], res->xcpu_ns[1],
				 was ? was->xcpu_ns[0] : res->xcpu_ns[0],
				 was ? was->xcpu_ns[1] : res->xcpu_ns[1] };

	return (res->kind != RESULT_LATENCY && res->kind != RESULT_RATE) ||
	       xcpu_same(ns, 4);
}

/* Whether the machine is was's again within XCPU_ROW_NS and *left_ns,
 * which loses the time spent. */
static bool xcpu_await(const struct result *was, uint64_t *left_ns)
{
	const struct timespec poll = { 0, XCPU_POLL_NS };
	uint64_t t0 = now_ns(), spent, ns[3] = { 0, was->xcpu_ns[0], was->xcpu_ns[1] };
	uint64_t limit = *left_ns < XCPU_ROW_NS ? *left_ns : XCPU_ROW_NS;
	bool same;

	for (;;) {
		ns[0] = xcpu_rtt_ns();
		same = xcpu_same(ns, 3);
		spent = now_ns() - t0;
		if (same || spent >= limit)
			break;
		nanosleep(&poll, NULL);
	}
	*left_ns -= spent < *left_ns ? spent : *left_ns;
	return same;
}

/* Bench i into res; in a --contention run, bracketed by xcpu_rtt_ns(). */
static int run_row(struct ctx *ctx, const struct mode *m, size_t i, struct result *res)
{
	memset(res, 0, sizeof(*res));
	res->metric = m->benches[i].metric;
	for (size_t j = 0; j < m->npeers; j++)
		if (!strcmp(m->peers[j].metric, res->metric))
			res->peer = m->peers[j].peer;
	if (!ctx->opts->contention)
		return m->benches[i].run(ctx, res);
	res->xcpu_ns[0] = xcpu_rtt_ns();
	if (m->benches[i].run(ctx, res))
		return -1;
	res->xcpu_ns[1] = xcpu_rtt_ns();
	return 0;
}

/* idle: the idle run's results when this is the busy run, else NULL. */
static int run_mode(struct ctx *ctx, const struct mode *m, const struct ctx *idle)
{
	uint64_t left_ns = XCPU_RUN_NS;
	struct result *res;
	size_t i;

	for (i = 0; i < m->nbenches; i++) {
		const struct result *was = idle && i < idle->nresults ? &idle->results[i] : NULL;

		progress(i + 1, m->nbenches, m->benches[i].metric);
		res = &ctx->results[ctx->nresults];
		for (int tries = 1;; tries++) {
			if (run_row(ctx, m, i, res))
				return -1;
			if (!ctx->opts->contention || xcpu_kept(res, was) || tries == XCPU_TRIES ||
			    (was && !xcpu_await(was, &left_ns)))
				break;
		}
		ctx->nresults++;
	}
	progress_clear();
	return 0;
}

/*
 * --contention: N threads that only spin, unpinned, as `while :; do :;
 * done` shells would: each wants a whole CPU, so the runtime's threads
 * get what the scheduler leaves them.
 */
struct busy {
	pthread_t *threads;
	uint32_t n;
	int stop;
};

static void *busy_main(void *arg)
{
	struct busy *b = arg;

	while (!__atomic_load_n(&b->stop, __ATOMIC_RELAXED))
		;
	return NULL;
}

static void busy_stop(struct busy *b)
{
	__atomic_store_n(&b->stop, 1, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < b->n; i++)
		pthread_join(b->threads[i], NULL);
	free(b->threads);
}

static int busy_start(struct busy *b, uint32_t n)
{
	int err;

	*b = (struct busy){ .threads = calloc(n, sizeof(pthread_t)) };
	if (!b->threads)
		return fail_errno("calloc", ENOMEM);
	for (; b->n < n; b->n++) {
		err = pthread_create(&b->threads[b->n], NULL, busy_main, b);
		if (err) {
			busy_stop(b);
			return fail_errno("pthread_create", err);
		}
	}
	return 0;
}

/* The mode idle, then again beside opts->contention busy threads. */
static int run_contention(struct ctx *idle, const struct mode *m)
{
	uint32_t n = idle->opts->contention;
	struct ctx *busy = malloc(sizeof(*busy));
	struct busy b;
	int rc = -1;

	if (!busy)
		return fail_errno("malloc", ENOMEM);
	*busy = *idle;
	if (run_mode(idle, m, NULL) || busy_start(&b, n))
		goto out;
	rc = run_mode(busy, m, idle);
	busy_stop(&b);
	if (!rc)
		print_contention(idle, busy, m, n, idle->opts->json);
out:
	free(busy);
	return rc;
}

/* Fit the default queue size under the agent's limit. */
static int ctx_init(struct ctx *ctx, const struct opts *o)
{
	aql_agent_info info;
	aql_status st;

	memset(ctx, 0, sizeof(*ctx));
	ctx->opts = o;
	ctx->sz = o->quick ? quick_sizes : full_sizes;
	st = aql_agent_default(&ctx->agent);
	if (st != AQL_OK)
		return fail("aql_agent_default", st);
	st = aql_agent_get_info(ctx->agent, &info);
	if (st != AQL_OK)
		return fail("aql_agent_get_info", st);
	ctx->queue_size = QUEUE_SIZE;
	if (info.max_queue_size && info.max_queue_size < QUEUE_SIZE)
		ctx->queue_size = info.max_queue_size;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: aql-bench [--json] [--quick] [--threads N] [--help]\n"
		"       aql-bench [--json] [--quick] [--threads N] --contention N\n"
		"       aql-bench [--json] [--quick] --load FILE\n"
		"       aql-bench [--json] [--quick] --read FILE\n"
		"       aql-bench [--json] [--quick] --channel\n"
		"       aql-bench [--json] [--quick] --agent cuda|amd\n"
		"       mpiexec -n 2 aql-bench [--json] [--quick] --mpi\n"
		"       any of these but --contention with --plot DIR\n"
		"\n"
		"Dispatch microbenchmarks on the default agent, with machine\n"
		"baselines from the same run and the goals they are judged by.\n"
		"With --load, code-object loading and metadata reading instead,\n"
		"next to the ROCm code object manager (comgr) if installed.\n"
		"\n"
		"  --json       JSON lines on stdout, one object per metric\n"
		"  --quick      about 10x fewer iterations (CI smoke runs)\n"
		"  --threads N  submitting threads for dispatch_throughput_mp\n"
		"               (default %u, 1..%u)\n"
		"  --contention N  run the rows idle, then beside N busy\n"
		"               threads (1..%u), and print each row's ratio\n"
		"               to its idle value (contention_ratio_<row>)\n"
		"  --load FILE  time loading the code object FILE and reading\n"
		"               its metadata (AQL_BENCH_COMGR: comgr library\n"
		"               to dlopen, default " COMGR_DEFAULT_LIB ")\n"
		"  --read FILE  time reading FILE into memory: io_uring\n"
		"               (aql_file_read) vs read(), cached and uncached\n"
		"  --channel    channel messages/s with 1, 2, 8 producers and\n"
		"               send-to-receive latency, next to DPDK rte_ring\n"
		"               when built with libdpdk\n"
		"  --agent cuda launches, round trips, chains and copies on\n"
		"               NVIDIA agent 0 next to the raw driver API\n"
		"               (exit 77 when there is no NVIDIA agent)\n"
		"  --agent amd  round trips, dispatch throughput and typed-\n"
		"               launch overhead of an empty kernel, and copy\n"
		"               bandwidth, on AMD agent 0 (exit 77 when\n"
		"               there is no AMD agent)\n"
		"  --mpi        under mpiexec -n 2: MPI ping-pong, plain and\n"
		"               queue-ordered (libaql-mpi), the trigger from a\n"
		"               kernel's completion to its send, and a Jacobi\n"
		"               step with and without host waits (exit 77\n"
		"               when built without MPI)\n"
		"  --plot DIR   also write the JSON lines to DIR/aql-bench-MODE.json\n"
		"               and draw each latency row's distribution next\n"
		"               to its peer's (DIR/aql-bench-MODE.png, .svg) with\n"
		"               aql-bench-plot (matplotlib; AQL_BENCH_PLOT: the\n"
		"               script to run instead)\n"
		"  --help       show this text\n"
		"\n"
		"Goals are reported, not enforced; the exit status is non-zero\n"
		"only if a run failed.\n", DEFAULT_THREADS, MAX_THREADS, MAX_CONTENTION);
}

static int parse_count(const char *s, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* Returns -1 to exit with failure, 1 to exit successfully, 0 to run. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "quick", no_argument, NULL, 'q' },
		{ "threads", required_argument, NULL, 't' },
		{ "contention", required_argument, NULL, 'C' },
		{ "load", required_argument, NULL, 'l' },
		{ "read", required_argument, NULL, 'r' },
		{ "channel", no_argument, NULL, 'c' },
		{ "agent", required_argument, NULL, 'a' },
		{ "mpi", no_argument, NULL, 'm' },
		{ "plot", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->json = false;
	o->quick = false;
	o->threads = DEFAULT_THREADS;
	o->contention = 0;
	o->mode = "dispatch";
	o->path = NULL;
	o->plot = NULL;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o->json = true;
			break;
		case 'q':
			o->quick = true;
			break;
		case 't':
			if (parse_count(optarg, MAX_THREADS, &o->threads)) {
				fprintf(stderr, "aql-bench: --threads wants "
					"1..%u, got '%s'\n", MAX_THREADS, optarg);
				return -1;
			}
			break;
		case 'C':
			if (parse_count(optarg, MAX_CONTENTION, &o->contention)) {
				fprintf(stderr, "aql-bench: --contention wants "
					"1..%u, got '%s'\n", MAX_CONTENTION, optarg);
				return -1;
			}
			break;
		case 'l':
			o->mode = "load";
			o->path = optarg;
			break;
		case 'r':
			o->mode = "read";
			o->path = optarg;
			break;
		case 'c':
			o->mode = "channel";
			o->path = NULL;
			break;
		case 'a':
			if (strcmp(optarg, "cuda") && strcmp(optarg, "amd")) {
				fprintf(stderr, "aql-bench: --agent takes 'cuda' or 'amd', "
					"got '%s'\n", optarg);
				return -1;
			}
			o->mode = optarg;
			o->path = NULL;
			break;
		case 'm':
			o->mode = "mpi";
			o->path = NULL;
			break;
		case 'p':
			o->plot = optarg;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "aql-bench: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return -1;
	}
	if (o->contention && strcmp(o->mode, "dispatch")) {
		fprintf(stderr, "aql-bench: --contention runs the default mode only\n");
		return -1;
	}
	if (o->contention && o->plot) {
		fprintf(stderr, "aql-bench: --plot draws one run, not the two of --contention\n");
		return -1;
	}
	return 0;
}

/* The first of AQL_BENCH_PLOT, the source tree's script, the installed one. */
static const char *plot_script(void)
{
	const char *env = getenv("AQL_BENCH_PLOT");

	if (env && *env)
		return env;
	if (!access(AQL_BENCH_PLOT_SRC, X_OK))
		return AQL_BENCH_PLOT_SRC;
	return AQL_BENCH_PLOT_INSTALLED;
}

/*
 * --plot DIR: the run's JSON lines into DIR/aql-bench-MODE.json (stdout
 * pointed at the file meanwhile), then the script draws them. 0, 77 when
 * the script says matplotlib is missing, or 1, having said why.
 */
static int plot(const struct ctx *ctx, const struct mode *m, const char *dir)
{
	const char *script = plot_script();
	char json[4096];
	int fd, saved, status;
	pid_t pid;

	if (mkdir(dir, 0777) && errno != EEXIST) {
		fprintf(stderr, "aql-bench: --plot %s: %s\n", dir, strerror(errno));
		return 1;
	}
	if ((size_t)snprintf(json, sizeof(json), "%s/aql-bench-%s.json", dir, m->name) >=
	    sizeof(json)) {
		fprintf(stderr, "aql-bench: --plot: the folder's name is too long\n");
		return 1;
	}
	fflush(stdout);
	fd = open(json, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	saved = fd < 0 ? -1 : dup(STDOUT_FILENO);
	if (fd < 0 || saved < 0 || dup2(fd, STDOUT_FILENO) < 0) {
		fprintf(stderr, "aql-bench: --plot: writing %s: %s\n", json, strerror(errno));
		if (fd >= 0)
			close(fd);
		if (saved >= 0)
			close(saved);
		return 1;
	}
	close(fd);
	print_json(ctx, m);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	pid = fork();
	if (pid == 0) {
		execl(script, script, "--mode", m->name, "--out", dir, json, (char *)NULL);
		fprintf(stderr, "aql-bench: --plot: running %s: %s\n", script, strerror(errno));
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		fprintf(stderr, "aql-bench: --plot: running %s: %s\n", script, strerror(errno));
		return 1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == BENCH_SKIP)
		return BENCH_SKIP;
	fprintf(stderr, "aql-bench: --plot: %s failed (status %d); the JSON lines are in %s\n",
		script, WIFEXITED(status) ? WEXITSTATUS(status) : -1, json);
	return 1;
}

int main(int argc, char **argv)
{
	const struct mode *m;
	struct opts o;
	struct ctx ctx;
	int rc;

	rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc < 0 ? 2 : 0;
	m = find_mode(o.mode);
	progress_on = isatty(STDERR_FILENO);
	if (ctx_init(&ctx, &o))
		return 1;
	rc = m->setup ? m->setup(&ctx) : 0;
	if (!rc && !o.json && !ctx.quiet && m->banner(&ctx))
		rc = -1;
	if (!rc && o.contention)
		rc = run_contention(&ctx, m) ? -1 : 0;
	else if (!rc)
		rc = run_mode(&ctx, m, NULL);
	if (!rc && !o.contention && !ctx.quiet) {
		if (o.json)
			print_json(&ctx, m);
		else
			print_table(&ctx, m);
		if (o.plot)
			rc = plot(&ctx, m, o.plot);
	}
	if (m->cleanup)
		m->cleanup(&ctx);
	return rc == BENCH_SKIP ? BENCH_SKIP : rc ? 1 : 0;
}

