#!/usr/bin/env python3
"""Checks a Gradescope results.json: its format, and optionally what a rehearsal submission should have scored.

    check-results.py results.json                                  # format only
    check-results.py results.json --name solutions --labs 01 --gpu no --expect solutions
    check-results.py results.json --name broken --labs 01,02 --gpu yes --expect compile-error:01

Format (Gradescope's autograder specification): a JSON object; `score` a number, or every test has one; `tests` a
list whose entries have a non-empty `name`, numeric `score` <= `max_score`, `status` passed|failed, a string
`output`, and `visibility` (where set) one of hidden|after_due_date|after_published|visible; the top-level `score`
equals the sum of the tests' scores; `leaderboard` entries have a name and a value.

Expectations (labgrade's results: each test is tagged labNN and its kind, and its output starts "status: X"):
    solutions          every test passed and scores its max_score; without a GPU, every CPU gate passed and every
                       GPU gate was skipped (0 points)
    empty              every test scores 0, as "not_submitted" with "not submitted"
    compile-error:NN   (every student file of lab NN broken) lab NN's step gates (ids stepK.*) are "build_failed" with
                       "does not compile"; its other gates depend on the whole lab and are not checked (with step
                       files the skeleton stands in and they are graded); the other labs as `solutions`
    only:NN            lab NN as `solutions`; the other labs as `empty`
Prints one PASS/FAIL line per check; exit status 1 when any check failed, 2 when the file cannot be read.
"""
import argparse
import json
import re
import sys

VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def format_problems(r):
    p = []
    if not isinstance(r, dict):
        return ["the top level is not a JSON object"]
    tests = r.get("tests")
    if "score" in r and not is_num(r["score"]):
        p.append("`score` is not a number")
    if tests is None:
        if "score" not in r:
            p.append("neither `score` nor `tests`")
        return p
    if not isinstance(tests, list):
        return p + ["`tests` is not a list"]
    names = set()
    for i, t in enumerate(tests):
        where = f"tests[{i}]"
        if not isinstance(t, dict):
            p.append(f"{where} is not an object")
            continue
        name = t.get("name")
        if not isinstance(name, str) or not name:
            p.append(f"{where}: no name")
        elif name in names:
            p.append(f"{where}: duplicate name {name!r}")
        names.add(name)
        if "score" not in r and not is_num(t.get("score")):
            p.append(f"{where}: no numeric score (and no top-level score)")
        for k in ("score", "max_score"):
            if k in t and not is_num(t[k]):
                p.append(f"{where}: {k} is not a number")
        if not is_num(t.get("max_score")):
            p.append(f"{where}: no max_score")
        elif is_num(t.get("score")) and t["score"] > t["max_score"] + 1e-9:
            p.append(f"{where}: score {t['score']} > max_score {t['max_score']}")
        if t.get("status") not in ("passed", "failed"):
            p.append(f"{where}: status {t.get('status')!r} is not passed/failed")
        if not isinstance(t.get("output", ""), str):
            p.append(f"{where}: output is not a string")
        if "visibility" in t and t["visibility"] not in VISIBILITY:
            p.append(f"{where}: visibility {t['visibility']!r}")
        if "tags" in t and not (isinstance(t["tags"], list) and all(isinstance(x, str) for x in t["tags"])):
            p.append(f"{where}: tags is not a list of strings")
    if "visibility" in r and r["visibility"] not in VISIBILITY:
        p.append(f"top-level visibility {r['visibility']!r}")
    if is_num(r.get("score")) and all(isinstance(t, dict) and is_num(t.get("score")) for t in tests):
        total = sum(t["score"] for t in tests)
        if abs(total - r["score"]) > 1e-6:
            p.append(f"score {r['score']} is not the sum of the tests' scores ({total})")
    for i, e in enumerate(r.get("leaderboard", [])):
        if not (isinstance(e, dict) and isinstance(e.get("name"), str) and "value" in e):
            p.append(f"leaderboard[{i}] needs a name and a value")
        elif e.get("order", "desc") not in ("asc", "desc"):
            p.append(f"leaderboard[{i}]: order {e['order']!r}")
    return p


def status_of(t):
    first = t.get("output", "").split("\n", 1)[0]
    return first[len("status: "):] if first.startswith("status: ") else "?"


