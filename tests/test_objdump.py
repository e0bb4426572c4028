#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Test aql-objdump (and, with --bench, aql-bench --load) on code objects
built here from a small OpenCL source whose kernels and arguments are
known, plus any --fixture files, which are only checked to parse.

Builds with clang/ld.lld (required: exit 77, "skipped", without them);
clang-16 adds a code object V5, clang-offload-bundler a bundle, and
llvm-objcopy an ELF file carrying that bundle in .hip_fatbin.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77

SOURCE = r"""
__kernel void saxpy(__global float *restrict y, __global const float *x,
		    float a, uint n)
{
	uint i = __builtin_amdgcn_workgroup_id_x() * 64 +
		 __builtin_amdgcn_workitem_id_x();
	if (i < n)
		y[i] = a * x[i] + y[i];
}

__kernel void fill(__global int *out, int v)
{
	out[__builtin_amdgcn_workitem_id_x()] = v;
}

__kernel void noargs(void)
{
}
"""

# name -> [(name, type_name, value_kind, offset, size, flag)]
EXPECTED = {
    "saxpy": [("y", "float*", "global_buffer", 0, 8, "is_restrict"),
              ("x", "float*", "global_buffer", 8, 8, "is_const"),
              ("a", "float", "by_value", 16, 4, None),
              ("n", "uint", "by_value", 20, 4, None)],
    "fill": [("out", "int*", "global_buffer", 0, 8, None),
             ("v", "int", "by_value", 8, 4, None)],
    "noargs": [],
}

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + what, file=sys.stderr)
    return cond


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, **kw)


def build(args, tmp):
    """Build the fixtures; returns {label: (path, expectations)}."""
    src = os.path.join(tmp, "k.cl")
    with open(src, "w") as f:
        f.write(SOURCE)
    out = {}

    def compile_co(label, clang, lld, mcpu, extra):
        obj = os.path.join(tmp, label + ".o")
        co = os.path.join(tmp, label + ".hsaco")
        r = run([clang, "-x", "cl", "-cl-std=CL2.0", "-cl-kernel-arg-info",
                 "-O2", "-nogpulib", "-target", "amdgcn-amd-amdhsa",
                 "-mcpu=" + mcpu] + extra + ["-c", src, "-o", obj])
        if r.returncode:
            sys.exit("building %s failed:\n%s" % (label, r.stderr))
        r = run([lld, "-shared", obj, "-o", co])
        if r.returncode:
            sys.exit("linking %s failed:\n%s" % (label, r.stderr))
        return co

    out["v4_gfx90a"] = (compile_co("v4_gfx90a", args.clang, args.lld,
                                   "gfx90a", []),
                        dict(version=4, target="gfx90a", wave=64,
                             md_version=[1, 1]))
    out["v4_gfx1030"] = (compile_co("v4_gfx1030", args.clang, args.lld,
                                    "gfx1030", []),
                         dict(version=4, target="gfx1030", wave=32,
                              md_version=[1, 1]))
    if args.clang16 and args.lld16:
        out["v5_gfx90a"] = (compile_co("v5_gfx90a", args.clang16, args.lld16,
                                       "gfx90a", ["-mcode-object-version=5"]),
                            dict(version=5, target="gfx90a", wave=64,
                                 md_version=[1, 2]))
    return out


HOST_SOURCE = r"""
#include <aql/kernel.h>

AQL_KERNEL_NO_BARRIER(scale, (aql_global float *, x), (float, k))
{
	x[aql_global_id(0)] *= k;
}
"""


