#!/usr/bin/env python3
"""sass_diff.py - compare the SASS of two builds of one .cu file, function by function.

A restructuring of a kernel (a long body split into __forceinline__ steps, a renamed local, a
moved comment) must not change what runs on the GPU. This checks it at compile time, without a
GPU and without cuobjdump / nvdisasm: both versions are built as cubins with the Makefile's
nvcc flags for one architecture (-cubin -Xptxas -v), and for every function (each kernel
instance and each non-inlined device function) it prints registers, stack frame, spill stores
and loads, static shared memory (from ptxas -v), the number of SASS instructions of its
.text.<mangled name> section (16 bytes an instruction from sm_70 on), and whether the section
is byte-identical. Where it is not, the opcode sequences (the low 12 bits of each instruction)
are compared with difflib and the differing stretches counted.

Usage (from the repository root):
    python3 dev/cuda/sass_diff.py src/backend/cuda/k_stream.cu          # HEAD vs the working tree
    python3 dev/cuda/sass_diff.py --rev main src/backend/cuda/k_stream.cu
    python3 dev/cuda/sass_diff.py --cubins old.cubin new.cubin          # two cubins already built
    options: --arch sm_90 (default), --nvcc PATH, --keep DIR (leave the cubins and ptxas logs there)

The old build is made from `git archive REV` of src/ and include/ (the file's headers as they
were at REV); the new one from the working tree. Names of internal-linkage functions carry a
hash of the translation unit (_INTERNAL_<hash>_..._<hash>); it is masked before matching.

Exit status: 0 when every function's section is byte-identical and its registers, stack,
spills and shared memory are unchanged; 1 when anything differs; 2 on a usage or build error.
"""
import argparse
import difflib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

INSN = 16  # bytes per SASS instruction (Volta and later)


def die(msg):
    print("sass_diff: " + msg, file=sys.stderr)
    sys.exit(2)


def norm(name):
    """The mangled name with the translation unit's hash masked."""
    return re.sub(r"_INTERNAL_[0-9a-f]+_\d+_\w+?_[0-9a-f]{8}", "_INTERNAL_", name)


