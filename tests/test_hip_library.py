#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check aql-objdump on a real HIP library (default: Debian's librocrand1)
against what LLVM's own tools and an independent reading of the file say.

- Every bundle of the .hip_fatbin section and every entry: the list aql
  gives must equal one walked here from the ELF section headers and the
  bundle headers (compressed bundles decompressed with Python's zlib, or
  the zstd tool when present).
- Every code object, extracted by aql-objdump --extract, must agree with
  llvm-readelf --notes on the kernels, their argument layouts (offset,
  size, value kind, address space, name, type) and their segment sizes;
  and its kernel descriptors, as aql decodes them, must be the 64 bytes at
  each .kd symbol (llvm-readelf --symbols, mapped through the program
  headers).

Exit 77 (skipped) when the library, llvm-readelf or Python's yaml module
is missing. --library runs it on another library (librocsparse0 by hand).
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
DEFAULT_LIBRARY = "/usr/lib/x86_64-linux-gnu/librocrand.so.1"
MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        if failures <= 50:
            print("FAIL: " + what, file=sys.stderr)
    return cond


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def fatbin_section(path):
    """(offset, size) of .hip_fatbin, from the ELF64 section headers."""
    with open(path, "rb") as f:
        eh = f.read(64)
        shoff, = struct.unpack_from("<Q", eh, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", eh, 0x3a)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        shdrs = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize)
                 for i in range(shnum)]
        f.seek(shdrs[shstrndx][4])
        names = f.read(shdrs[shstrndx][5])
    for sh in shdrs:
        name = names[sh[0]:names.index(b"\0", sh[0])]
        if name == b".hip_fatbin":
            return sh[4], sh[5]
    return None


def zstd_decompress(data):
    tool = shutil.which("zstd")
    if not tool:
        return None
    r = subprocess.run([tool, "-dc"], input=data, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    return r.stdout if r.returncode == 0 else None


def plain_entries(b, part):
    count, = struct.unpack_from("<Q", b, 24)
    at, end, out = 32, 32, []
    for _ in range(count):
        off, size, idlen = struct.unpack_from("<QQQ", b, at)
        out.append((part, b[at + 24:at + 24 + idlen].decode(), size))
        at += 24 + idlen
        end = max(end, at, off + size)
    return out, max(end, at)


def walk_section(path):
    """[(part, id, size)] for every entry of every bundle, or None."""
    found = fatbin_section(path)
    if not found:
        return None
    off, size = found
    with open(path, "rb") as f:
        f.seek(off)
        sec = f.read(size)
    pos, part, out = 0, 0, []
    while pos < len(sec):
        if sec[pos] == 0:
            pos += 1
            continue
        if sec.startswith(MAGIC, pos):
            entries, end = plain_entries(sec[pos:], part)
        elif sec.startswith(b"CCOB", pos):
            version, method = struct.unpack_from("<HH", sec, pos + 4)
            header = {1: 20, 2: 24, 3: 32}[version]
            total = (len(sec) - pos if version == 1 else
                     struct.unpack_from("<I" if version == 2 else "<Q", sec,
                                        pos + 8)[0])
            payload = sec[pos + header:pos + total]
            if method == 0:
                d = zlib.decompressobj()
                raw = d.decompress(payload)
                used = len(payload) - len(d.unused_data)
            else:
                raw, used = zstd_decompress(payload), len(payload)
                if raw is None:
                    return None
            entries, _ = plain_entries(raw, part)
            end = total if version >= 2 else header + used
        else:
            check(False, "%s: .hip_fatbin byte %d starts no bundle" % (path, pos))
            return out
        out += entries
        pos += end
        part += 1
    return out


def readelf_metadata(readelf, path):
    """The AMDGPU metadata note as llvm-readelf prints it, parsed."""
    import yaml
    r = run([readelf, "--notes", path])
    if not check(r.returncode == 0, "%s --notes %s: %s" % (readelf, path, r.stderr)):
        return None
    lines = r.stdout.splitlines()
    start = next((i for i, l in enumerate(lines) if l.strip() == "---"), None)
    if not check(start is not None, "%s: no metadata in llvm-readelf's notes" % path):
        return None
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "...")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load("\n".join(lines[start + 1:end]), Loader=loader)


