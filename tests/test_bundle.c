/* SPDX-License-Identifier: MIT */
/*
 * Clang offload bundles: hand-built ones (well-formed, malformed, truncated
 * at every length, compressed with zlib and zstd, several in one .hip_fatbin)
 * and, when tests/bundles could build them,
 * real ones from clang-offload-bundler, alone and in an ELF's .hip_fatbin.
 *
 * Arguments (from tests/bundles/meson.build): "--co <target id> <path>" for
 * each code object, "--bundle <path>", "--fatbin-elf <path>".
 */
#include <elf.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include <aql/bundle.h>
#include <aql/code_object.h>
#include "helpers.h"

#define HOST_ID "host-x86_64-unknown-linux-gnu"

struct co_fixture {
	const char *id;
	const char *path;
	uint8_t *data;
	size_t size;
};

static struct co_fixture cos[32];
static unsigned nco;
static const char *bundle_path, *fatbin_path;

static uint8_t *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;

	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		goto fail;
	buf = malloc(len ? (size_t)len : 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len)
		goto fail;
	fclose(f);
	*size = (size_t)len;
	return buf;
fail:
	fprintf(stderr, "cannot read %s\n", path);
	free(buf);
	if (f)
		fclose(f);
	exit(1);
}

/* An exact-size copy, so that the sanitizers see any read past the end. */
static uint8_t *copy(const void *data, size_t size)
{
	uint8_t *p = malloc(size ? size : 1);

	if (!p)
		exit(1);
	memcpy(p, data, size);
	return p;
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

struct hb_entry {
	const char *id;
	const char *data;	/* bytes, taken as a string */
};

/* The bundler's layout: header, then the entries' data back to back. */
static uint8_t *build(const struct hb_entry *e, unsigned n, size_t *size)
{
	size_t header = 32, total;
	uint8_t *p;

	for (unsigned i = 0; i < n; i++)
		header += 24 + strlen(e[i].id);
	total = header;
	for (unsigned i = 0; i < n; i++)
		total += strlen(e[i].data);
	p = calloc(1, total);
	if (!p)
		exit(1);
	memcpy(p, "__CLANG_OFFLOAD_BUNDLE__", 24);
	put_u64(p + 24, n);
	for (size_t i = 0, at = 32, data = header; i < n; i++) {
		size_t idl = strlen(e[i].id), dl = strlen(e[i].data);

		put_u64(p + at, data);
		put_u64(p + at + 8, dl);
		put_u64(p + at + 16, idl);
		memcpy(p + at + 24, e[i].id, idl);
		memcpy(p + data, e[i].data, dl);
		at += 24 + idl;
		data += dl;
	}
	*size = total;
	return p;
}

static const aql_bundle_entry *find(const aql_bundle *b, const char *id)
{
	for (uint32_t i = 0; i < aql_bundle_count(b); i++)
		if (!strcmp(aql_bundle_get(b, i)->id, id))
			return aql_bundle_get(b, i);
	return NULL;
}

static aql_target_id target(const char *str)
{
	aql_target_id id;

	if (aql_target_parse(str, &id) != AQL_OK) {
		fprintf(stderr, "bad test target %s: %s\n", str, aql_error_message());
		exit(1);
	}
	return id;
}

/* Select for agent; want is the chosen entry's id, or NULL for "none". */
static void expect_select(const aql_bundle *b, const char *agent, const char *want)
{
	aql_target_id a = target(agent);
	const aql_bundle_entry *e = (const void *)1;
	aql_status st = aql_bundle_select(b, &a, &e);

	if (want)
		CHECK(st == AQL_OK && e && !strcmp(e->id, want), "agent %s: got %s (%s), want %s",
		      agent, st == AQL_OK && e ? e->id : aql_status_str(st),
		      aql_error_message(), want);
	else
		CHECK(st == AQL_ERR_NOT_FOUND && !e && strstr(aql_error_message(), agent),
		      "agent %s: got %s (%s), want no entry", agent,
		      st == AQL_OK && e ? e->id : aql_status_str(st), aql_error_message());
}

static void expect_open_error(const void *data, size_t size, aql_status want,
			      const char *text, const char *what)
{
	uint8_t *p = copy(data, size);
	aql_bundle *b = (void *)1;
	aql_status st = aql_bundle_open(p, size, &b);

	CHECK(st == want && !b && strstr(aql_error_message(), text),
	      "%s: %s \"%s\", want %s with \"%s\"", what, aql_status_str(st),
	      aql_error_message(), aql_status_str(want), text);
	if (st == AQL_OK)
		aql_bundle_close(b);
	free(p);
}

static void test_is_bundle(void)
{
	CHECK(aql_bundle_is_bundle("__CLANG_OFFLOAD_BUNDLE__", 24), "magic");
	CHECK(!aql_bundle_is_bundle("__CLANG_OFFLOAD_BUNDLE__", 23), "short magic");
	CHECK(!aql_bundle_is_bundle("__CLANG_OFFLOAD_BUNDLE_!", 24), "bad magic");
	CHECK(aql_bundle_is_bundle("CCOB", 4) && !aql_bundle_is_bundle("CCOB", 3), "CCOB");
	CHECK(!aql_bundle_is_bundle("\x7f" "ELF", 4) && !aql_bundle_is_bundle(NULL, 100), "other");
}

static const struct hb_entry sample[] = {
	{ HOST_ID, "" },
	{ "hipv4-amdgcn-amd-amdhsa--gfx906", "AAAA" },
	{ "hipv4-amdgcn-amd-amdhsa--gfx906:xnack-", "BBBBB" },
	{ "hipv4-amdgcn-amd-amdhsa--gfx9-generic:xnack-", "CCCCCC" },
	{ "openmp-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack+", "DDDDDDD" },
	{ "hcc-amdgcn-amd-amdhsa--gfx908", "EE" },
	{ "hip-amdgcn-amd-amdhsa-gfx1030", "FFF" },
	{ "hipv4-amdgcn-amd-amdhsa--gfx9999", "GG" },
	{ "hipv4-amdgcn-amd-amdhsa--gfx90a:bogus+", "HH" },
	{ "hipv4-nvptx64-nvidia-cuda--sm_80", "II" },
	{ "hipv4-amdgcn-amd-amdhsa--gfx11-generic", "JJJ" },
};

#define NSAMPLE (sizeof(sample) / sizeof(sample[0]))

static void check_sample(const aql_bundle *b, const uint8_t *base, size_t size)
{
	const aql_bundle_entry *e;
	aql_target_id t;

	CHECK(aql_bundle_count(b) == NSAMPLE, "count %u", aql_bundle_count(b));
	for (uint32_t i = 0; i < NSAMPLE && i < aql_bundle_count(b); i++) {
		e = aql_bundle_get(b, i);
		CHECK(!strcmp(e->id, sample[i].id) && e->size == strlen(sample[i].data) &&
			      (const uint8_t *)e->data >= base &&
			      (const uint8_t *)e->data + e->size <= base + size &&
			      !memcmp(e->data, sample[i].data, e->size),
		      "entry %u: \"%s\", %zu bytes", i, e->id, e->size);
	}
	CHECK(aql_bundle_get(b, NSAMPLE) == NULL && aql_bundle_get(NULL, 0) == NULL, "get range");
	e = find(b, HOST_ID);
	CHECK(e && !e->is_amdgcn && e->size == 0, "host entry");
	e = find(b, "hipv4-nvptx64-nvidia-cuda--sm_80");
	CHECK(e && !e->is_amdgcn && e->target.mach == 0, "nvptx entry");
	e = find(b, "openmp-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack+");
	t = target("gfx90a:sramecc+:xnack+");
	CHECK(e && e->is_amdgcn && e->target.mach == t.mach && e->target.xnack == AQL_FEATURE_ON &&
		      e->target.sramecc == AQL_FEATURE_ON, "openmp entry");
	e = find(b, "hip-amdgcn-amd-amdhsa-gfx1030");
	CHECK(e && e->is_amdgcn && !strcmp(e->target.processor, "gfx1030"), "old-style id");
	/* Unknown processors or features: listed, never chosen, not an error. */
	e = find(b, "hipv4-amdgcn-amd-amdhsa--gfx9999");
	CHECK(e && e->is_amdgcn && e->target.mach == 0 && !e->target.processor[0], "gfx9999");
	e = find(b, "hipv4-amdgcn-amd-amdhsa--gfx90a:bogus+");
	CHECK(e && e->is_amdgcn && e->target.mach == 0, "unknown feature");

	/* An exact processor beats a generic one, pinned features beat "any". */
	expect_select(b, "gfx906:sramecc+:xnack-", "hipv4-amdgcn-amd-amdhsa--gfx906:xnack-");
	expect_select(b, "gfx906:sramecc+:xnack+", "hipv4-amdgcn-amd-amdhsa--gfx906");
	expect_select(b, "gfx906", "hipv4-amdgcn-amd-amdhsa--gfx906");
	expect_select(b, "gfx900:xnack-", "hipv4-amdgcn-amd-amdhsa--gfx9-generic:xnack-");
	expect_select(b, "gfx90c:xnack-", "hipv4-amdgcn-amd-amdhsa--gfx9-generic:xnack-");
	expect_select(b, "gfx900:xnack+", NULL);
	expect_select(b, "gfx900", NULL);
	expect_select(b, "gfx90a:sramecc+:xnack+", "openmp-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack+");
	expect_select(b, "gfx90a:sramecc-:xnack+", NULL);
	expect_select(b, "gfx908:sramecc+:xnack-", "hcc-amdgcn-amd-amdhsa--gfx908");
	expect_select(b, "gfx1030", "hip-amdgcn-amd-amdhsa-gfx1030");
	expect_select(b, "gfx1031", NULL);
	expect_select(b, "gfx1151", "hipv4-amdgcn-amd-amdhsa--gfx11-generic");
	expect_select(b, "gfx942:sramecc+:xnack-", NULL);
	CHECK(strstr(aql_error_message(), "gfx942:sramecc+:xnack-") &&
		      strstr(aql_error_message(), HOST_ID) &&
		      strstr(aql_error_message(), "gfx9-generic:xnack-"),
	      "the message lists the bundle: %s", aql_error_message());
}

static void test_hand_built(void)
{
	const aql_bundle_entry *e;
	size_t size;
	uint8_t *p = build(sample, NSAMPLE, &size), *padded;
	aql_target_id a = target("gfx906");
	aql_bundle *b;

	CHECK_OK(aql_bundle_open(p, size, &b));
	if (b) {
		check_sample(b, p, size);
		aql_bundle_close(b);
	}
	/* In a .hip_fatbin section the bundle is followed by padding. */
	padded = calloc(1, size + 4096);
	memcpy(padded, p, size);
	CHECK_OK(aql_bundle_open(padded, size + 4096, &b));
	if (b) {
		check_sample(b, padded, size + 4096);
		aql_bundle_close(b);
	}
	free(padded);
	free(p);

	/* Zero entries is well-formed, and holds nothing to select. */
	p = build(NULL, 0, &size);
	CHECK_OK(aql_bundle_open(p, size, &b));
	CHECK(b && aql_bundle_count(b) == 0, "empty bundle");
	CHECK(aql_bundle_select(b, &a, &e) == AQL_ERR_NOT_FOUND &&
		      strstr(aql_error_message(), "(nothing)"), "empty select: %s",
	      aql_error_message());
	aql_bundle_close(b);
	free(p);

	CHECK(aql_bundle_open(NULL, 10, &b) == AQL_ERR_INVALID_ARG, "NULL data");
	CHECK(aql_bundle_open("x", 1, NULL) == AQL_ERR_INVALID_ARG, "NULL out");
	CHECK(aql_bundle_select(NULL, &a, &e) == AQL_ERR_INVALID_ARG, "NULL bundle");
	CHECK(aql_bundle_count(NULL) == 0, "count NULL");
	aql_bundle_close(NULL);
}

/* Every proper prefix of a bundle whose last entry ends at its end is bad. */
static void truncate_everywhere(const uint8_t *data, size_t size, const char *what)
{
	unsigned bad = 0;

	for (size_t len = 0; len < size; len++) {
		uint8_t *p = copy(data, len);
		aql_bundle *b = NULL;
		aql_status st = aql_bundle_open(p, len, &b);

		if (st != AQL_ERR_INVALID_CODE_OBJECT || b) {
			if (bad++ < 3)
				CHECK(0, "%s cut to %zu of %zu bytes: %s (%s)", what, len, size,
				      aql_status_str(st), aql_error_message());
		}
		aql_bundle_close(b);
		free(p);
	}
	CHECK(bad == 0, "%s: %u truncations were accepted", what, bad);
}

/* Flipped header bytes may give a valid bundle, never an out-of-range one. */
static void corrupt_header(const uint8_t *data, size_t size, size_t header)
{
	static const uint8_t values[] = { 0x00, 0xff, 0x01, 0x80, 0x7f };

	for (size_t i = 24; i < header; i++) {
		for (size_t v = 0; v < sizeof(values); v++) {
			uint8_t *p = copy(data, size);
			aql_bundle *b = NULL;
			aql_status st;

			p[i] = values[v];
			st = aql_bundle_open(p, size, &b);
			CHECK(st == AQL_OK || st == AQL_ERR_INVALID_CODE_OBJECT,
			      "byte %zu = 0x%x: %s", i, values[v], aql_status_str(st));
			for (uint32_t k = 0; b && k < aql_bundle_count(b); k++) {
				const aql_bundle_entry *e = aql_bundle_get(b, k);

				CHECK((const uint8_t *)e->data >= p + header &&
					      (const uint8_t *)e->data + e->size <= p + size,
				      "byte %zu = 0x%x: entry %u out of range", i, values[v], k);
			}
			aql_bundle_close(b);
			free(p);
		}
	}
}

static void test_malformed(void)
{
	static const struct hb_entry two[] = {
		{ "hipv4-amdgcn-amd-amdhsa--gfx906", "AAAAAAAA" },
		{ "hipv4-amdgcn-amd-amdhsa--gfx90a", "BBBBBBBB" },
	};
	/* Offsets into the header of the two-entry bundle. */
	const size_t e0 = 32, e1 = 32 + 24 + strlen(two[0].id);
	const size_t header = e1 + 24 + strlen(two[1].id);
	size_t size, hsize;
	uint8_t *good = build(two, 2, &size), *p;

	truncate_everywhere(good, size, "two-entry bundle");
	p = build(sample, NSAMPLE, &hsize);
	truncate_everywhere(p, hsize, "sample bundle");
	free(p);
	corrupt_header(good, size, header);

	p = copy(good, size);
	p[0] = 'X';
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "magic", "bad magic");
	memcpy(p, good, size);

#define MUTATE(field, value, text)                                                  \
	do {                                                                        \
		memcpy(p, good, size);                                              \
		put_u64(p + (field), (value));                                      \
		expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, text, #field "=" #value); \
	} while (0)

	MUTATE(24, UINT64_MAX, "claims");
	MUTATE(24, 1ull << 40, "claims");
	MUTATE(24, 1ull << 32, "claims");
	MUTATE(24, (size - 32) / 27 + 1, "claims");
	MUTATE(24, 3, "runs past");
	/* Entry data past the end, wrapping round, or inside the header. */
	MUTATE(e0, size - 7, "outside");
	MUTATE(e0, size + 1, "outside");
	MUTATE(e0, UINT64_MAX - 3, "outside");
	MUTATE(e0 + 8, UINT64_MAX, "outside");
	MUTATE(e0, 0, "outside");
	MUTATE(e0, header - 1, "outside");
	/* Overlap: the first entry grown into the second, or both the same. */
	MUTATE(e0 + 8, 9, "overlap");
	memcpy(p, good, size);
	put_u64(p + e0, header + 4);
	put_u64(p + e0 + 8, 5);
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "overlap", "overlap");
	memcpy(p, good, size);
	put_u64(p + e1, header);
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "overlap", "same bytes");
	/* An empty entry may sit anywhere, as the host one does. */
	memcpy(p, good, size);
	put_u64(p + e1, header + 3);
	put_u64(p + e1 + 8, 0);
	{
		aql_bundle *b;

		CHECK_OK(aql_bundle_open(p, size, &b));
		aql_bundle_close(b);
	}
	/* Ids: empty, too long, past the end, not printable, no kind. */
	MUTATE(e0 + 16, 0, "id length 0");
	MUTATE(e0 + 16, 1025, "id length 1025");
	MUTATE(e0 + 16, UINT64_MAX, "id length");
	MUTATE(e1 + 16, size - e1 - 24 + 1, "runs past");
	/* A longer id swallows data: the entries then start inside the header. */
	MUTATE(e1 + 16, strlen(two[1].id) + 8, "outside");
	memcpy(p, good, size);
	p[e0 + 24 + 3] = ' ';
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "byte 0x20", "space in id");
	p[e0 + 24 + 3] = '\0';
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "byte 0x00", "NUL in id");
	p[e0 + 24 + 3] = '\n';
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "byte 0x0a", "newline in id");
	memcpy(p, good, size);
	memset(p + e0 + 24, 'x', strlen(two[0].id));
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "<kind>-<triple>", "no dash");
	p[e0 + 24] = '-';
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "<kind>-<triple>", "empty kind");
	p[e0 + 24] = 'x';
	p[e0 + 24 + strlen(two[0].id) - 1] = '-';
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "<kind>-<triple>", "no triple");
	/* Two entries with one id. */
	{
		static const struct hb_entry dup[] = {
			{ "hip-amdgcn-amd-amdhsa--gfx906", "AAAA" },
			{ "hip-amdgcn-amd-amdhsa--gfx906", "BBBB" },
		};
		size_t dsize;
		uint8_t *d = build(dup, 2, &dsize);

		expect_open_error(d, dsize, AQL_ERR_INVALID_CODE_OBJECT, "two entries with id",
				  "duplicate ids");
		free(d);
	}
	expect_open_error("", 0, AQL_ERR_INVALID_CODE_OBJECT, "magic", "empty input");
	expect_open_error("__CLANG_OFFLOAD_BUNDLE__", 24, AQL_ERR_INVALID_CODE_OBJECT,
			  "shorter", "magic only");
