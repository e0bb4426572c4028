/* SPDX-License-Identifier: MIT */
/*
 * Sets of live handles (hsa_impl.h): open addressing on the pointer, so
 * a signal's create and destroy stay O(1) however many are live. A
 * removed entry leaves a tombstone until the table is rebuilt.
 */
#include <stdlib.h>

#include "hsa_impl.h"

#define TOMBSTONE ((void *)1)

static size_t slot_of(const void *item, size_t cap)
{
	/* Fibonacci hashing; the low bits of aligned pointers are zero. */
	return (size_t)(((uint64_t)(uintptr_t)item * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

/* Rebuild with room for twice the live items, dropping tombstones. */
static int grow(struct hsa_rt_set *set)
{
	size_t cap = set->cap ? set->cap : 16;
	void **slots;

	while (cap < 4 * (set->count + 1))
		cap *= 2;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	for (size_t i = 0; i < set->cap; i++) {
		void *item = set->slots[i];

		if (item && item != TOMBSTONE) {
			size_t j = slot_of(item, cap);

			while (slots[j])
				j = (j + 1) & (cap - 1);
			slots[j] = item;
		}
	}
	free(set->slots);
	set->slots = slots;
	set->cap = cap;
	set->used = set->count;
	return 0;
}

/* The slot holding item, or cap when it is not there. */
static size_t find(const struct hsa_rt_set *set, const void *item)
{
	if (!set->cap || !item || item == TOMBSTONE)
		return set->cap;
	for (size_t i = slot_of(item, set->cap);; i = (i + 1) & (set->cap - 1)) {
		if (set->slots[i] == item)
			return i;
		if (!set->slots[i])
			return set->cap;
	}
}

int hsa_rt_set_add(struct hsa_rt_set *set, void *item)
{
	int ret = 0;

	pthread_mutex_lock(&set->lock);
	/* At most three quarters full, tombstones included. */
	if (4 * (set->used + 1) > 3 * set->cap)
		ret = grow(set);
	if (!ret) {
		size_t i = slot_of(item, set->cap);

		while (set->slots[i] && set->slots[i] != TOMBSTONE)
			i = (i + 1) & (set->cap - 1);
		if (!set->slots[i])
			set->used++;
		set->slots[i] = item;
		set->count++;
	}
	pthread_mutex_unlock(&set->lock);
	return ret;
}

int hsa_rt_set_remove(struct hsa_rt_set *set, const void *item)
{
	size_t i;
	int found;

	pthread_mutex_lock(&set->lock);
	i = find(set, item);
	found = i < set->cap;
	if (found) {
		set->slots[i] = TOMBSTONE;
		set->count--;
	}
	pthread_mutex_unlock(&set->lock);
	return found;
}

int hsa_rt_set_has(struct hsa_rt_set *set, const void *item)
{
	int found;

	pthread_mutex_lock(&set->lock);
	found = find(set, item) < set->cap;
	pthread_mutex_unlock(&set->lock);
	return found;
}

void *hsa_rt_set_find(struct hsa_rt_set *set, int (*match)(const void *item, const void *key),
		      const void *key)
{
	void *found = NULL;

	pthread_mutex_lock(&set->lock);
	for (size_t i = 0; i < set->cap && !found; i++)
		if (set->slots[i] && set->slots[i] != TOMBSTONE && match(set->slots[i], key))
			found = set->slots[i];
	pthread_mutex_unlock(&set->lock);
	return found;
}

void *hsa_rt_set_pop(struct hsa_rt_set *set)
{
	void *item = NULL;

	pthread_mutex_lock(&set->lock);
	for (size_t i = 0; i < set->cap && !item; i++) {
		if (set->slots[i] && set->slots[i] != TOMBSTONE) {
			item = set->slots[i];
			set->slots[i] = TOMBSTONE;
			set->count--;
		}
	}
	pthread_mutex_unlock(&set->lock);
	return item;
}
