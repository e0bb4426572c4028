/* SPDX-License-Identifier: MIT */
/* Sets of live handles (hsa_impl.h). */
#include <stdlib.h>

#include "hsa_impl.h"

int hsa_rt_set_add(struct hsa_rt_set *set, void *item)
{
	int ret = 0;

	pthread_mutex_lock(&set->lock);
	if (set->count == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 16;
		void **items = realloc(set->items, cap * sizeof(*items));

		if (items) {
			set->items = items;
			set->cap = cap;
		}
	}
	if (set->count < set->cap)
		set->items[set->count++] = item;
	else
		ret = -1;
	pthread_mutex_unlock(&set->lock);
	return ret;
}

static size_t find(const struct hsa_rt_set *set, const void *item)
{
	size_t i;

	for (i = 0; i < set->count; i++)
		if (set->items[i] == item)
			break;
	return i;
}

int hsa_rt_set_remove(struct hsa_rt_set *set, const void *item)
{
	size_t i;
	int found;

	pthread_mutex_lock(&set->lock);
	i = find(set, item);
	found = i < set->count;
	if (found)
		set->items[i] = set->items[--set->count];
	pthread_mutex_unlock(&set->lock);
	return found;
}

int hsa_rt_set_has(struct hsa_rt_set *set, const void *item)
{
	int found;

	pthread_mutex_lock(&set->lock);
	found = find(set, item) < set->count;
	pthread_mutex_unlock(&set->lock);
	return found;
}