def readelf_descriptors(readelf, path):
    """{kd symbol: its 64 bytes}, through llvm-readelf's symbols and segments."""
    r = run([readelf, "-W", "--program-headers", "--symbols", path])
    if not check(r.returncode == 0, "%s -l -s %s: %s" % (readelf, path, r.stderr)):
        return {}
    loads, kds = [], {}
    for l in r.stdout.splitlines():
        f = l.split()
        if f[:1] == ["LOAD"]:
            loads.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
        elif len(f) == 8 and f[7].endswith(".kd") and f[3] == "OBJECT":
            kds[f[7]] = int(f[1], 16)
    with open(path, "rb") as fh:
        data = fh.read()
    out = {}
    for name, vaddr in kds.items():
        for off, va, filesz in loads:
            if va <= vaddr and vaddr + 64 <= va + filesz:
                out[name] = data[off + vaddr - va:off + vaddr - va + 64]
    return out


def check_descriptor(where, k, kd):
    if not check(kd is not None and len(kd) == 64,
                 "%s: no 64-byte descriptor at %s" % (where, k["symbol"])):
        return
    g, p, ka = struct.unpack_from("<III", kd, 0)
    entry, = struct.unpack_from("<q", kd, 16)
    r3, r1, r2 = struct.unpack_from("<III", kd, 44)
    props, preload = struct.unpack_from("<HH", kd, 56)
    want = {"group_segment_fixed_size": g, "private_segment_fixed_size": p,
            "kernarg_size": ka, "kernel_code_entry_byte_offset": entry & (2**64 - 1),
            "compute_pgm_rsrc3": r3, "compute_pgm_rsrc1": r1,
            "compute_pgm_rsrc2": r2, "kernel_code_properties": props,
            "kernarg_preload": preload}
    words = {n: int(v, 16) for n, v in k["descriptor"]["words"].items()}
    check(words == want, "%s: descriptor words %s, the bytes say %s"
          % (where, words, want))
    check(g == k["group_segment_size"] and p == k["private_segment_size"],
          "%s: descriptor segments %d/%d, metadata %d/%d" % (
              where, g, p, k["group_segment_size"], k["private_segment_size"]))