#undef MUTATE
	free(p);
	free(good);
}

static void ccob(uint8_t *p, uint16_t version, uint16_t method, uint64_t file_size,
		 uint64_t raw_size)
{
	memcpy(p, "CCOB", 4);
	p[4] = (uint8_t)version;
	p[5] = (uint8_t)(version >> 8);
	p[6] = (uint8_t)method;
	p[7] = (uint8_t)(method >> 8);
	if (version == 1) {
		put_u32(p + 8, (uint32_t)raw_size);
	} else if (version == 2) {
		put_u32(p + 8, (uint32_t)file_size);
		put_u32(p + 12, (uint32_t)raw_size);
	} else {
		put_u64(p + 8, file_size);
		put_u64(p + 16, raw_size);
	}
}

/* A compressed bundle of the given version around plain (zlib: method 0). */
static uint8_t *compress_bundle(const uint8_t *plain, size_t plain_size, uint16_t version,
				uint16_t method, size_t *size)
{
	size_t header = version == 1 ? 20 : version == 2 ? 24 : 32;
	size_t cap = header + (method ? ZSTD_compressBound(plain_size)
				      : compressBound((uLong)plain_size));
	uint8_t *p = calloc(1, cap);
	size_t n;

	if (!p)
		exit(1);
	if (method) {
		n = ZSTD_compress(p + header, cap - header, plain, plain_size, 3);
		if (ZSTD_isError(n))
			exit(1);
	} else {
		uLongf len = (uLongf)(cap - header);

		if (compress2(p + header, &len, plain, (uLong)plain_size, 9) != Z_OK)
			exit(1);
		n = len;
	}
	ccob(p, version, method, header + n, plain_size);
	put_u64(p + header - 8, 0x1234567890abcdefull);	/* the hash: not checked */
	*size = header + n;
	return p;
}

