/* SPDX-License-Identifier: MIT */
/*
 * Profiling stamps of the AMD agent (aql/kfd/clock.c) on the KFD
 * emulation: its GPUs' timestamp counters run at 100 MHz (the model's,
 * or AQL_KFD_EMU_GPU_CLOCK_HZ), and its CP writes their ticks into the
 * completion signals of a profiling queue. Not run on hardware.
 *
 * - AMDKFD_IOC_GET_CLOCK_COUNTERS: the GPU counter at the configured
 *   rate against system_clock_counter (1 GHz); 0 for a gpu_id of none;
 * - a profiled barrier held by a gate the host opens after a sleep: its
 *   stamps, converted (aql_signal_dispatch_time), lie within the host's
 *   clock around it: start after the submit and after the packet before
 *   it ended, end after the gate opened and before the wait returned,
 *   the duration at least half the sleep. Ticks taken as nanoseconds
 *   fail every one of these;
 * - a queue without profiling leaves the stamps 0, and they stay 0;
 * - aql_agent_ticks_to_ns: monotonic in the tick; the identity on the
 *   CPU agent; NULL arguments refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"

#define MS 1000000ull
#define SLEEP_MS 40u
/* Conversion error allowed: ROCr's bound is microseconds; a busy host
 * may add more between two clock reads. */
#define SLACK_NS (2 * MS)

static struct kfd_agent *amd;

static uint64_t expected_hz(void)
{
	const char *hz = getenv("AQL_KFD_EMU_GPU_CLOCK_HZ");

	return hz ? strtoull(hz, NULL, 10) : 100000000u;
}

static int counters(uint32_t gpu_id, struct kfd_ioctl_get_clock_counters_args *c)
{
	*c = (struct kfd_ioctl_get_clock_counters_args){ .gpu_id = gpu_id };
	return amd->process->sys->ioctl(amd->process->fd, AMDKFD_IOC_GET_CLOCK_COUNTERS, c);
}

/* The counter's rate, measured over SLEEP_MS, within 5 % of the setting. */
static void check_counters(void)
{
	struct kfd_ioctl_get_clock_counters_args a, b;
	double hz;

	CHECK(counters(amd->node->gpu_id, &a) == 0, "GET_CLOCK_COUNTERS");
	th_sleep_ms(SLEEP_MS);
	CHECK(counters(amd->node->gpu_id, &b) == 0, "GET_CLOCK_COUNTERS");
	CHECK(a.system_clock_freq == 1000000000u && b.gpu_clock_counter > a.gpu_clock_counter &&
	      b.system_clock_counter > a.system_clock_counter,
	      "counters: gpu %llu -> %llu, system %llu -> %llu at %llu Hz",
	      (unsigned long long)a.gpu_clock_counter, (unsigned long long)b.gpu_clock_counter,
	      (unsigned long long)a.system_clock_counter,
	      (unsigned long long)b.system_clock_counter,
	      (unsigned long long)a.system_clock_freq);
	hz = (double)(b.gpu_clock_counter - a.gpu_clock_counter) * 1e9 /
	     (double)(b.system_clock_counter - a.system_clock_counter);
	CHECK(hz > 0.95 * (double)expected_hz() && hz < 1.05 * (double)expected_hz(),
	      "GPU counter at %.0f Hz, want %llu", hz, (unsigned long long)expected_hz());
	/* kfd_ioctl_get_clock_counters: no pdd, counter 0, no error */
	CHECK(counters(0xdead, &a) == 0 && a.gpu_clock_counter == 0 && a.system_clock_counter,
	      "a gpu_id of no GPU: counter %llu", (unsigned long long)a.gpu_clock_counter);
}

static aql_packet barrier(aql_signal *dep, aql_signal *done)
{
	aql_packet p = { 0 };

	p.barrier.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					     AQL_FENCE_SYSTEM);
	p.barrier.dep_signal[0] = dep ? aql_signal_handle(dep) : 0;
	p.barrier.completion_signal = aql_signal_handle(done);
	return p;
}

