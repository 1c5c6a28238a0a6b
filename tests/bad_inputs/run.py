#!/usr/bin/env python3
"""Runs the bad-input catalogue (catalogue.json) against the roofsim CLI.

Each case is a command line, the files it reads (written to a fresh folder first) and what it must
do: its exit code (1: bad input or data, 2: usage), a regular expression its standard error must
match, nothing on standard output, and no crash. Every failing case is reported by its id.

  run.py --roofsim PATH --source DIR [--catalogue FILE] [--work DIR] [--only ID...] [--record] [--jobs N]

--record prints what each case does instead of checking it.

A case: {"id", "args": [...], "exit": 1 | 2, "stderr": regex, optional "not_stderr": regex,
"stdout": path (where standard output goes, e.g. /dev/full; then it is not checked), "files":
{name: file} or "file": file (written as "case.json", or "file_name")}. In "args" and "from",
@SRC@ is the source tree, @DATA@ its data/, @TESTDATA@ tests/data/, @TMP@ the case's folder,
@FILE@ the case's one file. A file is {"text": "..."} (as written), {"json": value}, or
{"from": a base of the catalogue's "bases" or a JSON file, "set": {pointer: value},
"remove": [pointer...], "raw": {pointer: text}} (a value set as written, e.g. 1e400, which JSON
readers cannot hold). A pointer ending in "/-" appends to an array.
"""

import argparse
import concurrent.futures
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

EXITS = {1, 2}
CRASH = re.compile(r"terminate called|Assertion|AddressSanitizer|runtime error:|Segmentation|core dumped|what\(\):")


def substitute(text, places):
    for key, value in places.items():
        text = text.replace(key, value)
    return text


def pointer_parts(pointer):
    if not pointer.startswith("/"):
        raise ValueError("a JSON pointer starts with '/': " + pointer)
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def walk(doc, parts):
    node = doc
    for p in parts:
        node = node[int(p)] if isinstance(node, list) else node[p]
    return node


def set_at(doc, pointer, value):
    parts = pointer_parts(pointer)
    parent = walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            parent[int(last)] = value
    else:
        parent[last] = value


def remove_at(doc, pointer):
    parts = pointer_parts(pointer)
    parent = walk(doc, parts[:-1])
    if isinstance(parent, list):
        del parent[int(parts[-1])]
    else:
        del parent[parts[-1]]


def file_text(spec, bases, places):
    if "text" in spec:
        return substitute(spec["text"], places)
    if "json" in spec:
        return substitute(json.dumps(spec["json"], indent=1) + "\n", places)
    source = spec["from"]
    if source in bases:
        doc = copy.deepcopy(bases[source])
    else:
        with open(substitute(source, places), encoding="utf-8") as f:
            doc = json.load(f)
    for pointer in spec.get("remove", []):
        remove_at(doc, pointer)
    for pointer, value in spec.get("set", {}).items():
        set_at(doc, pointer, value)
    raw = {}
    for i, (pointer, text) in enumerate(spec.get("raw", {}).items()):
        token = "@RAW%d@" % i
        set_at(doc, pointer, token)
        raw['"' + token + '"'] = text
    return substitute(substitute(json.dumps(doc, indent=1) + "\n", raw), places)


def run_case(case, bases, roofsim, source, work):
    folder = os.path.join(work, re.sub(r"[^A-Za-z0-9_.-]", "_", case["id"]))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    places = {"@SRC@": source, "@DATA@": os.path.join(source, "data"),
              "@TESTDATA@": os.path.join(source, "tests", "data"), "@TMP@": folder}
    files = dict(case.get("files", {}))
    if "file" in case:
        name = case.get("file_name", "case.json")
        files[name] = case["file"]
        places["@FILE@"] = os.path.join(folder, name)
    for name, spec in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(file_text(spec, bases, places))
    argv = [roofsim] + [substitute(a, places) for a in case["args"]]
    if "stdout" in case:
        with open(case["stdout"], "w") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, timeout=300, cwd=folder)
        stdout = ""
    else:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300, cwd=folder)
        stdout = done.stdout.decode("utf-8", "replace")
    return done.returncode, stdout, done.stderr.decode("utf-8", "replace"), folder