/* Same ids, sizes and bytes as the sample; data outside the input. */
static void check_decompressed(const uint8_t *in, size_t size, const char *what)
{
	size_t plain_size;
	uint8_t *plain = build(sample, NSAMPLE, &plain_size), *p = copy(in, size);
	aql_bundle *b = NULL;

	CHECK(aql_bundle_open(p, size, &b) == AQL_OK, "%s: %s", what, aql_error_message());
	if (b) {
		CHECK(aql_bundle_count(b) == NSAMPLE && aql_bundle_part_count(b) == 1,
		      "%s: %u entries", what, aql_bundle_count(b));
		for (uint32_t i = 0; i < NSAMPLE && i < aql_bundle_count(b); i++) {
			const aql_bundle_entry *e = aql_bundle_get(b, i);

			CHECK(!strcmp(e->id, sample[i].id) && e->size == strlen(sample[i].data) &&
				      !memcmp(e->data, sample[i].data, e->size) && e->part == 0 &&
				      ((const uint8_t *)e->data < p ||
				       (const uint8_t *)e->data >= p + size),
			      "%s: entry %u \"%s\"", what, i, e->id);
		}
		expect_select(b, "gfx1151", "hipv4-amdgcn-amd-amdhsa--gfx11-generic");
		aql_bundle_close(b);
	}
	free(p);
	free(plain);
}

