#!/usr/bin/env python3
"""Checks grade.yml: it parses as YAML, has the shape GitHub Actions expects (a push trigger, one job on a
self-hosted GPU runner, steps that each either run a command or use an action), and every command of its `run:`
steps appears, character for character, in section 7 of docs/instructor-guide.md (the guide and the file cannot
drift apart).

    grader/integrations/github-classroom/check-workflow.py [grade.yml] [--guide docs/instructor-guide.md]

Needs PyYAML (Debian/Ubuntu: apt-get install python3-yaml). Exit status: 0 every check passed, 1 a check failed,
77 PyYAML is missing (CTest counts that as skipped).
"""
import argparse
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", "..", ".."))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workflow", nargs="?", default=os.path.join(here, "grade.yml"))
    ap.add_argument("--guide", default=os.path.join(root, "docs", "instructor-guide.md"))
    a = ap.parse_args()
    try:
        import yaml
    except ImportError:
        print("SKIP  PyYAML is not installed (apt-get install python3-yaml)")
        return 77

    ok = True

    def check(cond, what, detail=""):
        nonlocal ok
        ok = ok and bool(cond)
        print(f"{'PASS' if cond else 'FAIL'}  {what}" + ("" if cond or not detail else f" -- {detail}"))

    try:
        wf = yaml.safe_load(open(a.workflow, encoding="utf-8"))
    except yaml.YAMLError as e:
        check(False, f"{a.workflow} parses as YAML", str(e))
        return 1
    check(isinstance(wf, dict), f"{os.path.basename(a.workflow)} parses as YAML (a mapping)")
    if not isinstance(wf, dict):
        return 1
    # YAML 1.1 reads the key `on` as the boolean true.
    on = wf.get("on", wf.get(True))
    check(isinstance(on, dict) and "push" in on, "triggered on push")
    jobs = wf.get("jobs") or {}
    check(isinstance(jobs, dict) and len(jobs) == 1, "one job", f"jobs: {list(jobs)}")
    job = next(iter(jobs.values())) if jobs else {}
    runs_on = job.get("runs-on")
    labels = runs_on if isinstance(runs_on, list) else [runs_on]
    check({"self-hosted", "gpu"} <= set(labels), "runs on a self-hosted runner labelled gpu", f"runs-on: {runs_on}")
    steps = job.get("steps") or []
    check(steps and all(isinstance(s, dict) and (("run" in s) != ("uses" in s)) for s in steps),
          "every step either runs a command or uses an action")
    uses = [s["uses"] for s in steps if "uses" in s]
    check(all(re.fullmatch(r"[\w.-]+/[\w.-]+@[\w.-]+", u) for u in uses), "actions are pinned to a version",
          ", ".join(uses))
    check(any(u.startswith("actions/checkout@") for u in uses), "checks out the repository")

    guide = open(a.guide, encoding="utf-8").read()
    m = re.search(r"^## 7\..*?(?=^## \d+\.|\Z)", guide, re.S | re.M)
    check(m is not None, "the guide has a section 7")
    section = m.group(0) if m else ""
    runs = [s["run"].strip() for s in steps if "run" in s]
    check(runs, "the workflow runs commands")
    for cmd in runs:
        check(cmd in section, f"documented in section 7 of the guide: {cmd}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