def test_host(args, tmp):
    """A host code object from tools/aql-kcc, if given."""
    if not args.kcc:
        print("no aql-kcc: host code object checks skipped")
        return
    src = os.path.join(tmp, "scale.c")
    so = os.path.join(tmp, "scale.host.so")
    with open(src, "w") as f:
        f.write(HOST_SOURCE)
    r = run([args.kcc, "--target", "host", "-o", so, src])
    if r.returncode:
        sys.exit("aql-kcc --target host failed:\n" + r.stderr)
    r, doc = objdump(args, [so])
    check(r.returncode == 0, "host objdump exit %d: %s"
          % (r.returncode, r.stderr))
    if not doc:
        return
    co = doc["files"][0].get("code_object", {})
    check(co.get("kind") == "host" and co.get("target") is None and
          co.get("version") == 0, "host: kind %s target %s version %s"
          % (co.get("kind"), co.get("target"), co.get("version")))
    kernels = co.get("kernels", [])
    check([k["name"] for k in kernels] == ["scale"],
          "host kernels %s" % [k["name"] for k in kernels])
    for k in kernels:
        got = [(a["name"], a["value_kind"], a["offset"], a["size"])
               for a in k["args"]]
        check(got == [("x", "global_buffer", 0, 8), ("k", "by_value", 8, 4)],
              "host args %s" % got)
        desc = k["descriptor"]
        check(sorted(desc["words"]) == sorted(
            ["group_segment_fixed_size", "private_segment_fixed_size",
             "kernarg_size", "kernel_code_entry_byte_offset"]) and
              desc["fields"] == [], "host descriptor %s" % desc)
        check(int(desc["words"]["kernarg_size"], 16) == k["kernarg_size"] >= 12,
              "host kernarg_size %s" % k["kernarg_size"])


def check_fields(label, kname, desc):
    """Every named field must be its bits of the word it names."""
    words = desc["words"]
    fields = desc["fields"]
    check(len(fields) > 0, "%s %s: no descriptor fields" % (label, kname))
    for f in fields:
        raw = int(words[f["word"]], 16)
        want = (raw >> f["shift"]) & ((1 << f["width"]) - 1)
        check(f["value"] == want,
              "%s %s: field %s.%s = %d, word says %d"
              % (label, kname, f["word"], f["name"], f["value"], want))
    return {f["name"]: f["value"] for f in fields}


def check_code_object(label, co, exp):
    check(co["kind"] == "amdgpu", "%s: kind %s" % (label, co["kind"]))
    check(co["version"] == exp["version"],
          "%s: version %s" % (label, co["version"]))
    check(co["machine"] == 224, "%s: e_machine %s" % (label, co["machine"]))
    check(co["target"] == exp["target"], "%s: target %s" % (label, co["target"]))
    check(co["metadata_version"] == exp["md_version"],
          "%s: metadata version %s" % (label, co["metadata_version"]))
    kernels = {k["name"]: k for k in co["kernels"]}
    check(co["kernel_count"] == len(co["kernels"]),
          "%s: kernel_count %s for %d kernels"
          % (label, co["kernel_count"], len(co["kernels"])))
    check(set(kernels) == set(EXPECTED),
          "%s: kernels %s" % (label, sorted(kernels)))
    for name, want_args in EXPECTED.items():
        k = kernels.get(name)
        if not k:
            continue
        check(k["symbol"] == name + ".kd", "%s: symbol %s" % (label, k["symbol"]))
        check(k["wavefront_size"] == exp["wave"],
              "%s %s: wavefront %s" % (label, name, k["wavefront_size"]))
        check(k["explicit_arg_count"] == len(want_args),
              "%s %s: explicit_arg_count %s"
              % (label, name, k["explicit_arg_count"]))
        check(k["kernarg_align"] >= 16 and k["kernarg_size"] >=
              sum(a[4] for a in want_args),
              "%s %s: kernarg %s/%s" % (label, name, k["kernarg_size"],
                                        k["kernarg_align"]))
        args = k["args"][:len(want_args)]
        check(len(args) == len(want_args),
              "%s %s: %d args" % (label, name, len(k["args"])))
        for i, (a, w) in enumerate(zip(args, want_args)):
            got = (a["name"], a["type_name"], a["value_kind"], a["offset"],
                   a["size"])
            check(a["index"] == i and got == w[:5],
                  "%s %s arg %d: %s, want %s" % (label, name, i, got, w[:5]))
            if w[5]:
                check(a[w[5]], "%s %s arg %d: not %s" % (label, name, i, w[5]))
            if w[2] == "global_buffer":
                check(a["address_space"] == "global",
                      "%s %s arg %d: address space %s"
                      % (label, name, i, a["address_space"]))
        desc = k["descriptor"]
        words = desc["words"]
        check(int(words["kernarg_size"], 16) == k["kernarg_size"],
              "%s %s: descriptor kernarg_size %s vs %s"
              % (label, name, words["kernarg_size"], k["kernarg_size"]))
        fields = check_fields(label, name, desc)
        check(fields.get("ENABLE_WAVEFRONT_SIZE32") == (exp["wave"] == 32),
              "%s %s: ENABLE_WAVEFRONT_SIZE32 %s"
              % (label, name, fields.get("ENABLE_WAVEFRONT_SIZE32")))
        check(desc["decoded"]["wave32"] == (exp["wave"] == 32),
              "%s %s: decoded wave32" % (label, name))
        check("GRANULATED_WORKITEM_VGPR_COUNT" in fields,
              "%s %s: no GRANULATED_WORKITEM_VGPR_COUNT" % (label, name))


