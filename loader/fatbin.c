/* SPDX-License-Identifier: MIT */
/*
 * Fatbins: NVIDIA's container of cubins and PTX for several architectures
 * (fatbinary, nvcc -fatbin). The format is undocumented; this layout was
 * checked against CUDA 13.0's fatbinary output:
 *
 *   header, 16 bytes: u32 magic 0xba55ed50, u16 version 1, u16 header
 *     size (16), u64 bytes of the entries that follow;
 *   entries back to back, each a header and its payload:
 *     +0x00 u16 kind: 1 PTX, 2 ELF (a cubin)
 *     +0x02 u16 0x0101
 *     +0x04 u32 header size: 64 for cubins, 80 for PTX
 *     +0x08 u64 payload size: stored bytes, padded to 8
 *     +0x1c u32 SM: 80 for sm_80 (the .target of PTX)
 *     +0x28 u64 flags: 0x1 64-bit, 0x10 Linux; compressed: 0x8000 zstd
 *           (CUDA 13), 0x2000 LZ4 (CUDA 13's --compress-mode=speed, and
 *           older toolkits)
 *     +0x38 u64 uncompressed size, when compressed.
 *   CUDA 13's fatbinary compresses PTX by default, cubins only with
 *   --compress-all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "util/error.h"
#include "loader/loader_impl.h"
#include "loader/nv_impl.h"

#define HEADER 16u
#define ENTRY_HEADER 64u
#define FLAG_LZ4 0x2000u
#define FLAG_ZSTD 0x8000u
#define MAX_RAW (1ull << 30)

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

aql_status aql_fatbin_entries(const uint8_t *image, size_t size,
			      struct aql_fatbin_entry *entries, uint32_t max,
			      uint32_t *count, size_t *used)
{
	uint64_t total, off, end;
	uint32_t hs, n = 0;

	*count = 0;
	if (size < HEADER || rd32(image) != AQL_FATBIN_MAGIC)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "fatbin: shorter than its header");
	hs = (uint32_t)(image[6] | image[7] << 8);
	total = rd64(image + 8);
	if ((image[4] | image[5] << 8) != 1 || hs < HEADER || hs > size)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"fatbin: version %u with a %u-byte header; this loader reads version 1",
				image[4] | image[5] << 8, hs);
	if (total > size - hs)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"fatbin: %llu bytes of entries, the file has %zu after the header",
				(unsigned long long)total, size - hs);
	end = hs + total;
	for (off = hs; off < end; n++) {
		const uint8_t *e = image + off;
		struct aql_fatbin_entry *out = &entries[n];
		uint64_t flags, ehs, psize;

		if (n == max)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"fatbin: more than %u entries", max);
		if (end - off < ENTRY_HEADER)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"fatbin entry %u: its header is cut short", n);
		ehs = rd32(e + 4);
		psize = rd64(e + 8);
		if (ehs < ENTRY_HEADER || ehs > end - off || psize > end - off - ehs)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"fatbin entry %u: a %llu-byte header and %llu bytes of payload at offset %llu lie outside the fatbin's %llu bytes",
					n, (unsigned long long)ehs, (unsigned long long)psize,
					(unsigned long long)off, (unsigned long long)end);
		flags = rd64(e + 0x28);
		out->kind = (uint16_t)(e[0] | e[1] << 8);
		out->sm = rd32(e + 0x1c);
		out->payload = e + ehs;
		out->payload_size = psize;
		out->raw_size = psize;
		out->compression = AQL_FATBIN_RAW;
		if ((flags & FLAG_LZ4) && (flags & FLAG_ZSTD))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"fatbin entry %u: flags %#llx say both LZ4 and zstd", n,
					(unsigned long long)flags);
		if (flags & (FLAG_LZ4 | FLAG_ZSTD)) {
			out->compression = flags & FLAG_ZSTD ? AQL_FATBIN_ZSTD : AQL_FATBIN_LZ4;
			out->raw_size = rd64(e + 0x38);
		}
		off += ehs + psize;
	}
	*count = n;
	*used = (size_t)end;
	return AQL_OK;
}

aql_status aql_fatbin_payload(const struct aql_fatbin_entry *e, const uint8_t **bytes,
			      size_t *size, uint8_t **owned)
{
	unsigned long long content;
	size_t frame, got;
	uint8_t *raw;

	*owned = NULL;
	if (e->compression == AQL_FATBIN_RAW) {
		*bytes = e->payload;
		*size = (size_t)e->payload_size;
		return AQL_OK;
	}
	if (e->compression == AQL_FATBIN_LZ4)
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"its entry for sm_%u is LZ4-compressed, which aql does not read; "
				"build the fatbin with zstd (fatbinary's default compression) or "
				"without compression (fatbinary --compress=false, nvcc --no-compress)",
				e->sm);
	frame = ZSTD_findFrameCompressedSize(e->payload, (size_t)e->payload_size);
	if (ZSTD_isError(frame))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"fatbin: the zstd stream of its sm_%u entry is corrupt or truncated (%s)",
				e->sm, ZSTD_getErrorName(frame));
	content = ZSTD_getFrameContentSize(e->payload, frame);
	if (e->raw_size == 0 || e->raw_size > MAX_RAW || content != e->raw_size)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"fatbin: the zstd stream of its sm_%u entry holds %lld bytes, its header says %llu",
				e->sm, content > MAX_RAW ? -1ll : (long long)content,
				(unsigned long long)e->raw_size);
	raw = malloc((size_t)e->raw_size);
	if (!raw)
		return aql_fail(AQL_ERR_NOMEM, "fatbin: %llu bytes decompressed",
				(unsigned long long)e->raw_size);
	got = ZSTD_decompress(raw, (size_t)e->raw_size, e->payload, frame);
	if (ZSTD_isError(got) || got != e->raw_size) {
		free(raw);
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"fatbin: the zstd stream of its sm_%u entry does not decompress into its %llu bytes (%s)",
				e->sm, (unsigned long long)e->raw_size,
				ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
	}
	*bytes = raw;
	*size = (size_t)e->raw_size;
	*owned = raw;
	return AQL_OK;
}

static const char *kind_word(uint16_t kind)
{
	return kind == AQL_FATBIN_CUBIN ? "cubin" : kind == AQL_FATBIN_PTX ? "PTX" : "unknown kind";
}

void aql_nv_object_summary(const uint8_t *image, size_t size, char *buf, size_t n)
{
	static const char *const packing[] = { "", " (zstd)", " (LZ4)" };
	struct aql_fatbin_entry *es;
	uint32_t count, sm;
	size_t used, at;

	if (!n)
		return;
	buf[0] = 0;
	if (size >= 4 && rd32(image) == AQL_FATBIN_MAGIC) {
		es = malloc(AQL_FATBIN_MAX_ENTRIES * sizeof(*es));
		if (!es || aql_fatbin_entries(image, size, es, AQL_FATBIN_MAX_ENTRIES, &count,
					      &used) != AQL_OK) {
			snprintf(buf, n, "a fatbin aql cannot read");
			free(es);
			return;
		}
		at = (size_t)snprintf(buf, n, "a fatbin of %s", count ? "" : "nothing");
		for (uint32_t i = 0; i < count && at < n; i++)
			at += (size_t)snprintf(buf + at, n - at, "%s%s sm_%u%s", i ? ", " : "",
					       kind_word(es[i].kind), es[i].sm,
					       packing[es[i].compression]);
		free(es);
	} else if (size >= 4 && memcmp(image, "\177ELF", 4) == 0) {
		if (aql_cubin_sm(image, size, &sm) == AQL_OK)
			snprintf(buf, n, "a cubin for sm_%u", sm);
		else
			snprintf(buf, n, "a cubin aql cannot read");
	} else {
		snprintf(buf, n, "PTX text");
	}
}
