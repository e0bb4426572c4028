/* SPDX-License-Identifier: MIT */
/*
 * The AMD agent in a container (issue 22, item 4) on the KFD emulation:
 * three GPU nodes, one whose sysfs files read EPERM (AQL_KFD_EMU_DENY:
 * the device cgroup denies it) and one whose render node is absent
 * (AQL_KFD_EMU_NO_RENDER). Not run on hardware.
 *
 *   test_kfd_topology_denied --agent GFX --node N --denied D --no-render R
 *	one agent, GFX on KFD node N; nodes D and R listed with their
 *	reasons; the agent opens, copies through VRAM (the copy kernel's
 *	dispatches) and, with --hsaco, launches saxpy; only node N's render
 *	node was opened and its VM acquired.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "aql/kfd/kfd.h"
#include "kfd_emu/kfdemu.h"

static struct kfdemu_stats stats(void)
{
	struct kfdemu_stats s;

	CHECK(((kfdemu_stats_fn)th_kfdemu_sym("kfdemu_stats"))(&s) == 0, "kfdemu_stats");
	return s;
}

static const struct kfd_node *node(const struct kfd_process *p, uint32_t id)
{
	for (uint32_t i = 0; i < p->topo.count; i++)
		if (p->topo.nodes[i].node_id == id)
			return &p->topo.nodes[i];
	th_stop("a GPU node is missing from the topology");
	return NULL;
}

static void check_nodes(uint32_t usable, uint32_t denied, uint32_t no_render)
{
	const struct kfd_process *p = NULL;
	const struct kfd_node *d, *r;
	char path[64];

	CHECK_OK(kfd_process_get(&p));
	if (!p)
		return;
	CHECK(p->topo.count == 3 && p->usable == 1, "%u GPU nodes, %u usable", p->topo.count,
	      p->usable);
	CHECK(node(p, usable)->usable == AQL_OK, "node %u: %s", usable, node(p, usable)->reason);
	d = node(p, denied);
	CHECK(d->usable == AQL_ERR_SYSTEM && d->gpu_id == 0 && strstr(d->reason, "device cgroup") &&
	      strstr(d->reason, "Operation not permitted"), "denied node %u: %s: %s", denied,
	      aql_status_str(d->usable), d->reason);
	r = node(p, no_render);
	snprintf(path, sizeof(path), "no render node /dev/dri/renderD%u", r->drm_render_minor);
	CHECK(r->usable == AQL_ERR_NOT_FOUND && r->gpu_id && strstr(r->reason, path),
	      "node %u without render node: %s: %s", no_render, aql_status_str(r->usable),
	      r->reason);
	fprintf(stderr, "%s\n%s\n", d->reason, r->reason);
}

int main(int argc, char **argv)
{
	const char *gfx = NULL, *hsaco = NULL;
	uint32_t usable = 0, denied = 0, no_render = 0, count = 0;
	aql_agent_info info;
	aql_agent *agent = NULL;
	struct kfdemu_stats s;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--agent"))
			gfx = argv[i + 1];
		else if (!strcmp(argv[i], "--node"))
			usable = (uint32_t)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--denied"))
			denied = (uint32_t)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--no-render"))
			no_render = (uint32_t)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--hsaco"))
			hsaco = argv[i + 1];
	}
	if (!gfx || !usable || !denied || !no_render)
		th_stop("usage: test_kfd_topology_denied --agent GFX --node N --denied D "
			"--no-render R [--hsaco PATH]");
	CHECK_OK(aql_agent_count(AQL_AGENT_AMD, &count));
	CHECK(count == 1, "%u AMD agents, expected the one usable node", count);
	check_nodes(usable, denied, no_render);
	CHECK(aql_agent_open(AQL_AGENT_AMD, 1, &agent) == AQL_ERR_INVALID_ARG && !agent,
	      "agent 1 does not exist: %s", aql_error_message());
	CHECK_OK(aql_agent_open(AQL_AGENT_AMD, 0, &agent));
	if (!agent)
		return th_finish();
	CHECK_OK(aql_agent_get_info(agent, &info));
	CHECK(!strcmp(info.name, gfx), "agent 0 is %s, expected %s", info.name, gfx);
	th_check_agent_copies(agent, "on the usable GPU");
	if (hsaco)
		th_check_saxpy(agent, hsaco, "on the usable GPU");
	else
		th_skip("saxpy", "no clang here built it for the model");
	s = stats();
	CHECK(s.render_opens == 1 && s.vm_acquired == 1u << (usable - 1),
	      "%llu render nodes opened, VMs acquired %#x: only node %u's",
	      (unsigned long long)s.render_opens, s.vm_acquired, usable);
	CHECK_OK(aql_agent_destroy(agent));
	return th_finish();
}