def objdump(args, files, json_out=True):
    cmd = [args.objdump] + (["--json"] if json_out else []) + files
    r = run(cmd)
    doc = None
    if json_out:
        try:
            doc = json.loads(r.stdout)
        except ValueError as e:
            check(False, "%s: output is not JSON: %s\n%s"
                  % (" ".join(cmd), e, r.stdout[:2000]))
    return r, doc


def test_objects(args, built, tmp):
    labels = list(built)
    r, doc = objdump(args, [built[l][0] for l in labels])
    check(r.returncode == 0, "objdump exit %d: %s" % (r.returncode, r.stderr))
    if not doc:
        return
    check(len(doc["files"]) == len(labels), "files: %d" % len(doc["files"]))
    for label, f in zip(labels, doc["files"]):
        check(f["path"] == built[label][0] and f["ok"] and
              f["format"] == "code_object", "%s: %s" % (label, f.get("error")))
        if f.get("code_object"):
            check_code_object(label, f["code_object"], built[label][1])

    # The text form names every kernel and argument too.
    r, _ = objdump(args, [built["v4_gfx90a"][0]], json_out=False)
    check(r.returncode == 0, "text objdump exit %d" % r.returncode)
    for name, want in EXPECTED.items():
        check("kernel %s (symbol %s.kd)" % (name, name) in r.stdout,
              "text output lacks kernel %s" % name)
        for a in want:
            check("%s : %s" % (a[0], a[1]) in r.stdout,
                  "text output lacks arg %s of %s" % (a[0], name))


