/* SPDX-License-Identifier: MIT */
/*
 * Profiling stamps of an AMD GPU as aql's nanoseconds. The CP writes the
 * GPU's timestamp counter (RLC_GPU_CLOCK_COUNT: 100 MHz on MI200 and
 * MI300, soc15.c soc15_get_xclk) into a profiled packet's completion
 * signal. AMDKFD_IOC_GET_CLOCK_COUNTERS reads that counter together with
 * CLOCK_BOOTTIME (system_clock_counter, 1 GHz) and CLOCK_MONOTONIC_RAW
 * (kfd_chardev.c kfd_ioctl_get_clock_counters); aql's clock is
 * CLOCK_MONOTONIC (util/clock.h), which runs with BOOTTIME and differs
 * from it by the time suspended, read beside each sample.
 *
 * ROCr's way (amd_gpu_agent.cpp GpuAgent::TranslateTime): a first sample
 * t0 at open, a second t1 taken when a tick lies too far beyond it, and
 * ticks mapped on the line through both, so the ratio of the two clocks
 * is measured rather than taken from a nominal frequency. A tick is
 * extrapolated past t1 by at most a quarter of t1 - t0 and 1/16 s;
 * ticks before t0 use the first ratio found. Not run on hardware.
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"
#include "util/error.h"

#define NS_PER_S 1000000000ull
#define MAX_EXTRAPOLATION_NS (NS_PER_S / 16)

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* One correlated pair: 0, or AQL_ERR_DEVICE with the reason kept. */
static aql_status sample(struct kfd_agent *a, struct kfd_clock_sample *s)
{
	struct kfd_ioctl_get_clock_counters_args c = { .gpu_id = a->node->gpu_id };
	int r = aql_kfd_ioctl(a->process->sys, a->process->fd, AMDKFD_IOC_GET_CLOCK_COUNTERS, &c);
	uint64_t boot, mono;

	if (r < 0)
		return aql_fail_errno(AQL_ERR_DEVICE, -r, "%s: AMDKFD_IOC_GET_CLOCK_COUNTERS",
				      a->node->gfx);
	/* 0: KFD found no GPU of that gpu_id in the process */
	if (!c.gpu_clock_counter || c.system_clock_freq != NS_PER_S)
		return aql_fail(AQL_ERR_DEVICE,
				"%s: AMDKFD_IOC_GET_CLOCK_COUNTERS gave GPU counter %llu and a "
				"system clock of %llu Hz (need a GPU counter and 1 GHz)",
				a->node->gfx, (unsigned long long)c.gpu_clock_counter,
				(unsigned long long)c.system_clock_freq);
	/* BOOTTIME - MONOTONIC, from reads close together */
	for (int i = 0; i < 8; i++) {
		mono = clock_ns(CLOCK_MONOTONIC);
		boot = clock_ns(CLOCK_BOOTTIME);
		if (clock_ns(CLOCK_MONOTONIC) - mono < 20000)
			break;
	}
	s->gpu = c.gpu_clock_counter;
	s->ns = c.system_clock_counter - (boot - mono);
	return AQL_OK;
}

void kfd_clock_open(struct kfd_agent *a)
{
	pthread_mutex_init(&a->clock_lock, NULL);
	/* a failure is tried again at the first conversion */
	a->clock_started = sample(a, &a->clock_t0) == AQL_OK;
	a->clock_t1 = a->clock_t0;
}

void kfd_clock_close(struct kfd_agent *a)
{
	pthread_mutex_destroy(&a->clock_lock);
}

/* ns per tick on the line through t0 and t1; 0 while they share a tick. */
static double ratio_of(const struct kfd_agent *a)
{
	uint64_t ticks = a->clock_t1.gpu - a->clock_t0.gpu;

	return ticks ? (double)(a->clock_t1.ns - a->clock_t0.ns) / (double)ticks : 0.0;
}

static aql_status convert(struct kfd_agent *a, uint64_t tick, uint64_t *ns)
{
	const struct kfd_clock_sample *t0 = &a->clock_t0, *t1 = &a->clock_t1;
	double ratio;
	int64_t elapsed;
	aql_status st;

	if (!a->clock_started) {
		if ((st = sample(a, &a->clock_t0)) != AQL_OK)
			return st;
		a->clock_t1 = a->clock_t0;
		a->clock_started = 1;
	}
	if (tick > t1->gpu + (t1->gpu - t0->gpu) / 4 && (st = sample(a, &a->clock_t1)) != AQL_OK)
		return st;
	for (int i = 0;; i++) {
		ratio = ratio_of(a);
		elapsed = (int64_t)(ratio * (double)(int64_t)(tick - t1->gpu));
		if (ratio > 0.0 && (elapsed < (int64_t)MAX_EXTRAPOLATION_NS || i))
			break;
		if (i)
			return aql_fail(AQL_ERR_DEVICE,
					"%s: the GPU's timestamp counter stands at %llu: it did not "
					"advance between two GET_CLOCK_COUNTERS",
					a->node->gfx, (unsigned long long)t1->gpu);
		if ((st = sample(a, &a->clock_t1)) != AQL_OK)
			return st;
	}
	if (tick < t0->gpu) {
		if (a->clock_early_ratio == 0.0)
			a->clock_early_ratio = ratio;
		*ns = t0->ns + (uint64_t)(int64_t)(a->clock_early_ratio *
						   (double)(int64_t)(tick - t0->gpu));
		return AQL_OK;
	}
	*ns = t1->ns + (uint64_t)elapsed;
	return AQL_OK;
}

aql_status kfd_ticks_to_ns(aql_agent *agent, uint64_t tick, uint64_t *ns)
{
	struct kfd_agent *a = (struct kfd_agent *)agent;
	aql_status st;

	pthread_mutex_lock(&a->clock_lock);
	st = convert(a, tick, ns);
	pthread_mutex_unlock(&a->clock_lock);
	return st;
}
