"""Validates the shipped JSON files against the project's JSON Schemas (docs/*.schema.json), and
checks that each schema still refuses what it must refuse.

Usage: python3 tests/schemas/check_schemas.py REPOSITORY_ROOT
"""
import glob
import json
import os
import sys

import jsonschema


def load(path):
    with open(path) as f:
        return json.load(f)


def main(root):
    failures = []
    schema = load(os.path.join(root, "docs", "graph.schema.json"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    graphs = sorted(glob.glob(os.path.join(root, "data", "models", "*.json")))
    graphs += [os.path.join(root, "tests", "data", name) for name in ("graph-bad-shape.json",)]
    if not graphs:
        failures.append("no graph files found")
    for path in graphs:
        for error in validator.iter_errors(load(path)):
            failures.append(f"{os.path.relpath(path, root)}: {'/'.join(map(str, error.absolute_path))}: {error.message}")
    # what the schema must refuse: an op lowering does not know, a shape of zero, a missing key
    must_refuse = {
        "tests/data/graph-unknown-op.json": load(os.path.join(root, "tests", "data", "graph-unknown-op.json")),
        "a zero dimension": {"schema_version": 1, "kind": "roofsim-layer-graph", "name": "g",
                             "inputs": [{"name": "x", "shape": ["batch", 0]}],
                             "layers": [{"name": "a", "op": "relu", "inputs": ["x"]}]},
        "no layers key": {"schema_version": 1, "kind": "roofsim-layer-graph", "name": "g", "inputs": []},
    }
    for what, document in must_refuse.items():
        if validator.is_valid(document):
            failures.append(f"the graph schema accepts {what}")
    for line in failures:
        print("FAIL:", line)
    print(f"{len(graphs) + len(must_refuse) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