def check_case(case, code, stdout, stderr):
    """The faults of one case's run: empty where it did what the catalogue says."""
    faults = []
    if code != case["exit"]:
        faults.append("exit code %d, expected %d" % (code, case["exit"]))
    if not re.search(case["stderr"], stderr, re.S):
        faults.append("stderr does not match %r" % case["stderr"])
    if "not_stderr" in case and re.search(case["not_stderr"], stderr, re.S):
        faults.append("stderr matches %r but must not" % case["not_stderr"])
    if "stdout" not in case and stdout:
        faults.append("an error printed on standard output")
    if CRASH.search(stderr):
        faults.append("a crash or an uncaught exception")
    return faults


def check_catalogue(catalogue):
    """The catalogue's own rules: unique ids, an error exit code and a message for every case."""
    faults, seen = [], set()
    for case in catalogue["cases"]:
        cid = case.get("id", "?")
        if cid in seen:
            faults.append("%s: id used twice" % cid)
        seen.add(cid)
        for key in ("args", "exit", "stderr"):
            if key not in case:
                faults.append("%s: no %s" % (cid, key))
        if case.get("exit") not in EXITS:
            faults.append("%s: exit must be 1 (bad input) or 2 (usage)" % cid)
        if not case.get("stderr", "").strip():
            faults.append("%s: an empty stderr pattern matches anything" % cid)
        try:
            re.compile(case.get("stderr", ""))
        except re.error as e:
            faults.append("%s: stderr is no regular expression: %s" % (cid, e))
    return faults


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roofsim", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--catalogue", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalogue.json"))
    parser.add_argument("--work")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="cases run at once")
    parser.add_argument("--least", type=int, default=150, help="the fewest cases the catalogue may hold")
    args = parser.parse_args()
    with open(args.catalogue, encoding="utf-8") as f:
        catalogue = json.load(f)
    faults = check_catalogue(catalogue)
    if len(catalogue["cases"]) < args.least:
        faults.append("the catalogue holds %d cases, fewer than %d" % (len(catalogue["cases"]), args.least))
    for fault in faults:
        print("FAIL: catalogue: " + fault)
    work = args.work or tempfile.mkdtemp(prefix="roofsim-bad-inputs-")
    os.makedirs(work, exist_ok=True)
    source = os.path.abspath(args.source)
    roofsim = os.path.abspath(args.roofsim)
    failed = []
    chosen = [c for c in catalogue["cases"] if not args.only or c["id"] in args.only]

    def attempt(case):
        try:
            return run_case(case, catalogue.get("bases", {}), roofsim, source, work), None
        except (OSError, ValueError, KeyError, IndexError, subprocess.TimeoutExpired) as e:
            return None, e

    runnable = [c for c in chosen if "stdout" not in c or os.path.exists(c["stdout"])]
    for case in chosen:
        if case not in runnable:
            print("skipped: %s: no %s here" % (case["id"], case["stdout"]))
    # the cases in parallel (each its own process and folder), reported in catalogue order
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(attempt, runnable))
    for case, (result, error) in zip(runnable, outcomes):
        if error is not None:
            print("FAIL: %s: could not run: %r" % (case["id"], error))
            failed.append(case["id"])
            continue
        code, stdout, stderr, folder = result
        if args.record:
            print("%s: exit %d\n  stderr: %s\n  stdout: %s" % (case["id"], code, stderr.strip().replace("\n", "\n          "),
                                                                stdout.strip()[:300].replace("\n", "\n          ")))
            continue
        case_faults = check_case(case, code, stdout, stderr)
        if case_faults:
            failed.append(case["id"])
            print("FAIL: %s: %s\n  command: %s\n  stderr: %s%s" % (
                case["id"], "; ".join(case_faults), " ".join(case["args"]), stderr.strip(),
                ("\n  stdout: " + stdout.strip()[:500]) if stdout else ""))
        else:
            shutil.rmtree(folder, ignore_errors=True)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    ran = len(runnable)
    print("%d cases, %d failed%s" % (ran, len(failed), (": " + ", ".join(failed)) if failed else ""))
    return 1 if failed or faults else 0


if __name__ == "__main__":
    sys.exit(main())