static void test_compressed(void)
{
	static const char *const methods[] = { "zlib", "zstd" };
	uint8_t h[64] = { 0 }, *plain, *c;
	size_t plain_size, size;
	char what[64];

	plain = build(sample, NSAMPLE, &plain_size);
	for (uint16_t v = 1; v <= 3; v++) {
		for (uint16_t m = 0; m <= 1; m++) {
			snprintf(what, sizeof(what), "CCOB v%u %s", v, methods[m]);
			c = compress_bundle(plain, plain_size, v, m, &size);
			check_decompressed(c, size, what);
			truncate_everywhere(c, size, what);
			/* Padding after it (as in a section) is not part of it. */
			c = realloc(c, size + 100);
			memset(c + size, 0, 100);
			check_decompressed(c, size + 100, what);
			free(c);
		}
	}

	/* Each header field, wrong. */
	c = compress_bundle(plain, plain_size, 3, 1, &size);
	put_u64(c + 16, plain_size + 1);
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "uncompressed size field says",
			  "v3 zstd raw size too big");
	put_u64(c + 16, plain_size - 1);
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "uncompressed size field says",
			  "v3 zstd raw size too small");
	put_u64(c + 16, 1ull << 33);
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "1073741824-byte limit",
			  "v3 bomb");
	put_u64(c + 16, 8);
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "cannot hold an offload bundle",
			  "v3 raw size 8");
	put_u64(c + 16, plain_size);
	put_u64(c + 8, size + 1);
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "file size field",
			  "v3 longer than its bytes");
	put_u64(c + 8, 32);
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "file size field",
			  "v3 no payload");
	put_u64(c + 8, size);
	c[32] ^= 0xff;		/* the zstd frame magic */
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "zstd frame is corrupt",
			  "v3 zstd bad frame");
	c[6] = 0;		/* zstd data read as zlib */
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "zlib stream is corrupt",
			  "zstd read as zlib");
	free(c);
	c = compress_bundle(plain, plain_size, 2, 0, &size);
	c[size - 1] ^= 0x55;	/* zlib's adler32 trailer */
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "zlib stream is corrupt",
			  "v2 zlib bad check");
	c[size - 1] ^= 0x55;
	put_u32(c + 12, (uint32_t)plain_size - 1);
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "holds more than",
			  "v2 zlib raw size too small");
	put_u32(c + 12, (uint32_t)plain_size + 1);
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "uncompressed size field says",
			  "v2 zlib raw size too big");
	put_u32(c + 12, (uint32_t)plain_size);
	c[6] = 1;
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "zstd frame is corrupt",
			  "zlib read as zstd");
	free(c);
	/* Content that decompresses but is not a bundle, or a bad one. */
	memset(plain, 'x', 24);
	c = compress_bundle(plain, plain_size, 3, 0, &size);
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT, "are not an offload bundle",
			  "v3 content without magic");
	free(c);
	memcpy(plain, "__CLANG_OFFLOAD_BUNDLE__", 24);
	put_u64(plain + 24, 1000);
	c = compress_bundle(plain, plain_size, 1, 1, &size);
	expect_open_error(c, size, AQL_ERR_INVALID_CODE_OBJECT,
			  "inside compressed offload bundle (CCOB v1): offload bundle claims 1000",
			  "v1 bad bundle inside");
	free(c);
	free(plain);

	ccob(h, 2, 5, sizeof(h), 100);
	expect_open_error(h, sizeof(h), AQL_ERR_UNSUPPORTED, "compression method 5", "method 5");
	ccob(h, 9, 1, sizeof(h), 100);
	expect_open_error(h, sizeof(h), AQL_ERR_UNSUPPORTED, "CCOB version 9", "v9");
	ccob(h, 0, 1, sizeof(h), 100);
	expect_open_error(h, sizeof(h), AQL_ERR_UNSUPPORTED, "CCOB version 0", "v0");
	ccob(h, 3, 1, sizeof(h), 100);
	expect_open_error(h, 31, AQL_ERR_INVALID_CODE_OBJECT, "32-byte header", "v3 cut");
	expect_open_error(h, 6, AQL_ERR_INVALID_CODE_OBJECT, "8-byte header", "6 bytes");
	ccob(h, 2, 1, sizeof(h), 100);
	truncate_everywhere(h, 24, "CCOB v2 header");
}