def lab_of(t):
    for tag in t.get("tags", []):
        if tag.startswith("lab"):
            return tag[3:]
    return "?"


def is_step_gate(t):
    """A gate of one step ("lab01 step5a.correct: ..."): its id starts with stepK."""
    return re.match(r"lab\S* step[0-9]+[a-z]?\.", t.get("name", "")) is not None


def kind_of(t):
    tags = [x for x in t.get("tags", []) if not x.startswith("lab")]
    return tags[0] if tags else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--name", default="results", help="label for the PASS/FAIL lines")
    ap.add_argument("--labs", default="", help="the graded labs, e.g. 01,02 (each must have tests)")
    ap.add_argument("--gpu", choices=["yes", "no"], default="no")
    ap.add_argument("--expect", default="", help="solutions | empty | compile-error:NN | only:NN")
    a = ap.parse_args()

    try:
        r = json.load(open(a.results, encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"FAIL  {a.name}: results.json cannot be read: {e}")
        return 2
    checks = []

    def check(ok, what, detail=""):
        ok = bool(ok)
        checks.append(ok)
        print(f"{'PASS' if ok else 'FAIL'}  {a.name}: {what}" + ("" if ok or not detail else f" -- {detail}"))

    fp = format_problems(r)
    check(not fp, "results.json follows Gradescope's format", "; ".join(fp[:5]))
    if fp or not a.expect:
        return 0 if all(checks) else 1
    tests = r.get("tests", [])
    labs = [x.strip().zfill(2) for x in a.labs.replace(" ", ",").split(",") if x.strip()]
    for lab in labs:
        check(any(lab_of(t) == lab for t in tests), f"lab {lab} has tests")
    check(all(lab_of(t) in labs for t in tests) or not labs, "no tests of labs that were not asked for",
          ", ".join(sorted({lab_of(t) for t in tests} - set(labs))))

    def as_solution(ts, label):
        if a.gpu == "yes":
            bad = [t["name"] for t in ts if t.get("status") != "passed" or t.get("score") != t.get("max_score")]
            check(not bad and ts, f"{label}: every gate passed with full points (GPU)", "; ".join(bad[:4]))
        else:
            cpu = [t for t in ts if kind_of(t) == "cpu"]
            gpu = [t for t in ts if kind_of(t) != "cpu"]
            bad = [t["name"] for t in cpu if status_of(t) != "passed" or t.get("score") != t.get("max_score")]
            check(not bad, f"{label}: every CPU gate passed ({len(cpu)})", "; ".join(bad[:4]))
            bad = [f"{t['name']} ({status_of(t)})" for t in gpu if status_of(t) != "skipped" or t.get("score") != 0]
            check(not bad and gpu, f"{label}: every GPU gate skipped with 0 points (no GPU) ({len(gpu)})",
                  "; ".join(bad[:4]) or "no GPU gates")

    def as_status(ts, label, status, text):
        bad = [f"{t['name']} ({status_of(t)})" for t in ts
               if status_of(t) != status or t.get("score") != 0 or text not in t.get("output", "")]
        check(not bad and ts, f"{label}: every gate {status} with 0 points, saying \"{text}\"", "; ".join(bad[:4]))

    kind, _, lab = a.expect.partition(":")
    lab = lab.zfill(2) if lab else ""
    if kind == "solutions":
        as_solution(tests, "all labs")
    elif kind == "empty":
        as_status(tests, "all labs", "not_submitted", "not submitted")
        check(r.get("score") == 0, "total score 0", f"score {r.get('score')}")
    elif kind == "compile-error" and lab:
        as_status([t for t in tests if lab_of(t) == lab and is_step_gate(t)], f"lab {lab} (its steps)", "build_failed",
                  "does not compile")
        rest = [t for t in tests if lab_of(t) != lab]
        if rest:
            as_solution(rest, "the other labs")
    elif kind == "only" and lab:
        as_solution([t for t in tests if lab_of(t) == lab], f"lab {lab}")
        rest = [t for t in tests if lab_of(t) != lab]
        if rest:
            as_status(rest, "the other labs", "not_submitted", "not submitted")
    else:
        print(f"check-results.py: unknown expectation {a.expect!r}", file=sys.stderr)
        return 2
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