def test_bundles(args, built, tmp):
    if not args.bundler:
        print("no clang-offload-bundler: bundle checks skipped")
        return
    a, b = built["v4_gfx90a"][0], built["v4_gfx1030"][0]
    fb = os.path.join(tmp, "k.hipfb")
    r = run([args.bundler, "-type=o",
             "-targets=host-x86_64-unknown-linux-gnu,"
             "hipv4-amdgcn-amd-amdhsa--gfx90a,"
             "hipv4-amdgcn-amd-amdhsa--gfx1030",
             "-inputs=/dev/null,%s,%s" % (a, b), "-outputs=" + fb])
    if r.returncode:
        sys.exit("bundling failed:\n" + r.stderr)
    files = [fb]
    if args.objcopy:
        host_c = os.path.join(tmp, "host.c")
        host_o = os.path.join(tmp, "host.o")
        fat_o = os.path.join(tmp, "fat.o")
        with open(host_c, "w") as f:
            f.write("int main(void) { return 0; }\n")
        r = run([args.clang, "-c", host_c, "-o", host_o])
        if r.returncode == 0:
            r = run([args.objcopy, "--add-section", ".hip_fatbin=" + fb,
                     host_o, fat_o])
        if r.returncode:
            sys.exit("making an ELF with .hip_fatbin failed:\n" + r.stderr)
        files.append(fat_o)
        # A .hip_fatbin that holds no bundle is an error, not a code object.
        junk = os.path.join(tmp, "junk.bin")
        bad_o = os.path.join(tmp, "badfat.o")
        with open(junk, "wb") as f:
            f.write(b"\0" * 64)
        r = run([args.objcopy, "--add-section", ".hip_fatbin=" + junk,
                 host_o, bad_o])
        if r.returncode:
            sys.exit("making an ELF with a bad .hip_fatbin failed:\n" + r.stderr)
        r, doc = objdump(args, [bad_o])
        check(r.returncode == 1 and ("aql-objdump: %s: aql_bundle_open" % bad_o)
              in r.stderr, "bad .hip_fatbin: exit %d: %r"
              % (r.returncode, r.stderr))
    r, doc = objdump(args, files)
    check(r.returncode == 0, "bundle objdump exit %d: %s"
          % (r.returncode, r.stderr))
    if not doc:
        return
    size = os.path.getsize(fb)
    for f in doc["files"]:
        what = os.path.basename(f["path"])
        check(f["ok"] and f["format"] == "bundle",
              "%s: %s %s" % (what, f.get("format"), f.get("error")))
        entries = f.get("entries", [])
        check([e["id"] for e in entries] ==
              ["host-x86_64-unknown-linux-gnu",
               "hipv4-amdgcn-amd-amdhsa--gfx90a",
               "hipv4-amdgcn-amd-amdhsa--gfx1030"],
              "%s: entries %s" % (what, [e["id"] for e in entries]))
        for e, label in zip(entries[1:], ["v4_gfx90a", "v4_gfx1030"]):
            check(e["amdgcn"] and e["target"] == built[label][1]["target"],
                  "%s entry %d: target %s" % (what, e["index"], e["target"]))
            check(e["size"] == os.path.getsize(built[label][0]),
                  "%s entry %d: size %d" % (what, e["index"], e["size"]))
            if f["path"] == fb:
                check(0 < e["offset"] <= size - e["size"],
                      "%s entry %d: offset %d" % (what, e["index"], e["offset"]))
            if check("code_object" in e, "%s entry %d: no code object"
                     % (what, e["index"])):
                check_code_object(what + " " + label, e["code_object"],
                                  built[label][1])
        if entries:
            check(not entries[0]["amdgcn"] and entries[0]["target"] is None
                  and "code_object" not in entries[0],
                  "%s: host entry shown as code object" % what)


