#!/usr/bin/env python3
"""Compiles the programs of `linformer kernels --emit` with three GPU vendors'
compilers and checks what each made of every kernel (scripts/check-gpu-compilers.sh
installs the compilers and calls this).

- Intel: ocloc (IGC) for dg2 and pvc. IGC_EnableZEBinary=1 makes it write a
  zebin, whose .ze_info says per kernel: GRF registers a thread, SIMD width,
  SLM bytes, and the per-thread memory buffers (private arrays and spills).
- AMD: clang-15's amdgcn-amd-amdhsa backend, builtins from rocm-device-libs,
  for gfx90a and gfx1030; -Rpass-analysis=kernel-resource-usage says SGPRs,
  VGPRs, spills, scratch bytes a lane, LDS bytes and waves a SIMD.
- NVIDIA: clang-15's nvptx64-nvidia-nvcl with libclc-15's builtins to PTX,
  then NVIDIA's ptxas -v for sm_80 and sm_90: registers, stack frame, spill
  stores and loads, shared memory. NVIDIA's driver compiles OpenCL C with a
  front end of its own (NVVM), whose PTX differs from clang's: the numbers
  stand for what NVIDIA's back end makes of LLVM's code for these kernels
  (the same register allocator, the same limits), not for the driver's
  exact build. libclc is built for the triple nvptx64--nvidiacl, clang's
  OpenCL target is nvptx64-nvidia-nvcl: the same target under two names,
  whose "different target triples" linker warning is turned off.

A build error, any spill or scratch (private memory the compiler could not
keep in registers) or local memory past a profile's limit fails the check.
"""
import argparse
import concurrent.futures
import csv
import hashlib
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

TARGETS = {"intel": ("dg2", "pvc"), "amd": ("gfx90a", "gfx1030"), "nvidia": ("sm_80", "sm_90")}


class Program:
    """One program of one profile: its source, options, and the kernels the library creates of it."""

    def __init__(self, profile, vendor, path, local_limit, kernels, options):
        self.profile, self.vendor, self.path, self.local_limit = profile, vendor, path, local_limit
        self.kernels, self.options = kernels, options  # kernels None: every kernel the compiler reports
        with open(path, "rb") as f:
            self.key = hashlib.sha256(f.read() + b"\0" + options.encode()).hexdigest()


def read_programs(kernels_dir, extra):
    programs = []
    for profile in sorted(os.listdir(kernels_dir)):
        folder = os.path.join(kernels_dir, profile)
        with open(os.path.join(folder, "kernels.tsv")) as f:
            for line in f:
                source, vendor, local, kernels, options = line.rstrip("\n").split("\t")
                programs.append(Program(profile, vendor, os.path.join(folder, source), int(local), kernels.split(),
                                        options))
        if extra:
            last = programs[-1]
            programs.append(Program(profile, last.vendor, extra, last.local_limit, None, "-cl-std=CL1.2"))
    return programs


def run(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, errors="replace")
    return r.returncode, r.stdout


def metrics(regs, spills, scratch, local, occupancy):
    return {"registers": regs, "spills": spills, "scratch": scratch, "local": local, "occupancy": occupancy}


# ---- Intel: ocloc, and the zebin's .ze_info ----

def elf_section(data, wanted):
    import struct
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    for h in headers:
        name = data[names + h[0]:data.index(b"\0", names + h[0])].decode()
        if name == wanted:
            return data[h[4]:h[4] + h[5]].decode()
    return None


def parse_ze_info(text):
    """Per kernel of .ze_info's kernels: GRF count, SIMD width, SLM bytes and its per-thread buffers."""
    found, kernel, in_buffers = {}, None, False
    for line in text.splitlines():
        if line.startswith("kernels_misc_info:"):
            break
        m = re.match(r"  - name:\s+(\S+)", line)
        if m:
            kernel = found.setdefault(m.group(1), {"grf_count": 0, "simd_size": 0, "slm_size": 0, "buffers": []})
            in_buffers = False
            continue
        if kernel is None:
            continue
        key, _, value = line.strip().lstrip("- ").partition(":")
        value = value.strip()
        if line.startswith("    ") and not line.startswith("     "):
            in_buffers = key == "per_thread_memory_buffers"
        if key in ("grf_count", "simd_size", "slm_size") and not in_buffers:
            kernel[key] = int(value)
        elif in_buffers and key == "usage":
            kernel["buffers"].append([value, 0])
        elif in_buffers and key == "size" and kernel["buffers"]:
            kernel["buffers"][-1][1] = int(value)
    return found