/* A minimal ELF file whose only section but the names is .hip_fatbin. */
static uint8_t *make_elf(const uint8_t *sec, size_t sec_size, size_t *size)
{
	static const char names[] = "\0.shstrtab\0.hip_fatbin";
	size_t sec_off = 4096, names_off = sec_off + sec_size;
	size_t sh_off = (names_off + sizeof(names) + 7) & ~(size_t)7;
	uint8_t *p = calloc(1, sh_off + 3 * sizeof(Elf64_Shdr));
	Elf64_Ehdr *eh = (Elf64_Ehdr *)p;
	Elf64_Shdr *sh;

	if (!p)
		exit(1);
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(*eh);
	eh->e_shoff = sh_off;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = 3;
	eh->e_shstrndx = 1;
	sh = (Elf64_Shdr *)(p + sh_off);
	sh[1].sh_name = 1;
	sh[1].sh_type = SHT_STRTAB;
	sh[1].sh_offset = names_off;
	sh[1].sh_size = sizeof(names);
	sh[2].sh_name = 11;
	sh[2].sh_type = SHT_PROGBITS;
	sh[2].sh_flags = SHF_ALLOC;
	sh[2].sh_offset = sec_off;
	sh[2].sh_size = sec_size;
	sh[2].sh_addralign = 4096;
	memcpy(p + sec_off, sec, sec_size);
	memcpy(p + names_off, names, sizeof(names));
	*size = sh_off + 3 * sizeof(Elf64_Shdr);
	return p;
}

static const struct hb_entry tu2[] = {
	{ HOST_ID, "" },
	{ "hipv4-amdgcn-amd-amdhsa--gfx906", "tu2-gfx906" },
	{ "hipv4-amdgcn-amd-amdhsa--gfx803", "tu2-gfx803" },
};