def test_errors(args, built, tmp):
    good = built["v4_gfx90a"][0]
    missing = os.path.join(tmp, "no-such-file.hsaco")
    garbage = os.path.join(tmp, "garbage.bin")
    with open(garbage, "wb") as f:
        f.write(b"\x7fELF" + bytes(range(256)) * 4)
    truncated = os.path.join(tmp, "truncated.hsaco")
    with open(good, "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[:len(data) // 2])
    empty = os.path.join(tmp, "empty.bin")
    open(empty, "wb").close()

    for bad in (missing, garbage, truncated, empty, tmp):
        for js in (False, True):
            r, doc = objdump(args, [bad], json_out=js)
            mode = "json" if js else "text"
            check(r.returncode == 1, "%s (%s): exit %d, want 1"
                  % (bad, mode, r.returncode))
            check(("aql-objdump: %s: " % bad) in r.stderr,
                  "%s (%s): message does not name the file: %r"
                  % (bad, mode, r.stderr))
            if js and doc:
                f = doc["files"][0]
                check(f["ok"] is False and f["error"],
                      "%s: JSON entry %s" % (bad, f))

    # One bad file does not stop the others.
    r, doc = objdump(args, [missing, good, garbage])
    check(r.returncode == 1, "mixed: exit %d" % r.returncode)
    if doc:
        check([f["ok"] for f in doc["files"]] == [False, True, False],
              "mixed: %s" % [f["ok"] for f in doc["files"]])
    r = run([args.objdump])
    check(r.returncode == 2 and "usage" in r.stderr, "no file: exit %d"
          % r.returncode)


def test_fixtures(args):
    """Fixtures from elsewhere: parse, and look sane."""
    if not args.fixture:
        return
    r, doc = objdump(args, args.fixture)
    check(r.returncode == 0, "fixtures: exit %d: %s" % (r.returncode, r.stderr))
    for f in (doc or {}).get("files", []):
        cos = [f.get("code_object")] + [e.get("code_object")
                                         for e in f.get("entries", [])]
        for co in filter(None, cos):
            for k in co["kernels"]:
                check(k["name"] and k["symbol"],
                      "%s: kernel without name" % f["path"])
                offs = [a["offset"] for a in k["args"]]
                check(offs == sorted(offs), "%s %s: arg offsets %s"
                      % (f["path"], k["name"], offs))
                for a in k["args"]:
                    check(a["offset"] + a["size"] <= k["kernarg_size"],
                          "%s %s: arg %d past kernarg_size"
                          % (f["path"], k["name"], a["index"]))
                if co["kind"] == "amdgpu":
                    check_fields(f["path"], k["name"], k["descriptor"])


def test_bench(args, built):
    """aql-bench --load on a fixture: JSON lines, the peer present or not."""
    co = built["v4_gfx90a"][0]
    want = ["load_ms", "metadata_us_per_kernel", "metadata_parse_us_per_kernel",
            "comgr_metadata_us_per_kernel", "ratio_comgr_over_aql"]
    for comgr in (None, "/nonexistent/libamd_comgr.so.2"):
        env = dict(os.environ)
        if comgr:
            env["AQL_BENCH_COMGR"] = comgr
        r = run([args.bench, "--quick", "--json", "--load", co], env=env)
        check(r.returncode == 0, "bench exit %d: %s" % (r.returncode, r.stderr))
        try:
            lines = [json.loads(l) for l in r.stdout.splitlines()]
        except ValueError as e:
            check(False, "bench output is not JSON lines: %s" % e)
            continue
        got = {l["metric"]: l for l in lines}
        check(sorted(got) == sorted(want), "bench metrics %s" % sorted(got))
        for m in want[:3]:
            if m in got:
                check(got[m]["value"] > 0 and got[m]["kernels"] == 3,
                      "bench %s: %s" % (m, got[m]))
        peer = got.get("comgr_metadata_us_per_kernel", {})
        if comgr:
            check(peer.get("skipped") is True and
                  "comgr: not installed, peer skipped" in peer.get("reason", ""),
                  "bench without comgr: %s" % peer)
            check(got.get("ratio_comgr_over_aql", {}).get("skipped") is True,
                  "bench without comgr: ratio %s"
                  % got.get("ratio_comgr_over_aql"))
        elif not peer.get("skipped") and check(
                peer.get("value", 0) > 0 and
                got.get("metadata_us_per_kernel", {}).get("value", 0) > 0,
                "bench comgr: %s" % peer):
            ratio = got.get("ratio_comgr_over_aql", {})
            want_ratio = peer["value"] / got["metadata_us_per_kernel"]["value"]
            check(abs(ratio.get("value", 0) - want_ratio) < 1e-2 * want_ratio,
                  "bench ratio %s, want %.4f" % (ratio, want_ratio))
    garbage = os.path.join(os.path.dirname(co), "garbage.bin")
    with open(garbage, "wb") as f:
        f.write(b"not a code object")
    r = run([args.bench, "--quick", "--load", garbage])
    check(r.returncode == 1 and garbage in r.stderr,
          "bench on garbage: exit %d: %s" % (r.returncode, r.stderr))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--objdump", required=True)
    p.add_argument("--bench", help="also test aql-bench --load")
    p.add_argument("--clang", default="clang-14")
    p.add_argument("--lld", default="ld.lld-14")
    p.add_argument("--clang16")
    p.add_argument("--lld16")
    p.add_argument("--bundler")
    p.add_argument("--objcopy")
    p.add_argument("--kcc", help="tools/aql-kcc, for a host code object")
    p.add_argument("--fixture", action="append", default=[])
    args = p.parse_args()

    for tool in ("clang", "lld"):
        path = shutil.which(getattr(args, tool))
        if not path:
            print("%s not found: skipped" % getattr(args, tool))
            return SKIP
        setattr(args, tool, path)
    for tool in ("clang16", "lld16", "bundler", "objcopy"):
        v = getattr(args, tool)
        setattr(args, tool, shutil.which(v) if v else None)

    with tempfile.TemporaryDirectory(prefix="aql-objdump-test-") as tmp:
        built = build(args, tmp)
        test_objects(args, built, tmp)
        test_bundles(args, built, tmp)
        test_errors(args, built, tmp)
        test_host(args, tmp)
        test_fixtures(args)
        if args.bench:
            test_bench(args, built)
    print("%s" % ("FAILED: %d check(s)" % failures if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