def compile_intel(root, prog, device):
    lib = os.path.join(root, "usr/lib/x86_64-linux-gnu")
    env = dict(os.environ, LD_LIBRARY_PATH=lib, IGC_EnableZEBinary="1")
    with tempfile.TemporaryDirectory() as tmp:
        rc, log = run([os.path.join(root, "usr/bin/ocloc"), "compile", "-file", prog.path, "-device", device,
                       "-options", prog.options, "-out_dir", tmp, "-output", "k"], env)
        bins = [f for f in os.listdir(tmp) if f.endswith(".bin")]
        if rc != 0 or not bins:
            return None, log
        with open(os.path.join(tmp, bins[0]), "rb") as f:
            info = elf_section(f.read(), ".ze_info")
    if info is None:
        return None, log + "\n(no .ze_info: not a zebin)"
    out = {}
    for name, k in parse_ze_info(info).items():
        spill = sum(size for usage, size in k["buffers"] if "spill" in usage)
        private = sum(size for usage, size in k["buffers"] if "spill" not in usage)
        out[name] = metrics(f"{k['grf_count']} GRF", spill, private, k["slm_size"], f"SIMD{k['simd_size']}")
    return out, log


# ---- AMD: clang-15's amdgcn backend and its resource-usage remarks ----

def compile_amd(root, prog, cpu):
    libs = os.path.join(root, "usr/lib/x86_64-linux-gnu/amdgcn/bitcode")
    with tempfile.TemporaryDirectory() as tmp:
        rc, log = run(["clang-15", "-x", "cl", *shlex.split(prog.options), "-target", "amdgcn-amd-amdhsa",
                       f"-mcpu={cpu}", f"--rocm-device-lib-path={libs}", "-Rpass-analysis=kernel-resource-usage",
                       "-c", prog.path, "-o", os.path.join(tmp, "k.o")])
    if rc != 0:
        return None, log
    blocks, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"remark:\s+(.*?):\s+(\S+) \[-Rpass-analysis", line)
        if not m:
            continue
        key, value = m.groups()
        if key == "Function Name":
            cur = blocks.setdefault(value, {})
        elif cur is not None:
            cur[key] = int(value)
    out = {}
    for name, b in blocks.items():
        if "LDS Size [bytes/block]" not in b:  # a function, not a kernel
            continue
        out[name] = metrics(f"{b['SGPRs']} S / {b['VGPRs']} V", b["SGPRs Spill"] + b["VGPRs Spill"],
                            b["ScratchSize [bytes/lane]"], b["LDS Size [bytes/block]"],
                            f"{b['Occupancy [waves/SIMD]']} waves/SIMD")
    return out, log


# ---- NVIDIA: clang-15 to PTX with libclc, then ptxas -v ----

def compile_nvidia(root, prog, archs):
    clc = os.path.join(root, "usr/lib/clc/nvptx64--nvidiacl.bc")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        ptx = os.path.join(tmp, "k.ptx")
        rc, log = run(["clang-15", "-x", "cl", *shlex.split(prog.options), "-target", "nvptx64-nvidia-nvcl",
                       f"-march={archs[0]}", "-Xclang", "-mlink-builtin-bitcode", "-Xclang", clc,
                       "-Wno-linker-warnings", "-S", prog.path, "-o", ptx])
        if rc != 0:
            return {arch: (None, log) for arch in archs}
        for arch in archs:
            rc, plog = run([os.path.join(root, "bin/ptxas"), "-v", f"-arch={arch}", ptx, "-o",
                            os.path.join(tmp, arch + ".cubin")])
            results[arch] = (None if rc != 0 else parse_ptxas(plog), log + plog)
    return results


def parse_ptxas(log):
    out, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            cur = out.setdefault(m.group(1), metrics("", 0, 0, 0, "-"))
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur is not None:
            cur["scratch"], cur["spills"] = int(m.group(1)), int(m.group(2)) + int(m.group(3))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur is not None:
            cur["registers"] = m.group(1)
            s = re.search(r"(\d+) bytes smem", line)
            cur["local"] = int(s.group(1)) if s else 0
    return out


# ---- The check ----

def compile_all(root, programs, workers):
    """Every distinct program (source and options) with each target of its profile's vendor:
    {(key, target): (metrics or None, log)}."""
    unique = {(p.vendor, p.key): p for p in programs}
    jobs, results, seconds = [], {}, {}
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for (vendor, key), prog in unique.items():
            if vendor == "nvidia":
                jobs.append((vendor, key, None, pool.submit(timed, compile_nvidia, root, prog, TARGETS[vendor])))
                continue
            fn = compile_intel if vendor == "intel" else compile_amd
            for target in TARGETS[vendor]:
                jobs.append((vendor, key, target, pool.submit(timed, fn, root, prog, target)))
        for vendor, key, target, job in jobs:
            result, took = job.result()
            seconds[vendor] = seconds.get(vendor, 0.0) + took
            if vendor == "nvidia":
                for arch, r in result.items():
                    results[(key, arch)] = r
            else:
                results[(key, target)] = result
    return results, seconds


def timed(fn, *args):
    t = time.monotonic()
    return fn(*args), time.monotonic() - t


def short_options(options):
    return " ".join(o for o in options.split() if not o.startswith("-cl-std="))


