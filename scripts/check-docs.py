#!/usr/bin/env python3
"""Runs every command that README.md and the chapters of docs/ show, and checks their links.

usage: scripts/check-docs.py [--list]

README.md first, then each chapter in the order of README's table of chapters,
each fenced block in turn, in one scratch copy of the tree (its top-level
entries linked, its build/ this tree's build/ but for the package's own build
folder), so that what the commands write lands there:
  sh       runs in bash, stopping at the first failing command;
  console  runs each line that begins with "$ " (with its continuation lines);
  python   runs in env/bin/python, the environment README's Python block makes;
  c        compiles against include/; with a main, links the library and runs;
  text     output or layout: runs nowhere.
A block in any other language fails the check. A block is left out only where
the line before it says <!-- docs-check: skip (why) -->, and each such block is
printed with its reason. README is at most 250 lines and a chapter under 400,
each chapter's first line a heading, and every relative link names a file (and
a #section a heading or an <a id> of it). --list prints the blocks without running them.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = {"sh", "console", "python", "c"}
SKIP = re.compile(r"<!-- docs-check: skip \((.+)\) -->")
FENCE = re.compile(r"^```(\S*)\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
BLOCK_SECONDS = 900 # the serving block installs its extra and starts a server
LIMITS = {"README.md": 250} # lines; a chapter: CHAPTER_LINES
CHAPTER_LINES = 399


def fail(msg):
    print("check-docs: " + msg, file=sys.stderr)
    sys.exit(1)


def chapters():
    """README, then the chapters in the order README's table links them; every chapter is linked."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    order = []
    for target in re.findall(r"^\| \[(docs/[\w-]+\.md)\]", readme, re.M):
        if target not in order:
            order.append(target)
    present = sorted("docs/" + f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    missing = [p for p in present if p not in order]
    if missing:
        fail("README's table of chapters does not list " + ", ".join(missing))
    return ["README.md"] + order


def slug(heading):
    """A heading's anchor as GitHub makes it."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    text = open(path).read()
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)} | set(re.findall(r'<a id="([^"]+)"', text))


def check_shape_and_links(rel):
    path = os.path.join(ROOT, rel)
    lines = open(path).read().split("\n")
    limit = LIMITS.get(rel, CHAPTER_LINES)
    count = len(lines) - (lines[-1] == "")
    if count > limit:
        fail(f"{rel} has {count} lines, at most {limit}")
    if not lines[0].startswith("# "):
        fail(f"{rel}: the first line is not a heading")
    in_code = False
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            in_code = not in_code
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, section = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                fail(f"{rel}:{number}: the link {target} names no file")
            if section and dest.endswith(".md") and section not in anchors(dest):
                fail(f"{rel}:{number}: the link {target} names no heading of {os.path.relpath(dest, ROOT)}")


def blocks(rel):
    """(line, language, text, skip reason or None) of every fenced block of a file."""
    lines = open(os.path.join(ROOT, rel)).read().split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            fail(f"{rel}:{start + 1}: a block that is never closed")
        skip = SKIP.search(lines[start - 1]) if start else None
        found.append((start + 1, lang, "\n".join(lines[start + 1:end]) + "\n", skip.group(1) if skip else None))
        i = end + 1
    for line, lang, _, _ in found:
        if lang not in RUN and lang != "text":
            fail(f"{rel}:{line}: a block fenced as '{lang or 'nothing'}': say sh, console, python, c or text")
    return found


def console_commands(text):
    out, cont = [], False
    for line in text.split("\n"):
        if line.startswith("$ ") or cont:
            out.append(line[2:] if line.startswith("$ ") and not cont else line)
            cont = line.endswith("\\")
    return "\n".join(out) + "\n"


def scratch_tree():
    """A folder whose entries are the tree's, and whose build/ holds the tree's build/ entries."""
    work = tempfile.mkdtemp(prefix="linformer-docs-")
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for top in sorted({n.split("/")[0] for n in names}):
        if os.path.exists(os.path.join(ROOT, top)):
            os.symlink(os.path.join(ROOT, top), os.path.join(work, top))
    os.mkdir(os.path.join(work, "build"))
    for entry in os.listdir(os.path.join(ROOT, "build")):
        src, dst = os.path.join(ROOT, "build", entry), os.path.join(work, "build", entry)
        if entry == "wheel": # the package's build folder belongs to its source folder
            continue
        if os.path.islink(src): # a library's soname link stays relative, as a bundle copies it
            os.symlink(os.readlink(src), dst)
        elif os.path.isfile(src): # the file itself, so that what is copied from here is no link
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
        else:
            os.symlink(src, dst)
    return work


def run_block(work, index, lang, text):
    env = dict(os.environ)
    env.pop("OCL_ICD_VENDORS", None) # as a newcomer's shell: the system's drivers
    # The blocks' kernel cache is their own (`tune` stores its parameters there);
    # PoCL's compiler cache is shared with the tests.
    env.update(LINFORMER_CACHE_DIR=os.path.join(work, ".kernel-cache"),
               POCL_CACHE_DIR=os.path.join(ROOT, "build", "pocl-cache"))
    base = os.path.join(work, f".block-{index}")
    if lang == "c":
        with open(base + ".c", "w") as f:
            f.write(text)
        has_main = re.search(r"\bmain\s*\(", text) is not None
        cc = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "include"), base + ".c"]
        cc += ["-o", base, "-L", os.path.join(ROOT, "build"), "-llinformer",
               "-Wl,-rpath," + os.path.join(ROOT, "build")] if has_main else ["-c", "-o", base + ".o"]
        cmds = [cc] + ([[base]] if has_main else [])
    elif lang == "python":
        python = os.path.join(work, "env", "bin", "python")
        if not os.path.exists(python):
            return "a python block before README's Python block made env/"
        with open(base + ".py", "w") as f:
            f.write(text)
        cmds = [[python, base + ".py"]]
    else:
        with open(base + ".sh", "w") as f:
            f.write(console_commands(text) if lang == "console" else text)
        cmds = [["bash", "-e", "-o", "pipefail", base + ".sh"]]
    for cmd in cmds:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = proc.wait(timeout=BLOCK_SECONDS)
        except subprocess.TimeoutExpired:
            rc = f"still running after {BLOCK_SECONDS} s"
        try: # whatever the block left running (a server in the background) goes with it
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        if rc != 0:
            return f"{' '.join(cmd[:2])}: exit {rc}"
    return None


def main():
    listing = sys.argv[1:] == ["--list"]
    if sys.argv[1:] and not listing:
        fail("usage: scripts/check-docs.py [--list]")
    files = chapters()
    for rel in files:
        check_shape_and_links(rel)
    work = None if listing else scratch_tree()
    ran = skipped = index = 0
    try:
        for rel in files:
            for line, lang, text, skip in blocks(rel):
                if lang == "text":
                    continue
                where = f"{rel}:{line} ({lang})"
                if skip:
                    print(f"check-docs: {where} skipped: {skip}", flush=True)
                    skipped += 1
                    continue
                if listing:
                    print(f"check-docs: {where}\n{text}", flush=True)
                    continue
                index += 1
                print(f"check-docs: {where} ...", flush=True)
                began = time.monotonic()
                error = run_block(work, index, lang, text)
                if error:
                    fail(f"{where} failed: {error}; its commands:\n{text}")
                print(f"check-docs: {where} ok, {time.monotonic() - began:.0f} s", flush=True)
                ran += 1
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    if not listing:
        print(f"check-docs: {ran} blocks of {len(files)} files ran, {skipped} skipped with their reasons")


if __name__ == "__main__":
    main()