static void check_profiled(void)
{
	aql_queue_config c = { .size = 64, .flags = AQL_QUEUE_PROFILING };
	aql_signal *first = th_signal(1), *gate = th_signal(1), *done = th_signal(1);
	uint64_t submit, release, returned, start0, end0, start, end;
	aql_packet p[2] = { barrier(NULL, first), barrier(gate, done) };
	aql_queue *q = NULL;

	CHECK_OK(aql_queue_create(&amd->base, &c, &q));
	if (!q)
		th_stop("no queue");
	submit = th_now_ns();
	CHECK_OK(th_submit_all(q, p, 2));
	/* the CP is on the gated barrier once the first completed */
	CHECK(th_wait_done(first) == 0, "first barrier");
	th_sleep_ms(SLEEP_MS);
	release = th_now_ns();
	aql_signal_store(gate, 0, AQL_RELEASE);
	CHECK(th_wait_done(done) == 0, "gated barrier");
	returned = th_now_ns();
	CHECK(done->start_ts && done->end_ts >= done->start_ts, "raw stamps %llu..%llu",
	      (unsigned long long)done->start_ts, (unsigned long long)done->end_ts);
	CHECK_OK(aql_signal_dispatch_time(&amd->base, first, &start0, &end0));
	CHECK_OK(aql_signal_dispatch_time(&amd->base, done, &start, &end));
	printf("submit +0, first %+.3f..%+.3f ms, gated %+.3f..%+.3f ms, gate opened %+.3f, "
	       "wait returned %+.3f ms\n", ((double)start0 - (double)submit) / 1e6,
	       ((double)end0 - (double)submit) / 1e6, ((double)start - (double)submit) / 1e6,
	       ((double)end - (double)submit) / 1e6, ((double)release - (double)submit) / 1e6,
	       ((double)returned - (double)submit) / 1e6);
	CHECK(start0 + SLACK_NS >= submit && start0 <= end0 && end0 <= start + SLACK_NS,
	      "first barrier %llu..%llu ns, submitted at %llu, the next began at %llu",
	      (unsigned long long)start0, (unsigned long long)end0, (unsigned long long)submit,
	      (unsigned long long)start);
	CHECK(start <= end && end + SLACK_NS >= release && end <= returned + SLACK_NS,
	      "gated barrier %llu..%llu ns; gate opened at %llu, wait returned at %llu",
	      (unsigned long long)start, (unsigned long long)end, (unsigned long long)release,
	      (unsigned long long)returned);
	CHECK(end - start >= SLEEP_MS * MS / 2 && end - start <= returned - submit + SLACK_NS,
	      "gated barrier took %llu ns: held %u ms, %llu ns from submit to return",
	      (unsigned long long)(end - start), SLEEP_MS,
	      (unsigned long long)(returned - submit));
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(first);
	aql_signal_destroy(gate);
	aql_signal_destroy(done);
}

static void check_unprofiled(void)
{
	aql_queue_config c = { .size = 64 };
	aql_signal *done = th_signal(1);
	aql_packet p = barrier(NULL, done);
	uint64_t start = 1, end = 1;
	aql_queue *q = NULL;

	CHECK_OK(aql_queue_create(&amd->base, &c, &q));
	if (!q)
		th_stop("no queue");
	CHECK_OK(th_submit(q, &p));
	CHECK(th_wait_done(done) == 0, "barrier");
	CHECK(done->start_ts == 0 && done->end_ts == 0, "unprofiled stamps %llu..%llu",
	      (unsigned long long)done->start_ts, (unsigned long long)done->end_ts);
	CHECK_OK(aql_signal_dispatch_time(&amd->base, done, &start, &end));
	CHECK(start == 0 && end == 0, "no stamps became %llu..%llu", (unsigned long long)start,
	      (unsigned long long)end);
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(done);
}

static void check_api(void)
{
	struct kfd_ioctl_get_clock_counters_args c;
	aql_agent *cpu = NULL;
	uint64_t a = 0, b = 0, ns = 0, tick;
	aql_signal *s = th_signal(0);

	CHECK(counters(amd->node->gpu_id, &c) == 0, "GET_CLOCK_COUNTERS");
	tick = c.gpu_clock_counter;
	CHECK_OK(aql_agent_ticks_to_ns(&amd->base, tick, &a));
	CHECK_OK(aql_agent_ticks_to_ns(&amd->base, tick + expected_hz() / 1000, &b));
	/* a millisecond of ticks is a millisecond */
	CHECK(b > a && b - a > 990000 && b - a < 1010000, "1 ms of ticks: %llu ns",
	      (unsigned long long)(b - a));
	/* a tick from before the agent opened */
	CHECK_OK(aql_agent_ticks_to_ns(&amd->base, tick - expected_hz(), &b));
	CHECK(a - b > 990 * MS && a - b < 1010 * MS, "a second of ticks back: %llu ns",
	      (unsigned long long)(a - b));
	CHECK(aql_agent_ticks_to_ns(&amd->base, tick, NULL) == AQL_ERR_INVALID_ARG &&
	      aql_agent_ticks_to_ns(NULL, tick, &ns) == AQL_ERR_INVALID_ARG,
	      "NULL arguments accepted");
	CHECK(aql_signal_dispatch_time(&amd->base, NULL, &a, &b) == AQL_ERR_INVALID_ARG &&
	      aql_signal_dispatch_time(&amd->base, s, NULL, &b) == AQL_ERR_INVALID_ARG,
	      "NULL arguments accepted");
	CHECK_OK(aql_agent_default(&cpu));
	if (cpu) {
		CHECK_OK(aql_agent_ticks_to_ns(cpu, 123456789, &ns));
		CHECK(ns == 123456789, "the CPU agent's stamps are ns: %llu",
		      (unsigned long long)ns);
	}
	aql_signal_destroy(s);
}

int main(void)
{
	aql_agent *agent = NULL;

	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	amd = (struct kfd_agent *)agent;
	printf("%s, GPU counter at %llu Hz\n", amd->node->gfx,
	       (unsigned long long)expected_hz());
	check_counters();
	check_profiled();
	check_unprofiled();
	check_api();
	CHECK_OK(aql_agent_destroy(agent));
	return th_finish();
}
