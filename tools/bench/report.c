/* SPDX-License-Identifier: MIT */
/* aql-bench: results and goals as a table, or as JSON lines. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

static const struct result *find_result(const struct ctx *ctx,
					const char *metric)
{
	size_t i;

	for (i = 0; i < ctx->nresults; i++)
		if (!strcmp(ctx->results[i].metric, metric))
			return &ctx->results[i];
	return NULL;
}

/* The number a goal compares: p50 of a latency, median of the others. */
static double headline(const struct result *r)
{
	if (r->kind == RESULT_LATENCY)
		return (double)r->lat.p50;
	if (r->kind == RESULT_RATE)
		return r->rate.median;
	if (r->kind == RESULT_DURATION)
		return r->dur.median;
	return 0;
}

static bool has_headline(const struct result *r)
{
	return r && (r->kind == RESULT_LATENCY || r->kind == RESULT_RATE ||
		     r->kind == RESULT_DURATION);
}

/* A peer's headline in its row's terms: a rate against a latency of ns per
 * item compares with 1e9 / ns items per second (a graph's launches/s). */
static double peer_headline(const struct result *den, const struct result *num)
{
	if (num->kind == RESULT_RATE && den->kind == RESULT_LATENCY)
		return 1e9 / headline(den);
	return headline(den);
}

static bool goal_value(const struct ctx *ctx, const struct goal *g,
		       double *value)
{
	const struct result *num = find_result(ctx, g->num);
	const struct result *den = g->den ? find_result(ctx, g->den) : NULL;

	/* A skipped peer leaves its goals unjudged, not missed. */
	if (!has_headline(num) || (g->den && (!has_headline(den) ||
					      headline(den) == 0)))
		return false;
	*value = headline(num) / (den ? peer_headline(den, num) : 1.0);
	return true;
}

static bool goal_met(const struct goal *g, double value)
{
	return g->at_least ? value >= g->goal : value <= g->goal;
}