def check_code_object(readelf, where, path, co, entry_target):
    md = readelf_metadata(readelf, path)
    if md is None:
        return 0
    kds = readelf_descriptors(readelf, path)
    target = md.get("amdhsa.target", "")
    check(co["metadata_target"] == target,
          "%s: metadata target %s, readelf %s" % (where, co["metadata_target"], target))
    check(target.endswith("--" + co["target"]) and co["target"] == entry_target,
          "%s: target %s, bundle id says %s, metadata %s"
          % (where, co["target"], entry_target, target))
    check(co["metadata_version"] == md.get("amdhsa.version"),
          "%s: metadata version %s, readelf %s"
          % (where, co["metadata_version"], md.get("amdhsa.version")))
    want = md.get("amdhsa.kernels", [])
    got = co["kernels"]
    check([k[".name"] for k in want] == [k["name"] for k in got] and
          co["kernel_count"] == len(want),
          "%s: %d kernels, readelf %d" % (where, len(got), len(want)))
    for w, k in zip(want, got):
        kw = "%s %s" % (where, w[".name"])
        check(k["symbol"] == w[".symbol"], "%s: symbol %s" % (kw, k["symbol"]))
        pairs = [("kernarg_size", ".kernarg_segment_size"),
                 ("group_segment_size", ".group_segment_fixed_size"),
                 ("private_segment_size", ".private_segment_fixed_size"),
                 ("wavefront_size", ".wavefront_size"),
                 ("sgpr_count", ".sgpr_count"), ("vgpr_count", ".vgpr_count"),
                 ("agpr_count", ".agpr_count"),
                 ("sgpr_spill_count", ".sgpr_spill_count"),
                 ("vgpr_spill_count", ".vgpr_spill_count"),
                 ("max_flat_workgroup_size", ".max_flat_workgroup_size")]
        for mine, theirs in pairs:
            check(k[mine] == w.get(theirs, 0), "%s: %s %s, readelf %s"
                  % (kw, mine, k[mine], w.get(theirs)))
        check(k["kernarg_align"] == max(16, w[".kernarg_segment_align"]),
              "%s: kernarg_align %s, readelf %s"
              % (kw, k["kernarg_align"], w[".kernarg_segment_align"]))
        args = [(a.get(".offset"), a.get(".size"), a.get(".value_kind"),
                 a.get(".address_space"), a.get(".name"), a.get(".type_name"))
                for a in w.get(".args", [])]
        mine = [(a["offset"], a["size"], a["value_kind"], a["address_space"],
                 a["name"], a["type_name"]) for a in k["args"]]
        check(mine == args, "%s: args %s, readelf %s" % (kw, mine, args))
        check_descriptor(kw, k, kds.get(k["symbol"]))
    return len(got)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--objdump", required=True)
    p.add_argument("--readelf", default="llvm-readelf-16")
    p.add_argument("--library", default=DEFAULT_LIBRARY)
    args = p.parse_args()

    if not os.path.exists(args.library):
        print("%s not installed: skipped" % args.library)
        return SKIP
    readelf = shutil.which(args.readelf)
    if not readelf:
        print("%s not found: skipped" % args.readelf)
        return SKIP
    try:
        import yaml  # noqa: F401  (readelf prints the metadata as YAML)
    except ImportError:
        print("python3-yaml not installed: skipped")
        return SKIP

    with tempfile.TemporaryDirectory(prefix="aql-hip-library-") as tmp:
        r = run([args.objdump, "--json", "--extract", tmp, args.library])
        check(r.returncode == 0, "aql-objdump exit %d: %s"
              % (r.returncode, r.stderr[:2000]))
        try:
            f = json.loads(r.stdout)["files"][0]
        except (ValueError, KeyError, IndexError) as e:
            check(False, "aql-objdump output: %s" % e)
            return 1
        entries = f.get("entries", [])
        mine = [(e["part"], e["id"], e["size"]) for e in entries]
        walked = walk_section(args.library)
        if walked is None:
            print("no zstd tool for a zstd bundle: section walk skipped")
        else:
            check(mine == walked, "entries %s...\nwalked %s..."
                  % (mine[:10], walked[:10]))
            check(f.get("parts") == len({w[0] for w in walked}),
                  "parts %s" % f.get("parts"))
        cos = kernels = inspect_only = 0
        for e in entries:
            if not e["amdgcn"] or not e["size"]:
                continue
            where = "entry %d (%s)" % (e["index"], e["id"])
            co = e.get("code_object")
            if not check(co is not None and e.get("extracted"),
                         "%s: not opened or not extracted: %s"
                         % (where, e.get("error"))):
                continue
            check(os.path.getsize(e["extracted"]) == e["size"],
                  "%s: extracted %d bytes" % (where, os.path.getsize(e["extracted"])))
            check(co["dispatchable"] == (not co["target"].startswith(("gfx6", "gfx7", "gfx8"))),
                  "%s: dispatchable %s" % (where, co["dispatchable"]))
            inspect_only += not co["dispatchable"]
            kernels += check_code_object(readelf, where, e["extracted"], co,
                                         e["target"])
            cos += 1
            os.unlink(e["extracted"])
    print("%s: %d bundle(s), %d entries, %d code objects (%d inspection only), "
          "%d kernels checked against %s"
          % (args.library, f.get("parts", 0), len(entries), cos, inspect_only,
             kernels, os.path.basename(readelf)))
    check(cos > 0 and kernels > 0, "no code object was checked")
    print("FAILED: %d check(s)" % failures if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