/*
 * A .hip_fatbin of three translation units, 4096-aligned as clang lays
 * them out: the sample, a zstd CCOB of tu2, the sample again.
 */
static uint8_t *make_section(size_t *size)
{
	size_t s1, s2, c2;
	uint8_t *b1 = build(sample, NSAMPLE, &s1), *b2 = build(tu2, 3, &s2);
	uint8_t *cb = compress_bundle(b2, s2, 3, 1, &c2);
	uint8_t *sec = calloc(1, 3 * 4096);

	if (!sec || s1 > 4096 || c2 > 4096)
		exit(1);
	memcpy(sec, b1, s1);
	memcpy(sec + 4096, cb, c2);
	memcpy(sec + 8192, b1, s1);
	*size = 8192 + s1;
	free(b1);
	free(b2);
	free(cb);
	return sec;
}

static void test_parts(void)
{
	size_t sec_size, elf_size, s1;
	uint8_t *sec = make_section(&sec_size), *elf = make_elf(sec, sec_size, &elf_size);
	uint8_t *one = build(sample, NSAMPLE, &s1), *bad;
	const aql_bundle_entry *e;
	aql_target_id t = target("gfx906");
	aql_bundle *b = NULL;

	CHECK_OK(aql_bundle_open(elf, elf_size, &b));
	CHECK(b && aql_bundle_part_count(b) == 3 &&
		      aql_bundle_count(b) == 2 * NSAMPLE + 3, "parts %u, entries %u",
	      aql_bundle_part_count(b), aql_bundle_count(b));
	for (uint32_t i = 0; b && i < aql_bundle_count(b); i++) {
		uint32_t part = i < NSAMPLE ? 0 : i < NSAMPLE + 3 ? 1 : 2;
		const struct hb_entry *want = part == 1 ? &tu2[i - NSAMPLE]
					      : &sample[part ? i - NSAMPLE - 3 : i];

		e = aql_bundle_get(b, i);
		CHECK(e->part == part && !strcmp(e->id, want->id) &&
			      e->size == strlen(want->data) &&
			      !memcmp(e->data, want->data, e->size),
		      "part entry %u: part %u \"%s\"", i, e->part, e->id);
	}
	if (b) {
		/* Each part selects on its own; gfx803 code is never chosen. */
		CHECK(aql_bundle_select_part(b, 1, &t, &e) == AQL_OK &&
			      !memcmp(e->data, "tu2-gfx906", 10), "part 1 gfx906");
		CHECK(aql_bundle_select_part(b, 2, &t, &e) == AQL_OK && e->part == 2 &&
			      !memcmp(e->data, "AAAA", 4), "part 2 gfx906");
		CHECK(aql_bundle_select(b, &t, &e) == AQL_OK && e->part == 0, "part 0 gfx906");
		t = target("gfx803");
		CHECK(aql_bundle_select_part(b, 1, &t, &e) == AQL_ERR_NOT_FOUND &&
			      strstr(aql_error_message(), "holds 3:"),
		      "gfx803 selected: %s", aql_error_message());
		CHECK(aql_bundle_select_part(b, 3, &t, &e) == AQL_ERR_INVALID_ARG,
		      "part past the end");
		aql_bundle_close(b);
	}
	free(elf);

	/* Bytes between bundles that are not zero, or a bad later bundle. */
	bad = copy(sec, sec_size);
	bad[4000] = 1;
	elf = make_elf(bad, sec_size, &elf_size);
	expect_open_error(elf, elf_size, AQL_ERR_INVALID_CODE_OBJECT,
			  "bytes at offset 4000, after bundle 0, are neither", "junk between");
	free(elf);
	memcpy(bad, sec, sec_size);
	put_u64(bad + 8192 + 24, 1000);
	elf = make_elf(bad, sec_size, &elf_size);
	expect_open_error(elf, elf_size, AQL_ERR_INVALID_CODE_OBJECT,
			  ".hip_fatbin bundle 2 at offset 8192: offload bundle claims 1000",
			  "bad third bundle");
	free(elf);
	memset(bad, 0, sec_size);
	elf = make_elf(bad, sec_size, &elf_size);
	expect_open_error(elf, elf_size, AQL_ERR_INVALID_CODE_OBJECT, "only zero bytes",
			  "all-zero section");
	free(elf);
	/* The section cut anywhere: a clean error or fewer whole parts. */
	for (size_t len = 1; len < sec_size; len += len < 200 ? 1 : 37) {
		aql_status st;

		elf = make_elf(sec, len, &elf_size);
		b = NULL;
		st = aql_bundle_open(elf, elf_size, &b);
		CHECK(st == AQL_ERR_INVALID_CODE_OBJECT ||
			      (st == AQL_OK && len >= s1 && aql_bundle_part_count(b) < 3),
		      "section cut to %zu: %s (%s)", len, aql_status_str(st),
		      aql_error_message());
		aql_bundle_close(b);
		free(elf);
	}
	free(bad);
	free(one);
	free(sec);
}

static const struct co_fixture *co_by_id(const char *id)
{
	for (unsigned i = 0; i < nco; i++)
		if (!strcmp(cos[i].id, id))
			return &cos[i];
	return NULL;
}