static const char *fmt_rate(char *buf, size_t len, double v)
{
	if (v >= 1e6)
		snprintf(buf, len, "%.3fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else
		snprintf(buf, len, "%.3g", v);
	return buf;
}

/*
 * A skip reason quoted in JSON: dlerror() text could hold quotes or
 * control bytes; replace them rather than escape, it is only prose.
 */
static const char *json_safe(const char *s)
{
	static char buf[512];
	size_t i;

	snprintf(buf, sizeof(buf), "%s", s);
	for (i = 0; buf[i]; i++)
		if (buf[i] == '"' || buf[i] == '\\' ||
		    (unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e)
			buf[i] = '\'';
	return buf;
}

static const char *rate_unit(const struct result *r)
{
	return r->rate.unit ? r->rate.unit : "dispatches/s";
}

/* extra: fields put before the metric's ("" for none); the row's peer
 * goes with them. */
static void json_result(const struct result *r, const char *extra)
{
	char both[160];

	if (r->peer) {
		snprintf(both, sizeof(both), "%s\"peer\":\"%s\",", extra, r->peer);
		extra = both;
	}
	if (r->kind == RESULT_LATENCY) {
		printf("{%s\"metric\":\"%s\",\"unit\":\"ns\",\"p50\":%" PRIu64
		       ",\"p99\":%" PRIu64 ",\"p999\":%" PRIu64
		       ",\"min\":%" PRIu64 ",\"mean\":%.1f,\"samples\":%zu",
		       extra, r->metric, r->lat.p50, r->lat.p99, r->lat.p999,
		       r->lat.min, r->lat.mean, r->lat.samples);
		/* The distribution for --plot: [fraction, ns] points. */
		for (unsigned i = 0; i < LATENCY_CDF; i++)
			printf("%s[%g,%" PRIu64 "]", i ? "," : ",\"cdf\":[", latency_cdf_p(i),
			       r->lat.cdf[i]);
		printf("]}\n");
	} else if (r->kind == RESULT_RATE)
		printf("{%s\"metric\":\"%s\",\"unit\":\"%s\","
		       "\"value\":%.4g,\"p50\":%.4g,\"min\":%.4g,\"max\":%.4g,"
		       "\"rounds\":%" PRIu32 ",\"threads\":%" PRIu32 "}\n",
		       extra, r->metric, rate_unit(r), r->rate.median, r->rate.median, r->rate.min,
		       r->rate.max, r->rate.rounds, r->rate.threads);
	else if (r->kind == RESULT_DURATION)
		printf("{%s\"metric\":\"%s\",\"unit\":\"%s\",\"value\":%.4f,"
		       "\"p50\":%.4f,\"p90\":%.4f,\"min\":%.4f,\"max\":%.4f,"
		       "\"rounds\":%" PRIu32 ",\"reps\":%" PRIu32
		       ",\"kernels\":%" PRIu32 "}\n",
		       extra, r->metric, r->dur.unit, r->dur.median, r->dur.median,
		       r->dur.p90, r->dur.min, r->dur.max, r->dur.rounds,
		       r->dur.reps, r->dur.kernels);
	else if (r->kind == RESULT_SKIPPED)
		printf("{%s\"metric\":\"%s\",\"skipped\":true,"
		       "\"reason\":\"%s\"}\n", extra, r->metric,
		       json_safe(r->skipped));
}

static void json_goal(const struct ctx *ctx, const struct goal *g)
{
	double v;

	if (!goal_value(ctx, g, &v)) {
		printf("{\"metric\":\"%s\",\"skipped\":true}\n", g->metric);
		return;
	}
	printf("{\"metric\":\"%s\",\"num\":\"%s\",", g->metric, g->num);
	if (g->den)
		printf("\"den\":\"%s\",", g->den);
	if (g->unit)
		printf("\"unit\":\"%s\",", g->unit);
	printf("\"value\":%.4f,\"goal\":%g,\"cmp\":\"%s\",\"met\":%s}\n",
	       v, g->goal, g->at_least ? ">=" : "<=",
	       ctx->no_verdict ? "null" : goal_met(g, v) ? "true" : "false");
}

void print_json(const struct ctx *ctx, const struct mode *m)
{
	size_t i;

	for (i = 0; i < ctx->nresults; i++)
		json_result(&ctx->results[i], "");
	for (i = 0; i < m->ngoals; i++)
		json_goal(ctx, &m->goals[i]);
}

static bool any_of_kind(const struct ctx *ctx, enum result_kind kind)
{
	size_t i;

	for (i = 0; i < ctx->nresults; i++)
		if (ctx->results[i].kind == kind)
			return true;
	return false;
}

static void table_latency(const struct ctx *ctx)
{
	const struct result *r;
	size_t i;

	printf("%-30s %9s %9s %9s %9s %11s %8s\n", "latency (ns)", "p50",
	       "p99", "p99.9", "min", "mean", "samples");
	for (i = 0; i < ctx->nresults; i++) {
		r = &ctx->results[i];
		if (r->kind != RESULT_LATENCY)
			continue;
		printf("  %-28s %9" PRIu64 " %9" PRIu64 " %9" PRIu64
		       " %9" PRIu64 " %11.1f %8zu\n", r->metric, r->lat.p50,
		       r->lat.p99, r->lat.p999, r->lat.min, r->lat.mean,
		       r->lat.samples);
	}
}

static void table_rate(const struct ctx *ctx)
{
	const struct result *r;
	char a[32], b[32], c[32];
	size_t i;

	printf("%-30s %9s %9s %9s %6s %7s  %s\n", "throughput", "median",
	       "min", "max", "rounds", "threads", "unit");
	for (i = 0; i < ctx->nresults; i++) {
		r = &ctx->results[i];
		if (r->kind != RESULT_RATE)
			continue;
		printf("  %-28s %9s %9s %9s %6" PRIu32 " %7" PRIu32 "  %s\n",
		       r->metric, fmt_rate(a, sizeof(a), r->rate.median),
		       fmt_rate(b, sizeof(b), r->rate.min),
		       fmt_rate(c, sizeof(c), r->rate.max), r->rate.rounds,
		       r->rate.threads, rate_unit(r));
	}
}

/* Durations, and the peers that were skipped with the reason. */
static void table_duration(const struct ctx *ctx)
{
	const struct result *r;
	size_t i;

	printf("%-30s %10s %10s %10s %10s %9s %6s %6s\n", "time", "median",
	       "p90", "min", "max", "unit", "rounds", "reps");
	for (i = 0; i < ctx->nresults; i++) {
		r = &ctx->results[i];
		if (r->kind == RESULT_SKIPPED)
			printf("  %-28s %s\n", r->metric, r->skipped);
		if (r->kind != RESULT_DURATION)
			continue;
		printf("  %-28s %10.4f %10.4f %10.4f %10.4f %9s %6" PRIu32
		       " %6" PRIu32 "\n", r->metric, r->dur.median, r->dur.p90,
		       r->dur.min, r->dur.max, r->dur.unit, r->dur.rounds,
		       r->dur.reps);
	}
}

static void table_goals(const struct ctx *ctx, const struct mode *m)
{
	const struct goal *g;
	char v[32], gv[32];
	double value;
	size_t i;

	printf("%-52s %9s %11s\n", "goals (reported, not enforced)", "value",
	       "goal");
	for (i = 0; i < m->ngoals; i++) {
		g = &m->goals[i];
		if (!goal_value(ctx, g, &value)) {
			printf("  %-50s %9s\n", g->label, "skipped");
			continue;
		}
		if (g->den) {
			snprintf(v, sizeof(v), "%.3f", value);
			snprintf(gv, sizeof(gv), "%.2f", g->goal);
		} else {
			fmt_rate(v, sizeof(v), value);
			fmt_rate(gv, sizeof(gv), g->goal);
		}
		printf("  %-50s %9s %2s %8s  %s\n", g->label, v,
		       g->at_least ? ">=" : "<=", gv,
		       ctx->no_verdict ? ctx->no_verdict : goal_met(g, value) ? "ok" : "MISSED");
	}
}

/* Only the tables this mode has results for. */
void print_table(const struct ctx *ctx, const struct mode *m)
{
	if (any_of_kind(ctx, RESULT_LATENCY)) {
		table_latency(ctx);
		putchar('\n');
	}
	if (any_of_kind(ctx, RESULT_RATE)) {
		table_rate(ctx);
		putchar('\n');
	}
	if (any_of_kind(ctx, RESULT_DURATION) || any_of_kind(ctx, RESULT_SKIPPED)) {
		table_duration(ctx);
		putchar('\n');
	}
	table_goals(ctx, m);
}

/*
 * --contention N: each row of the busy run (N spinning threads beside
 * it) over the same row of the idle run. Throughput rows are judged at
 * >= CONTENTION_RATE_GOAL of idle, latency rows (p50) at <=
 * CONTENTION_LATENCY_GOAL x idle; the machine's own baselines are
 * reported, not judged, and so is a row whose two runs saw different
 * machines (the cross-CPU round trips around them, aql-bench.c: "met"
 * null, and why).
 */
#define CONTENTION_RATE_GOAL	0.5
#define CONTENTION_LATENCY_GOAL	2.0

static void contention_ratio(const struct ctx *idle, const struct result *b,
			     bool json)
{
	const struct result *i = find_result(idle, b->metric);
	bool judged = strncmp(b->metric, "baseline_", 9) != 0;
	bool rate = b->kind == RESULT_RATE;
	double goal = rate ? CONTENTION_RATE_GOAL : CONTENTION_LATENCY_GOAL;
	const char *verdict;
	uint64_t xcpu[4];
	double v;

	if (!has_headline(i) || !has_headline(b) || headline(i) == 0)
		return;
	v = headline(b) / headline(i);
	memcpy(xcpu, i->xcpu_ns, sizeof(i->xcpu_ns));
	memcpy(xcpu + 2, b->xcpu_ns, sizeof(b->xcpu_ns));
	verdict = !xcpu_same(xcpu, 4) ? NULL : (rate ? v >= goal : v <= goal) ? "true" : "false";
	if (json) {
		printf("{\"metric\":\"contention_ratio_%s\",\"value\":%.4f",
		       b->metric, v);
		if (judged)
			printf(",\"goal\":%g,\"cmp\":\"%s\",\"met\":%s", goal,
			       rate ? ">=" : "<=", verdict ? verdict : "null");
		printf(",\"xcpu_rtt_ns\":[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]",
		       xcpu[0], xcpu[1], xcpu[2], xcpu[3]);
		if (judged && !verdict)
			printf(",\"why\":\"cross-CPU round trip %" PRIu64 "-%" PRIu64
			       " ns idle, %" PRIu64 "-%" PRIu64 " ns busy: not one machine\"",
			       xcpu[0], xcpu[1], xcpu[2], xcpu[3]);
		printf("}\n");
		return;
	}
	printf("  %-44s %9.3f", b->metric, v);
	if (judged && verdict)
		printf(" %2s %8.2f  %s", rate ? ">=" : "<=", goal,
		       *verdict == 't' ? "ok" : "MISSED");
	else if (judged)
		printf(" %2s %8.2f  no verdict: cross-CPU round trip %" PRIu64 "-%" PRIu64
		       " ns idle, %" PRIu64 "-%" PRIu64 " ns busy", rate ? ">=" : "<=", goal,
		       xcpu[0], xcpu[1], xcpu[2], xcpu[3]);
	putchar('\n');
}

void print_contention(const struct ctx *idle, const struct ctx *busy,
		      const struct mode *m, uint32_t n, bool json)
{
	char extra[32];
	size_t i;

	if (json) {
		print_json(idle, m);
		snprintf(extra, sizeof(extra), "\"contention\":%" PRIu32 ",", n);
		for (i = 0; i < busy->nresults; i++)
			json_result(&busy->results[i], extra);
	} else {
		printf("== idle ==\n\n");
		print_table(idle, m);
		printf("\n== beside %" PRIu32 " busy thread(s) ==\n\n", n);
		print_table(busy, m);
		printf("\n%-46s %9s %11s\n", "contention ratio (busy / idle)",
		       "value", "goal");
	}
	for (i = 0; i < busy->nresults; i++)
		if (busy->results[i].kind == RESULT_RATE ||
		    busy->results[i].kind == RESULT_LATENCY)
			contention_ratio(idle, &busy->results[i], json);
}
