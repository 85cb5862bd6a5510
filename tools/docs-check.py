#!/usr/bin/env python3
"""Run the shell commands of the documentation as written, on a fresh clone, and report which ones failed.

Every fenced ```sh / ```bash block in the checked Markdown files must be preceded by an annotation that says
where it can run:

    <!-- docs-check: cpu -->                    any machine with the toolkit (this one, CI)
    <!-- docs-check: gpu -->                    a machine with an NVIDIA GPU
    <!-- docs-check: skip reason="..." -->      not runnable here, and why (network, Slurm, GitHub, ...)

Optional keys after the mode:
    may-fail="TEXT|TEXT"   commands containing one of these texts may exit 1..125 (a grade of 0 is not an error)
    setup="COMMAND"        run first: brings the checkout to the state the text assumes (e.g. step 3 written)
    same-as=FILE           not run again: every command must appear, character for character (comments
                           aside), among the commands of FILE that ran ok in this same check
    timeout=SECONDS        limit for this block (default 1800)

An inline command of the prose is checked by an annotation without a block: <!-- docs-check: gpu run="CMD" -->
next to the text that shows `CMD`.

A block without an annotation is an error, so new documentation cannot escape the check. The blocks of one
file run in order in ONE bash session that starts in the clone's root, as a reader would type them in one
terminal (variables and `cd` carry over). Each command's exit status is recorded; a command fails when it exits
non-zero (or, under may-fail, with 126 or more: not found, not executable, killed by a signal).

    tools/docs-check.py --list                       # every block, its mode and its commands
    tools/docs-check.py --mode cpu                   # fresh clone under build/docs-check/, run the cpu blocks
    tools/docs-check.py --mode gpu --files docs/student-guide.md
    tools/docs-check.py --mode cpu --no-clone        # in this checkout (careful: the docs build in build/)

Every run (--list included) also checks that each lab README's gate table matches its rubric.toml
(tools/rubric_table.py --check): a stale table is a problem like an unannotated block.

Shims, used only when the real command is missing: `sudo` when already root (runs the command), `less` (cat).
The report (report.md, report.json, one log per file) goes to WORKDIR (default build/docs-check).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

DEFAULT_FILES = ["README.md", "docs/*.md", "docs/background/*.md", "labs/*/README.md", "fuzz/README.md",
                 "tools/tuning/README.md", "grader/integrations/*/README.md"]
SHELL_LANGS = {"sh", "bash", "shell", "console"}
ANNOTATION = re.compile(r"<!--\s*docs-check:\s*(\w+)(.*?)-->")


class Block:
    def __init__(self, path, line, lang, mode, opts, problem=None):
        self.path, self.line, self.lang = path, line, lang
        self.mode, self.opts, self.problem = mode, opts, problem
        self.commands = []  # (line in file, command text)

    @property
    def where(self):
        return f"{self.path}:{self.line}"


def parse_opts(s):
    opts = {}
    for tok in shlex.split(s):
        key, _, val = tok.partition("=")
        opts[key] = val
    return opts


def find_blocks(root, path):
    lines = open(os.path.join(root, path), encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+)\s*([\w+-]*)", lines[i])
        if not m:
            # An inline command in the prose (`labgrade 01 --sanitize`) is checked through an annotation with
            # run="the same command" next to it.
            ann = ANNOTATION.search(lines[i])
            if ann and "run=" in ann.group(2):
                opts = parse_opts(ann.group(2))
                b = Block(path, i + 1, "inline", ann.group(1), opts,
                          None if ann.group(1) in ("cpu", "gpu") else "run= needs mode cpu or gpu")
                b.commands = [(i + 1, opts["run"])]
                blocks.append(b)
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*" + fence + r"\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        if i >= len(lines):
            blocks.append(Block(path, start + 1, lang, None, {}, "this code block is never closed"))
            break
        i += 1
        if lang not in SHELL_LANGS:
            continue
        # The annotation is the nearest non-blank line above the fence (it may also sit in a list item).
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        ann = ANNOTATION.search(lines[j]) if j >= 0 else None
        if not ann:
            blocks.append(Block(path, start + 1, lang, None, {},
                                "no <!-- docs-check: cpu|gpu|skip --> annotation above this block"))
            continue
        mode, opts = ann.group(1), parse_opts(ann.group(2))
        problem = None
        if mode not in ("cpu", "gpu", "skip"):
            problem = f"unknown docs-check mode '{mode}'"
        elif mode == "skip" and not opts.get("reason"):
            problem = "a skipped block needs reason=\"...\""
        b = Block(path, start + 1, lang, mode, opts, problem)
        # setup="..." brings the checkout into the state the text assumes (e.g. a step already written); it is
        # run and reported like a command of the block, but readers don't see it.
        b.commands = ([(start + 1, opts["setup"])] if opts.get("setup") else []) + split_commands(body, start + 2)
        blocks.append(b)
    return blocks


def complete(text):
    """True when `text` is a complete bash command list (no open quote, loop or trailing operator)."""
    if text.rstrip().endswith("\\"):
        return False
    r = subprocess.run(["bash", "-n"], input=text + "\n", text=True, capture_output=True)
    return r.returncode == 0


def split_commands(body, first_line):
    """Logical commands of a block: continuation lines, open quotes and open compound commands are joined."""
    cmds, cur, cur_line = [], [], None
    for k, line in enumerate(body):
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not cur:
            cur_line = first_line + k
        cur.append(line)
        text = "\n".join(cur)
        if complete(text):
            cmds.append((cur_line, text))
            cur = []
    if cur:
        cmds.append((cur_line, "\n".join(cur)))
    return cmds


def strip_comment(cmd):
    """The command without a trailing `# comment` and extra blanks (good enough for the docs' one-liners)."""
    return " ".join(re.sub(r"\s+#[^'\"]*$", "", cmd.strip()).split())


def expand_files(root, patterns):
    import glob
    out = []
    for p in patterns:
        for f in sorted(glob.glob(os.path.join(root, p))):
            rel = os.path.relpath(f, root)
            if rel not in out:
                out.append(rel)
    return out


def make_shims(workdir):
    shim = os.path.join(workdir, "shims")
    os.makedirs(shim, exist_ok=True)
    made = []
    if shutil.which("sudo") is None and os.geteuid() == 0:
        with open(os.path.join(shim, "sudo"), "w") as f:
            f.write('#!/bin/sh\n# docs-check shim: already root\nexec "$@"\n')
        made.append("sudo")
    if shutil.which("less") is None:
        with open(os.path.join(shim, "less"), "w") as f:
            f.write('#!/bin/sh\n# docs-check shim: no pager here\nexec cat "$@"\n')
        made.append("less")
    for n in made:
        os.chmod(os.path.join(shim, n), 0o755)
    return shim, made


def run_file(path, blocks, clone, workdir, shim):
    """One bash session per Markdown file. Returns {(block line, cmd line): (rc, seconds)}."""
    safe = path.replace("/", "_")
    script = os.path.join(workdir, "scripts", safe + ".sh")
    rcfile = os.path.join(workdir, "scripts", safe + ".rc")
    log = os.path.join(workdir, "logs", safe + ".log")
    os.makedirs(os.path.dirname(script), exist_ok=True)
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(script, "w") as f:
        f.write("# generated by tools/docs-check.py from " + path + "\n")
        f.write(f"cd {shlex.quote(clone)}\n")
        f.write(f"exec 9>{shlex.quote(rcfile)}\n")
        for b in blocks:
            f.write(f"\necho; echo '=== docs-check: {b.where} ({b.mode})'\n")
            for (ln, cmd) in b.commands:
                f.write(f"echo '--- $ ' {shlex.quote(cmd.splitlines()[0])}\n")
                f.write(f"__dc_t0=$SECONDS\n{cmd}\n")
                f.write(f"printf '%s %s %s %s\\n' {b.line} {ln} $? $((SECONDS - __dc_t0)) >&9\n")
    timeout = sum(int(b.opts.get("timeout", 1800)) for b in blocks)
    env = dict(os.environ)
    env["PATH"] = env["PATH"] + os.pathsep + shim  # shims only where nothing real exists
    with open(log, "w") as out:
        try:
            subprocess.run(["bash", script], cwd=clone, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            out.write(f"\n=== docs-check: session timed out after {timeout} s\n")
    results = {}
    if os.path.exists(rcfile):
        for row in open(rcfile):
            bl, cl, rc, sec = (int(x) for x in row.split())
            results[(bl, cl)] = (rc, sec)
    return results, log


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["cpu", "gpu", "all"], help="which blocks to run (all = cpu and gpu)")
    ap.add_argument("--files", nargs="+", help="Markdown files (globs) to check, relative to the repository root")
    ap.add_argument("--list", action="store_true", help="list the blocks and their commands, run nothing")
    ap.add_argument("--lines", help="FROM-TO: only the blocks that start on these lines of each file (a long page in "
                    "several runs; the first block run must not depend on the earlier ones)")
    ap.add_argument("--workdir", default=None, help="default: build/docs-check")
    ap.add_argument("--no-clone", action="store_true", help="run in this checkout instead of a fresh clone")
    ap.add_argument("--reuse-clone", action="store_true", help="keep an existing clone in WORKDIR/tree/clone")
    ap.add_argument("--prior", action="append", default=[],
                    help="report.json of an earlier check whose ok commands may satisfy same-as (checks split over runs)")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # .git is a folder in a clone and a file in a `git worktree`; --list clones nothing.
    if not a.no_clone and not a.list and a.mode and not os.path.exists(os.path.join(root, ".git")):
        sys.exit("docs-check: not a git checkout: use --no-clone on a fresh export (e.g. git archive) instead")
    files = expand_files(root, a.files or DEFAULT_FILES)
    blocks = {f: find_blocks(root, f) for f in files}
    problems = [b for bs in blocks.values() for b in bs if b.problem]
    # The gate tables a student reads are generated from the rubrics; a stale one states a threshold the grader
    # does not apply. rubric_table names each stale README itself.
    tables = subprocess.run([sys.executable, os.path.join(root, "tools", "rubric_table.py"), "--check", "--root", root])
    if tables.returncode != 0:
        problems.append(Block("labs/*/README.md", 0, "", None, {}, "gate table out of date: run tools/rubric_table.py"))
    if a.list or not a.mode:
        for f, bs in blocks.items():
            for b in bs:
                tag = b.mode or "?"
                extra = f" ({b.opts['reason']})" if b.mode == "skip" else ""
                print(f"{b.where:48} {tag}{extra}")
                for (ln, cmd) in b.commands:
                    print(f"    {ln:4}  {cmd.splitlines()[0]}" + (" ..." if "\n" in cmd else ""))
        for b in problems:
            print(f"ERROR {b.where}: {b.problem}", file=sys.stderr)
        n = sum(len(bs) for bs in blocks.values())
        print(f"{n} blocks in {len(files)} files; {len(problems)} problem(s)")
        return 1 if problems else 0
    if problems:
        for b in problems:
            print(f"ERROR {b.where}: {b.problem}", file=sys.stderr)
        return 2

    workdir = os.path.abspath(a.workdir or os.path.join(root, "build", "docs-check"))
    os.makedirs(workdir, exist_ok=True)
    if a.no_clone:
        clone = root
    else:
        # The clone sits alone in WORKDIR/tree, so what the docs make next to it (`../cuda-labs-student`, the
        # instructor guide's release) lands there too and a fresh run starts without it.
        tree = os.path.join(workdir, "tree")
        clone = os.path.join(tree, "clone")
        if not (a.reuse_clone and os.path.isdir(clone)):
            shutil.rmtree(tree, ignore_errors=True)
            os.makedirs(tree)
            subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", root, clone], check=True)
        head = subprocess.run(["git", "-C", clone, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        print(f"docs-check: fresh clone of {head.stdout.strip()} in {clone}")
    shim, made = make_shims(workdir)
    if made:
        print(f"docs-check: shims for missing commands: {', '.join(made)}")
    modes = {"cpu", "gpu"} if a.mode == "all" else {a.mode}

    report, failed, deferred = [], 0, []
    t_all = time.time()
    def write_report():
        with open(os.path.join(workdir, "report.json"), "w") as out:
            json.dump(report, out, indent=1)
        lines = [f"# docs-check ({a.mode}) — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
                 "| where | status | exit | s | command |", "| --- | --- | ---: | ---: | --- |"]
        for r in report:
            cmd = (r.get("command") or "; ".join(r.get("commands", []))).splitlines()[0].replace("|", "\\|")
            if r["status"] == "skipped":
                cmd = f"{cmd} — *{r['reason']}*"
            status = r["status"] + (f" (as {r['same_as']})" if r.get("same_as") else "")
            lines.append(f"| {r['where']} | {status} | {r.get('rc', '')} | {r.get('seconds', '')} | `{cmd[:110]}` |")
        ok = sum(1 for r in report if r["status"] == "ok")
        sk = sum(1 for r in report if r["status"] == "skipped")
        lines += ["", f"{ok} command(s) ok, {failed} failed or not reached, {sk} block(s) skipped with a reason; "
                  f"{time.time() - t_all:.0f} s" + (f"; shims: {', '.join(made)}" if made else "")]
        open(os.path.join(workdir, "report.md"), "w").write("\n".join(lines) + "\n")
        return lines

    lo, hi = (int(x) for x in a.lines.split("-")) if a.lines else (0, 1 << 30)
    for f, bs in blocks.items():
        bs = [b for b in bs if lo <= b.line <= hi]
        run = [b for b in bs if b.mode in modes]
        for b in bs:
            if b.mode == "skip":
                report.append({"where": b.where, "mode": "skip", "status": "skipped", "reason": b.opts["reason"],
                               "commands": [c for _, c in b.commands]})
        deferred += [(f, b) for b in run if b.opts.get("same-as")]
        run = [b for b in run if not b.opts.get("same-as")]
        if not run:
            continue
        t0 = time.time()
        print(f"docs-check: {f}: {len(run)} block(s), {sum(len(b.commands) for b in run)} command(s) ...", flush=True)
        results, log = run_file(f, run, clone, workdir, shim)
        for b in run:
            may = [s for s in b.opts.get("may-fail", "").split("|") if s]
            for (ln, cmd) in b.commands:
                rec = {"where": f"{f}:{ln}", "mode": b.mode, "command": cmd, "log": os.path.relpath(log, workdir)}
                if (b.line, ln) not in results:
                    rec.update(status="not reached")
                else:
                    rc, sec = results[(b.line, ln)]
                    allowed = rc == 0 or (0 < rc < 126 and any(s in cmd for s in may))
                    rec.update(status="ok" if allowed else "FAILED", rc=rc, seconds=sec)
                if rec["status"] != "ok":
                    failed += 1
                report.append(rec)
        print(f"docs-check: {f}: done in {time.time() - t0:.0f} s", flush=True)
        write_report()  # after every file: a run cut short still leaves its report

    # Blocks that repeat another page's commands: verified against what that page ran, once everything ran.
    prior = []
    for p in a.prior:
        prior += [dict(r, prior=p) for r in json.load(open(p))]
    for f, b in deferred:
        for (ln, cmd) in b.commands:
            rec = {"where": f"{f}:{ln}", "mode": b.mode, "command": cmd, "log": "-"}
            twin = next((r for r in report + prior if r.get("status") == "ok"
                         and r["where"].startswith(b.opts["same-as"] + ":")
                         and strip_comment(r["command"]) == strip_comment(cmd)), None)
            if twin:
                rec.update(status="ok", rc=twin.get("rc", 0), seconds=0,
                           same_as=twin["where"] + (" in an earlier run" if twin.get("prior") else ""))
            else:
                rec.update(status="not verified")
                failed += 1
            report.append(rec)
    lines = write_report()
    for r in report:
        if r["status"] not in ("ok", "skipped"):
            print(f"  {r['status']:11} {r['where']}: {r['command'].splitlines()[0]}  (exit {r.get('rc', '-')}; log {r['log']})")
    print(lines[-1])
    print(f"docs-check: report in {os.path.join(workdir, 'report.md')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