/* e_flags of each compiled object decode to the target it was built for. */
static void test_code_objects(void)
{
	for (unsigned i = 0; i < nco; i++) {
		const Elf64_Ehdr *eh = (const Elf64_Ehdr *)cos[i].data;
		aql_code_object *co = NULL;
		aql_target_id id;
		aql_status st;
		char buf[64];

		if (cos[i].size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
		    eh->e_machine != EM_AMDGPU) {
			CHECK(0, "%s is not an AMDGPU ELF", cos[i].path);
			continue;
		}
		CHECK_OK(aql_target_from_elf(eh->e_flags, eh->e_ident[EI_ABIVERSION], &id));
		aql_target_format(&id, buf, sizeof(buf));
		CHECK(!strcmp(buf, cos[i].id), "%s (e_flags 0x%x, abi %u) reads as %s, not %s",
		      cos[i].path, eh->e_flags, eh->e_ident[EI_ABIVERSION], buf, cos[i].id);
		/* Every target opens; only those aql dispatches load. */
		CHECK_OK(aql_code_object_open(cos[i].data, cos[i].size, &co));
		aql_code_object_destroy(co);
		co = NULL;
		st = aql_code_object_load(th_agent(), cos[i].data, cos[i].size, NULL, &co);
		if (aql_target_dispatchable(&id))
			CHECK(st == AQL_OK, "%s: load: %s", cos[i].path, aql_error_message());
		else
			CHECK(st == AQL_ERR_UNSUPPORTED && strstr(aql_error_message(), buf) &&
				      strstr(aql_error_message(), "cannot be loaded for dispatch"),
			      "%s: load: %s (%s)", cos[i].path, aql_status_str(st),
			      aql_error_message());
		aql_code_object_destroy(co);
	}
}

/* The target part of an amdgcn id, e.g. "gfx90a:xnack+". */
static const char *tid_of(const char *id)
{
	const char *t = strstr(id, "amdgcn-amd-amdhsa-");

	if (!t)
		return NULL;
	t += strlen("amdgcn-amd-amdhsa-");
	return *t == '-' ? t + 1 : t;
}

static void check_real_bundle(const aql_bundle *b, const char *what)
{
	unsigned matched = 0;

	CHECK(find(b, HOST_ID) && find(b, HOST_ID)->size == 0, "%s: host entry", what);
	for (uint32_t i = 0; i < aql_bundle_count(b); i++) {
		const aql_bundle_entry *e = aql_bundle_get(b, i);
		const struct co_fixture *co;
		aql_target_id elf;

		if (!e->is_amdgcn)
			continue;
		co = co_by_id(tid_of(e->id));
		CHECK(co && co->size == e->size && !memcmp(co->data, e->data, e->size),
		      "%s: entry %s is not the bytes of its code object", what, e->id);
		matched += co != NULL;
		if (e->size >= sizeof(Elf64_Ehdr)) {
			Elf64_Ehdr eh;

			/* Entries are only byte-aligned (clang-offload-bundler's default). */
			memcpy(&eh, e->data, sizeof(eh));
			CHECK(aql_target_from_elf(eh.e_flags, eh.e_ident[EI_ABIVERSION],
						  &elf) == AQL_OK &&
				      elf.mach == e->target.mach && elf.xnack == e->target.xnack &&
				      elf.sramecc == e->target.sramecc,
			      "%s: id %s and the entry's e_flags disagree", what, e->id);
		}
	}
	CHECK(matched + 1 == aql_bundle_count(b), "%s: %u of %u entries matched a code object",
	      what, matched, aql_bundle_count(b));

	if (find(b, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+") &&
	    find(b, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-")) {
		expect_select(b, "gfx90a:sramecc+:xnack+", "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+");
		expect_select(b, "gfx90a:sramecc-:xnack-", "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-");
		expect_select(b, "gfx90a:sramecc+", NULL);
	}
	if (find(b, "hipv4-amdgcn-amd-amdhsa--gfx906")) {
		expect_select(b, "gfx906:sramecc+:xnack-", "hipv4-amdgcn-amd-amdhsa--gfx906");
		expect_select(b, "gfx900:xnack-", NULL);
	}
	if (find(b, "hipv4-amdgcn-amd-amdhsa--gfx908:sramecc+:xnack-")) {
		expect_select(b, "gfx908:sramecc+:xnack-",
			      "hipv4-amdgcn-amd-amdhsa--gfx908:sramecc+:xnack-");
		expect_select(b, "gfx908:sramecc-:xnack-", NULL);
		expect_select(b, "gfx908:sramecc+:xnack+", NULL);
	}
	if (find(b, "hip-amdgcn-amd-amdhsa--gfx1030")) {
		expect_select(b, "gfx1030", "hip-amdgcn-amd-amdhsa--gfx1030");
		expect_select(b, "gfx1031", NULL);
	}
	if (find(b, "hipv4-amdgcn-amd-amdhsa--gfx940"))
		expect_select(b, "gfx940:sramecc+:xnack-", "hipv4-amdgcn-amd-amdhsa--gfx940");
	if (find(b, "hipv4-amdgcn-amd-amdhsa--gfx1100"))
		expect_select(b, "gfx1100", "hipv4-amdgcn-amd-amdhsa--gfx1100");
	expect_select(b, "gfx942:sramecc+:xnack-", NULL);
	CHECK(strstr(aql_error_message(), HOST_ID), "%s: list in \"%s\"", what,
	      aql_error_message());
}

static void test_real_bundle(const uint8_t *data, size_t size)
{
	aql_bundle *b;

	CHECK_OK(aql_bundle_open(data, size, &b));
	if (!b)
		return;
	check_real_bundle(b, bundle_path);
	aql_bundle_close(b);
	truncate_everywhere(data, size, "clang-offload-bundler output");
}

static Elf64_Shdr *fatbin_shdr(uint8_t *elf, size_t size)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)elf;
	Elf64_Shdr *sh = (Elf64_Shdr *)(elf + eh->e_shoff);
	const char *names;

	if (eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(*sh) > size || eh->e_shstrndx >= eh->e_shnum)
		return NULL;
	names = (const char *)elf + sh[eh->e_shstrndx].sh_offset;
	for (unsigned i = 0; i < eh->e_shnum; i++)
		if (!strcmp(names + sh[i].sh_name, ".hip_fatbin"))
			return &sh[i];
	return NULL;
}