def read_baseline(path):
    """The spills and scratch known today: {(profile, program, kernel, target): (spills, scratch)}."""
    known = {}
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                profile, program, kernel, target, spills, scratch = line.rstrip("\n").split("\t")
                known[(profile, program, kernel, target)] = (int(spills), int(scratch))
    return known


def check(programs, results, known):
    """The table's rows, the failures, the known spills seen (as baseline lines) and the notes."""
    rows, failures, seen, notes = {}, [], [], []
    for p in programs:
        name = os.path.basename(p.path)
        program = f"{re.sub(r'^[0-9]+-', '', name)} {short_options(p.options)}".strip()
        for target in TARGETS[p.vendor]:
            found, log = results[(p.key, target)]
            where = f"{p.profile} {name} ({short_options(p.options) or 'no options'}) on {target}"
            if found is None:
                lines = log.strip().splitlines()
                said = [line for line in lines if "error" in line.lower()] or lines[-6:]
                failures.append(f"{where}: the build failed:\n" + "\n".join(said))
                continue
            for kernel in p.kernels if p.kernels is not None else sorted(found):
                m = found.get(kernel)
                if m is None:
                    failures.append(f"{where}: no kernel {kernel} in the compiler's output")
                    continue
                bad = []
                if m["local"] > p.local_limit:
                    bad.append(f"{m['local']} bytes of local memory, past the profile's {p.local_limit}")
                base = known.get((p.profile, program, kernel, target)) if p.kernels is not None else None
                if m["spills"] or m["scratch"]:
                    seen.append(f"{p.profile}\t{program}\t{kernel}\t{target}\t{m['spills']}\t{m['scratch']}")
                    if base is None or m["spills"] > base[0] or m["scratch"] > base[1]:
                        bad.append(f"{m['spills']} bytes of spills, {m['scratch']} bytes of scratch (private memory)"
                                   + (f", past the known {base[0]} and {base[1]}" if base else ""))
                    elif (m["spills"], m["scratch"]) != base:
                        notes.append(f"{where}: {kernel}: spills {m['spills']}, scratch {m['scratch']}, below the "
                                     f"known {base[0]} and {base[1]}: lower them in the baseline")
                elif base is not None:
                    notes.append(f"{where}: {kernel}: no spills or scratch now: drop it from the baseline")
                if bad:
                    failures.append(f"{where}: {kernel}: " + ", ".join(bad))
                row = rows.setdefault((kernel, short_options(p.options), target), dict(m, profiles=[], ok="yes"))
                row["profiles"].append(p.profile)
                if bad:
                    row["ok"] = "NO"
                elif base is not None and row["ok"] == "yes" and (m["spills"] or m["scratch"]):
                    row["ok"] = "known"
    return rows, failures, seen, notes


COLUMNS = ["kernel", "options", "target", "registers", "spills", "scratch", "local", "occupancy", "profiles", "ok"]


def write_tables(rows, base):
    lines = [dict(kernel=k, options=o, target=t, **{c: r[c] for c in COLUMNS[3:8]},
                  profiles=" ".join(r["profiles"]), ok=r["ok"]) for (k, o, t), r in rows.items()]
    with open(base + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(lines)
    with open(base + ".md", "w") as f:
        f.write("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n")
        for line in lines:
            f.write("| " + " | ".join(str(line[c]) for c in COLUMNS) + " |\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="the folder the compilers were unpacked into")
    ap.add_argument("--kernels", required=True, help="a folder of `linformer kernels --emit` folders, one a profile")
    ap.add_argument("--table", required=True, help="the tables' path without .md / .csv")
    ap.add_argument("--extra", help="a .cl file of one's own compiled for every profile too")
    ap.add_argument("--baseline", required=True, help="the spills and scratch known today (profile, program, kernel, "
                    "target, spill bytes, scratch bytes a line): more fails, less asks to lower it")
    ap.add_argument("--write-baseline", action="store_true", help="write what is seen now as the baseline")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args()
    programs = read_programs(args.kernels, args.extra)
    t = time.monotonic()
    results, seconds = compile_all(args.root, programs, args.jobs)
    rows, failures, seen, notes = check(programs, results, {} if args.write_baseline else read_baseline(args.baseline))
    write_tables(rows, args.table)
    if args.write_baseline:
        with open(args.baseline, "w") as f:
            f.write("# profile\tprogram (file and options)\tkernel\ttarget\tspill bytes\tscratch bytes (scripts/gpu_compilers.py)\n")
            f.write("".join(line + "\n" for line in seen))
        failures = [f for f in failures if "spills" not in f]
    took = ", ".join(f"{v} {s:.0f} s" for v, s in seconds.items())
    print(f"gpu_compilers: {len({p.key for p in programs})} distinct programs of {len(programs)}, "
          f"{len(rows)} kernel x target rows in {args.table}.md; {time.monotonic() - t:.0f} s ({took} of compiler time)",
          file=sys.stderr)
    for note in notes:
        print(f"gpu_compilers: note {note}", file=sys.stderr)
    for failure in failures:
        print(f"gpu_compilers: FAIL {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