def elf_functions(path):
    """{normalised function name: facts} of a cubin, one entry per .text.<name> section: text (its
    bytes), regs / frame (EIATTR_REGCOUNT / EIATTR_FRAME_SIZE of the global .nv.info), smem (the
    size of .nv.shared.<name>), and side (its .nv.info.<name>, .nv.constant0.<name> and relocation
    sections, compared as bytes: launch attributes, parameter bank, patched addresses)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        die(path + ": not a 64-bit ELF (a cubin)")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def cstr(base, o):
        return data[base + o:data.index(b"\0", base + o)].decode()
    names = [cstr(secs[shstrndx][4], s[0]) for s in secs]
    body = {n: data[s[4]:s[4] + s[5]] if s[1] != 8 else b"" for n, s in zip(names, secs)}  # 8: NOBITS
    size = {n: s[5] for n, s in zip(names, secs)}
    syms = []
    if ".symtab" in names:
        st = secs[names.index(".symtab")]
        for i in range(st[5] // 24):
            syms.append(norm(cstr(secs[st[6]][4], struct.unpack_from("<I", data, st[4] + i * 24)[0])))
    attrs = {}  # (symbol, attribute) -> value, from the global .nv.info
    info, off = body.get(".nv.info", b""), 0
    while off + 4 <= len(info):
        fmt, attr = info[off], info[off + 1]
        n = struct.unpack_from("<H", info, off + 2)[0] if fmt == 4 else 0
        if fmt == 4 and n == 8 and off + 12 <= len(info):
            sym, val = struct.unpack_from("<II", info, off + 4)
            if sym < len(syms):
                attrs[(syms[sym], attr)] = val
        off += 4 + n
    out = {}
    for n in names:
        if not n.startswith(".text."):
            continue
        fn = n[len(".text."):]
        key = norm(fn)
        side = b"".join(body.get(p + fn, b"") for p in (".nv.info.", ".nv.constant0.", ".rela.text.", ".rel.text."))
        out[key] = {"text": body[n], "regs": attrs.get((key, 0x2F)), "frame": attrs.get((key, 0x11)),
                    "smem": size.get(".nv.shared." + fn, 0), "side": side}
    return out


def ptxas_props(log):
    """{normalised name: {stack, spill_st, spill_ld, regs, smem}} from `ptxas -v` output. A
    non-entry function is listed again under every kernel that calls it; the first is kept."""
    props, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            cur = norm(m.group(1))
            if cur in props:
                cur = None  # a callee listed again
            else:
                props[cur] = {}
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            props[cur].update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m:
            props[cur]["regs"] = int(m.group(1))
            m = re.search(r"(\d+) bytes smem", line)
            props[cur]["smem"] = int(m.group(1)) if m else 0
            cur = None
    return props


def makefile_flags(arch):
    """NVCCFLAGS of the Makefile with its -gencode list replaced by one architecture."""
    cmd = ["make", "-s", "--no-print-directory",
           "--eval=sass-diff-flags: ; @echo '$(NVCCFLAGS)'; echo '$(CUDA_GENCODE)'", "sass-diff-flags"]
    try:
        lines = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
        flags, gencode = lines[-2].split(), lines[-1].split()
    except (OSError, subprocess.CalledProcessError, IndexError):
        die("could not read NVCCFLAGS from the Makefile (run from the repository root)")
    # drop each "-gencode X" pair of CUDA_GENCODE from the flags
    g = set(zip(gencode[::2], gencode[1::2]))
    out, i = [], 0
    while i < len(flags):
        if i + 1 < len(flags) and (flags[i], flags[i + 1]) in g:
            i += 2
            continue
        out.append(flags[i])
        i += 1
    cc = arch.replace("sm_", "")
    return out + ["-gencode", "arch=compute_%s,code=sm_%s" % (cc, cc)]


def build(nvcc, flags, jobs):
    """Runs the nvcc jobs [(src, cwd, out, extra flags)] side by side; returns their stderr."""
    procs = []
    for src, cwd, out, extra in jobs:
        cmd = [nvcc] + flags + extra + [src, "-o", out]
        procs.append((cmd, cwd, subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                 text=True)))
    logs = []
    for cmd, cwd, pr in procs:
        _, err = pr.communicate()
        if pr.returncode != 0:
            sys.stderr.write(err)
            die("build failed in %s: %s" % (cwd, " ".join(cmd)))
        logs.append(err)
    return logs


def ptx_entries(path):
    """{normalised entry name: its PTX lines} with .loc, .reg and comments dropped, virtual registers
    renumbered in order of first use and labels masked, so that two builds compare by structure."""
    with open(path) as f:
        text = norm(f.read())
    out = {}
    for part in re.split(r"\n(?=\.(?:visible |weak )*\.entry )", text):
        m = re.match(r"\.(?:visible |weak )*\.entry (\S+?)\(", part)
        if not m:
            continue
        seen, count = {}, {}

        def ren(mm):  # %r123 -> %r<k>, k counting the distinct %r registers in order of first use
            if mm.group(0) not in seen:
                k = mm.group(1)
                count[k] = count.get(k, 0) + 1
                seen[mm.group(0)] = "%%%s%d" % (k, count[k] - 1)
            return seen[mm.group(0)]
        lines = []
        for ln in part.split("\n"):
            ln = ln.strip()
            if ln.startswith(".section"):  # the debug sections after the last entry
                break
            if not ln or ln.startswith((".loc", "//", ".file", ".reg")):
                continue
            ln = re.sub(r"%(rd|r|f|fd|p|rs)(\d+)\b", ren, ln)
            lines.append(re.sub(r"\$L__BB\d+_\d+", "L", ln))
        out[m.group(1)] = lines
    return out


def compare_ptx(old_ptx, new_ptx):
    a, b = ptx_entries(old_ptx), ptx_entries(new_ptx)
    print("PTX per entry (.loc and .reg dropped, registers renumbered by first use, labels masked):")
    for n in sorted(set(a) | set(b)):
        if a.get(n) == b.get(n):
            print("  %-52s same" % short(n))
            continue
        la, lb = a.get(n, []), b.get(n, [])
        sm = difflib.SequenceMatcher(None, la, lb, autojunk=False)
        ch = [c for c in sm.get_opcodes() if c[0] != "equal"]
        print("  %-52s %d stretches differ; the first:" % (short(n), len(ch)))
        t, i1, i2, j1, j2 = ch[0]
        for ln in la[i1:min(i2, i1 + 6)]:
            print("      - " + ln)
        for ln in lb[j1:min(j2, j1 + 6)]:
            print("      + " + ln)


def compare(old_cubin, new_cubin, old_log, new_log):
    a, b = elf_functions(old_cubin), elf_functions(new_cubin)
    pa, pb = ptxas_props(old_log), ptxas_props(new_log)
    names = sorted(set(a) | set(b))
    bad = 0
    print("%-52s %9s %9s %9s %11s %11s  %s" % ("function", "regs", "stack", "spill", "smem", "insns", "SASS"))
    for n in names:
        if n not in a or n not in b:
            print("%-52s only in the %s build" % (short(n), "old" if n in a else "new"))
            bad += 1
            continue
        ea, eb = a[n], b[n]
        qa, qb = pa.get(n, {}), pb.get(n, {})
        ra, rb = qa.get("regs", ea["regs"]), qb.get("regs", eb["regs"])
        ka, kb = qa.get("stack", ea["frame"]), qb.get("stack", eb["frame"])
        sa = "%s/%s" % (qa.get("spill_st", "?"), qa.get("spill_ld", "?"))
        sb = "%s/%s" % (qb.get("spill_st", "?"), qb.get("spill_ld", "?"))
        ma, mb = qa.get("smem", ea["smem"]), qb.get("smem", eb["smem"])
        ta, tb = ea["text"], eb["text"]
        if ta == tb:
            what = "identical" if ea["side"] == eb["side"] else "identical code, attributes differ"
        else:
            oa = [op(ta, i) for i in range(0, len(ta), INSN)]
            ob = [op(tb, i) for i in range(0, len(tb), INSN)]
            sm = difflib.SequenceMatcher(None, oa, ob, autojunk=False)
            ch = [c for c in sm.get_opcodes() if c[0] != "equal"]
            what = ("same opcodes, operands differ" if not ch else
                    "%d stretches differ (%d -> %d instructions), opcode ratio %.4f" % (
                        len(ch), sum(c[2] - c[1] for c in ch), sum(c[4] - c[3] for c in ch), sm.ratio()))
        same = (ta == tb and ea["side"] == eb["side"] and ra == rb and ka == kb and sa == sb and
                ma == mb)
        if not same or sa not in ("0/0", "?/?") or sb not in ("0/0", "?/?"):
            bad += 1
        print("%-52s %4s %4s %4s %4s %9s %5s %5s %5d %5d  %s" % (
            short(n), ra, rb, ka, kb, sb if sa == sb else sa + ">" + sb,
            ma, mb, len(ta) // INSN, len(tb) // INSN, what))
    print("(old new pairs; stack: frame bytes; spill: stores/loads in bytes, both builds (? without a ptxas -v "
          "log); smem: static shared bytes (ptxas -v; else the .nv.shared section); insns: SASS instructions)")
    print("%d of %d functions differ or spill" % (bad, len(names)) if bad else
          "all %d functions byte-identical (code and attributes), same registers, stack, spills and shared memory"
          % len(names))
    return 1 if bad else 0


def op(t, i):
    return struct.unpack_from("<Q", t, i)[0] & 0xFFF


def short(n):
    return n if len(n) <= 52 else n[:49] + "..."


def main():
    ap = argparse.ArgumentParser(description="compare the SASS of two builds of one .cu file")
    ap.add_argument("file", nargs="?", help="the .cu file, relative to the repository root")
    ap.add_argument("--rev", default="HEAD", help="git revision of the old build (default HEAD)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--nvcc", default=None, help="default: nvcc on PATH, else the Makefile's")
    ap.add_argument("--keep", default=None, help="directory to leave the cubins and ptxas logs in")
    ap.add_argument("--cubins", nargs=2, metavar=("OLD", "NEW"), help="compare two built cubins")
    ap.add_argument("--ptx", action="store_true", help="also build and compare the PTX (to find why SASS differs)")
    o = ap.parse_args()
    if o.cubins:
        logs = []
        for c in o.cubins:  # a ptxas -v log beside the cubin (X.cubin -> X.ptxas), if any
            p = os.path.splitext(c)[0] + ".ptxas"
            logs.append(open(p).read() if os.path.exists(p) else "")
        return compare(o.cubins[0], o.cubins[1], logs[0], logs[1])
    if not o.file:
        ap.error("a .cu file or --cubins")
    if not os.path.exists(o.file):
        die(o.file + ": not found (run from the repository root)")
    nvcc = o.nvcc or shutil.which("nvcc")
    if not nvcc:
        nvcc = subprocess.run(["make", "-s", "--no-print-directory", "--eval=sass-diff-nvcc: ; @echo '$(NVCC)'",
                               "sass-diff-nvcc"], capture_output=True, text=True).stdout.strip()
    flags = makefile_flags(o.arch)
    tmp = tempfile.mkdtemp(prefix="sass_diff.")
    try:
        old_tree = os.path.join(tmp, "old")
        os.mkdir(old_tree)
        top = o.file.split("/")[0]
        arch = subprocess.run(["git", "archive", o.rev, "--", "src", "include", top],
                              capture_output=True, check=False)
        if arch.returncode != 0:
            die("git archive %s failed: %s" % (o.rev, arch.stderr.decode().strip()))
        subprocess.run(["tar", "-x", "-C", old_tree], input=arch.stdout, check=True)
        old_cubin, new_cubin = os.path.join(tmp, "old.cubin"), os.path.join(tmp, "new.cubin")
        print("building %s at %s and in the working tree (%s %s)" % (o.file, o.rev, os.path.basename(nvcc),
                                                                     " ".join(flags)))
        cub = ["-cubin", "-Xptxas", "-v"]
        jobs = [(o.file, old_tree, old_cubin, cub), (o.file, os.getcwd(), new_cubin, cub)]
        if o.ptx:
            jobs += [(o.file, old_tree, os.path.join(tmp, "old.ptx"), ["-ptx"]),
                     (o.file, os.getcwd(), os.path.join(tmp, "new.ptx"), ["-ptx"])]
        old_log, new_log = build(nvcc, flags, jobs)[:2]
        for c, log in ((old_cubin, old_log), (new_cubin, new_log)):
            with open(os.path.splitext(c)[0] + ".ptxas", "w") as f:
                f.write(log)
        rc = compare(old_cubin, new_cubin, old_log, new_log)
        if o.ptx:
            compare_ptx(os.path.join(tmp, "old.ptx"), os.path.join(tmp, "new.ptx"))
        if o.keep:
            os.makedirs(o.keep, exist_ok=True)
            for f in ("old.cubin", "new.cubin", "old.ptxas", "new.ptxas", "old.ptx", "new.ptx"):
                if os.path.exists(os.path.join(tmp, f)):
                    shutil.copy(os.path.join(tmp, f), o.keep)
        return rc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
