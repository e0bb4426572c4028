/* SPDX-License-Identifier: MIT */
/*
 * aql-bench --contention's machine check (tools/bench): xcpu_same() takes
 * round trips within XCPU_SAME of each other, or none (one CPU), for one
 * machine and refuses one missing beside others; xcpu_rtt_ns() measures between two CPUs, not with one, and
 * leaves the caller's CPU mask as it found it.
 */
#include <sched.h>

#include "helpers.h"
#include "bench/bench.h"

static void test_same(void)
{
	const uint64_t quiet[] = { 130, 121, 150, 80 }, moved[] = { 130, 141, 501, 491 };
	const uint64_t edge[] = { 100, 200 }, past[] = { 100, 201 }, part[] = { 130, 0 };
	const uint64_t none[] = { 0, 0, 0, 0 };

	CHECK(xcpu_same(quiet, 4), "80-150 ns is one machine");
	CHECK(!xcpu_same(moved, 4), "130 ns then 500 ns is two");
	CHECK(xcpu_same(edge, 2), "exactly XCPU_SAME apart is one machine");
	CHECK(!xcpu_same(past, 2), "beyond XCPU_SAME is two");
	CHECK(!xcpu_same(part, 2), "a round trip not taken beside one taken judges nothing");
	CHECK(xcpu_same(none, 4), "none taken (one CPU) is one machine");
	CHECK(!xcpu_same(quiet, 0), "no round trips judge nothing");
}

static void test_rtt(void)
{
	cpu_set_t allowed, after, one;
	uint64_t ns;

	CHECK(sched_getaffinity(0, sizeof(allowed), &allowed) == 0, "sched_getaffinity");
	if (CPU_COUNT(&allowed) >= 2) {
		ns = xcpu_rtt_ns();
		CHECK(ns > 0, "two CPUs give a round trip");
		CHECK(sched_getaffinity(0, sizeof(after), &after) == 0 &&
		      CPU_EQUAL(&allowed, &after), "the caller's mask is put back");
	}
	CPU_ZERO(&one);
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &allowed)) {
			CPU_SET(i, &one);
			break;
		}
	CHECK(sched_setaffinity(0, sizeof(one), &one) == 0, "sched_setaffinity");
	CHECK(xcpu_rtt_ns() == 0, "one CPU has no round trip between two");
	CHECK(sched_getaffinity(0, sizeof(after), &after) == 0 && CPU_EQUAL(&one, &after),
	      "a one-CPU mask is left alone");
	sched_setaffinity(0, sizeof(allowed), &allowed);
}

int main(void)
{
	test_same();
	test_rtt();
	return th_finish();
}