static void test_fatbin_elf(const uint8_t *elf, size_t size, const uint8_t *bundle,
			    size_t bundle_size)
{
	aql_bundle *b, *ref = NULL;
	Elf64_Shdr *sh;
	uint8_t *p;

	CHECK_OK(aql_bundle_open(elf, size, &b));
	if (bundle)
		CHECK_OK(aql_bundle_open(bundle, bundle_size, &ref));
	if (b && ref) {
		CHECK(aql_bundle_count(b) == aql_bundle_count(ref), "ELF and file counts");
		for (uint32_t i = 0; i < aql_bundle_count(b) && i < aql_bundle_count(ref); i++) {
			const aql_bundle_entry *x = aql_bundle_get(b, i), *y = aql_bundle_get(ref, i);

			CHECK(!strcmp(x->id, y->id) && x->size == y->size &&
				      !memcmp(x->data, y->data, x->size) &&
				      (const uint8_t *)x->data > elf &&
				      (const uint8_t *)x->data + x->size <= elf + size,
			      "ELF entry %u (%s) differs from the bundle file's", i, x->id);
		}
		check_real_bundle(b, fatbin_path);
	}
	aql_bundle_close(b);
	aql_bundle_close(ref);

	p = copy(elf, size);
	sh = fatbin_shdr(p, size);
	CHECK(sh != NULL, "no .hip_fatbin section header in %s", fatbin_path);
	if (!sh) {
		free(p);
		return;
	}
	/* A CCOB whose stream is not zstd: the section is read, the stream refused. */
	ccob(p + sh->sh_offset, 2, 1, sh->sh_size, 12345);
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "zstd frame is corrupt",
			  ".hip_fatbin with a bad CCOB");
	memcpy(p + sh->sh_offset, "not a bundle", 12);
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT,
			  "does not start with an offload bundle", ".hip_fatbin garbage");
	memcpy(p, elf, size);
	sh->sh_offset = size - 8;
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "lies outside",
			  ".hip_fatbin past the end");
	memcpy(p, elf, size);
	sh->sh_size = UINT64_MAX - 2;
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "lies outside",
			  ".hip_fatbin huge");
	memcpy(p, elf, size);
	sh->sh_type = SHT_NOBITS;
	expect_open_error(p, size, AQL_ERR_INVALID_CODE_OBJECT, "lies outside",
			  ".hip_fatbin NOBITS");
	memcpy(p, elf, size);
	{
		Elf64_Ehdr *eh = (Elf64_Ehdr *)p;
		char *name = (char *)p + ((Elf64_Shdr *)(p + eh->e_shoff))[eh->e_shstrndx].sh_offset +
			     sh->sh_name;

		name[10] = 'x';
		expect_open_error(p, size, AQL_ERR_NOT_FOUND, "no .hip_fatbin",
				  "section renamed");
	}
	free(p);
	/* A cut ELF fails cleanly wherever it is cut. */
	for (size_t len = 4; len < size; len += len < 256 ? 1 : 97) {
		aql_bundle *c = NULL;
		aql_status st;

		p = copy(elf, len);
		st = aql_bundle_open(p, len, &c);
		CHECK(st == AQL_OK || st == AQL_ERR_INVALID_CODE_OBJECT,
		      "ELF cut to %zu: %s", len, aql_status_str(st));
		aql_bundle_close(c);
		free(p);
	}
}

int main(int argc, char **argv)
{
	uint8_t *bundle = NULL, *elf;
	size_t bundle_size = 0, elf_size;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--co") && i + 2 < argc && nco < 32) {
			cos[nco].id = argv[i + 1];
			cos[nco].path = argv[i + 2];
			cos[nco].data = read_file(cos[nco].path, &cos[nco].size);
			nco++;
			i += 2;
		} else if (!strcmp(argv[i], "--bundle") && i + 1 < argc) {
			bundle_path = argv[++i];
		} else if (!strcmp(argv[i], "--fatbin-elf") && i + 1 < argc) {
			fatbin_path = argv[++i];
		} else {
			fprintf(stderr, "unknown argument %s\n", argv[i]);
			return 1;
		}
	}
	printf("fixtures: %u code objects:", nco);
	for (unsigned i = 0; i < nco; i++)
		printf(" %s", cos[i].id);
	printf("%s\n", nco ? "" : " none (no clang-14/16 with ld.lld)");
	printf("fixtures: clang-offload-bundler output: %s\n",
	       bundle_path ? bundle_path : "none (no clang-offload-bundler)");
	printf("fixtures: ELF with .hip_fatbin: %s\n",
	       fatbin_path ? fatbin_path : "none (no bundle or no llvm-objcopy)");

	test_is_bundle();
	test_hand_built();
	test_malformed();
	test_compressed();
	test_parts();
	test_code_objects();
	if (bundle_path) {
		bundle = read_file(bundle_path, &bundle_size);
		test_real_bundle(bundle, bundle_size);
	}
	if (fatbin_path) {
		elf = read_file(fatbin_path, &elf_size);
		test_fatbin_elf(elf, elf_size, bundle, bundle_size);
		free(elf);
	}
	free(bundle);
	for (unsigned i = 0; i < nco; i++)
		free(cos[i].data);
	return th_finish();
}
