#!/usr/bin/env python3
"""The input validators against their published schemas, on mutated documents.

    fixture_fuzz.py PROBE SCHEMA_DIR [--receipt-schema FILE] DOC... [--count N] [--seed S] [--show K]

PROBE is tests/tools/fixture_probe (parse_serve_fixture, parse_kv_fixture, Receipt::check and
contracts/json_schema.h as a filter). SCHEMA_DIR holds serve-fixture.schema.json and
kv-fixture.schema.json; a fixture DOC names its schema in "$schema", a receipt DOC carries
"schema": "kernel-contracts/receipt/1" (then --receipt-schema is needed). Every DOC must be
valid and accepted as it is. Then N mutants
per fixture (default 400; seed S, default 1): one to three edits at random places (a field
deleted, a value retyped or set to a schema bound, +-1 or a whole-valued float, an array
emptied or an item repeated, a string emptied or doubled, a field added), each judged by
jsonschema (Draft 2020-12) and by the probe. A defect is:
  - accepted-invalid: the probe accepts a fixture the schema refuses;
  - refused-valid: the probe refuses a schema-valid fixture for a reason that is not one of
    the cross-field rules the schema's description lists (CROSS below);
  - unnamed: a refusal that names no field, or a field that no edit touched nor any cross-field
    rule ties to a touched one (PARTNERS below);
  - exception: the probe threw; or it crashed (fewer answers than questions);
  - json_schema.h disagrees with jsonschema: every document also goes to contracts/json_schema.h
    with its schema, whose verdict must be jsonschema's (both ways).
For receipts, CROSS lists Receipt::check's self-contradictions, and a refusal's field is not
matched against the edits.
A self-check runs first: fabricated answers of each defect kind must be reported, and a
fabricated right answer must not. Exit 0 with no defect, 1 with any (the first K printed,
default 12, each with its edits and a fixture to replay), 77 without python3-jsonschema."""
import copy
import json
import os
import random
import re
import subprocess
import sys


# Refusals of schema-valid fixtures that the schema's description announces (cross-field rules,
# files). Anything else a validator refuses must be refused by the schema too.
CROSS = {
    "serve": [
        r"^field parallel(\[\d+\])?: must be smaller than the number of prompts",
        r"^field context: must hold the longest prompt",
        r"^field pool_pages: must hold the longest prompt",
        r"^field golden\.\w+(\.\w+)?: must be an array of \d+ hashes \(one per prompt\)",
        r"^field draft\.tree: must branch somewhere",
        r"^field draft\.tree: holds .* nodes, at most 64",
        r"^field (model|draft\.model): .* is not a folder( \(.*\))?$",
    ],
    # Receipt::check's self-contradictions (design: "a receipt that contradicts itself"), and its
    # integers written as integer literals (the tools write them so; 3.0 is an edited receipt).
    "receipt": [
        r": gates\[\d+\]\.total: -?\d+ is not passed \+ failed \+ skipped",
        r": gates\[\d+\]\.total: passed \+ failed \+ skipped is above",
        r": gates\[\d+\]\.ok: (true|false) contradicts failed",
        r": gates\[\d+\]\.status: .* contradicts its counts",
        r": gates\[\d+\]\.worst\.ratio: .* contradicts failed = 0",
        r": controls\[\d+\]\.red: true, but ",
        r": controls\[\d+\]\.caught_by: .* is not a gate of this receipt$",
        r": (gates|controls|targets)\[\d+\]\.name: .* appears twice$",
        r": targets\[\d+\]\.met: (true|false) contradicts value",
        r": kv\.depths\[\d+\]\.depth: .* appears twice$",
        r": kv\.depths\[\d+\]\.verdict: .* contradicts",
        r": kv\.recall\[\d+\]\.outcome: .* contradicts",
        r": memory\.arms\[\d+\]\.bytes_in_use: .* is more than arena_bytes",
        r": verdict: 'pass' (contradicts|with|without) ",
        r": gates\[\d+\]\.failures: \d+ entries contradict failed = ",
        r": cases\.every_case: true contradicts cases\.",
        r": expected an integer, got a number$",
    ],
    "kv": [
        r"^field depths\[\d+\]: must be at least depths\[\d+\] \+ rows \+ decode_steps",
        r"^field depths: the deepest depth needs",
        r"^field tokens\.file: .*: cannot be read( \(.*\))?$",
        r"^field tokens\.sha256: .* has sha256 ",
        r"^field recall\[\d+\]\.name: repeats ",
        r"^field recall\[\d+\]\.plant: must (hold \{passphrase\} once|contain)",
        r"^field recall\[\d+\]\.ask: must not contain",
        r"^field recall\[\d+\]\.depths\[\d+\]: (must be at least \d+ \(twice|at most twice the main|deeper than the token)",
        r"^field control_depths\[\d+\]: must (be one of depths|ascend)",
        r"^field model: .* is not a folder( \(.*\))?$",
    ],
}
# A refusal may name a field that a touched field constrains (cross-field rules): touched
# top-level key -> the other top-level keys its rules can name.
PARTNERS = {
    "serve": {
        "prompts": {"parallel", "context", "pool_pages", "golden"},
        "parallel": {"prompts"},
        "new_tokens": {"context", "pool_pages"},
        "draft": {"context"},
        "pages": {"pool_pages"},
        "pages_all": {"pool_pages"},
        "golden": {"prompts"},
    },
    "kv": {
        "rows": {"depths", "recall"},
        "decode_steps": {"depths", "recall"},
        "depths": {"control_depths", "recall"},
        "tokens": {"depths", "recall"},
        "control_depths": {"depths"},
    },
}

NUMBERS = [0, -1, 1, 2, 3, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 0.5, 3.0, -0.0, 1e300]
OTHERS = [None, True, False, "", "x", "bf16", "q4", [], [1], [2, 2], {}, {"a": 1}]


def bounds(schema):
    """Every numeric bound of the schema, with its neighbours."""
    out = set()

    def walk(s):
        if isinstance(s, dict):
            for k, v in s.items():
                if k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems") and \
                        isinstance(v, (int, float)) and not isinstance(v, bool):
                    out.update({v - 1, v, v + 1})
                walk(v)
        elif isinstance(s, list):
            for v in s:
                walk(v)

    walk(schema)
    return sorted(out, key=lambda x: (float(x), str(type(x))))


def property_names(schema):
    out = set()

    def walk(s):
        if isinstance(s, dict):
            for k, v in s.get("properties", {}).items():
                out.add(k)
            for v in s.values():
                walk(v)
        elif isinstance(s, list):
            for v in s:
                walk(v)

    walk(schema)
    return sorted(out)


def all_paths(v, p=()):
    yield p
    if isinstance(v, dict):
        for k in v:
            yield from all_paths(v[k], p + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from all_paths(x, p + (i,))


def get(v, p):
    for k in p:
        v = v[k]
    return v


def pretty(p):
    s = ""
    for k in p:
        s += "[%d]" % k if isinstance(k, int) else ("." if s else "") + str(k)
    return s or "(top)"


def mutate_once(rng, root, nums, names):
    """One edit of root (in place, or a new root); returns (root, path touched, description)."""
    paths = list(all_paths(root))
    p = rng.choice(paths)
    node = get(root, p)
    parent = get(root, p[:-1]) if p else None
    ops = ["set-number", "set-other"]
    if p:
        ops.append("delete")
    if isinstance(node, dict):
        ops += ["add-field", "add-field", "empty"]
    if isinstance(node, list):
        ops += ["empty", "repeat-item", "drop-item"] if node else ["empty"]
    if isinstance(node, str):
        ops += ["string-empty", "string-double", "string-odd"]
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        ops += ["plus-one", "minus-one", "as-float", "negate", "double"] * 2
    op = rng.choice(ops)

    def put(v):
        nonlocal root
        if p:
            parent[p[-1]] = v
        else:
            root = v

    if op == "delete":
        del parent[p[-1]]
    elif op == "set-number":
        put(rng.choice(nums))
    elif op == "set-other":
        put(copy.deepcopy(rng.choice(OTHERS)))
    elif op == "add-field":
        k = rng.choice(names + ["zz_unknown"])
        node[k] = copy.deepcopy(rng.choice(nums + OTHERS))
        return root, p + (k,), "%s: add %s = %s" % (pretty(p), k, json.dumps(node[k]))
    elif op == "empty":
        put(type(node)())
    elif op == "repeat-item":
        node.append(copy.deepcopy(rng.choice(node)))
    elif op == "drop-item":
        node.pop(rng.randrange(len(node)))
    elif op == "string-empty":
        put("")
    elif op == "string-double":
        put(node + node)
    elif op == "string-odd":
        put(rng.choice([node.upper(), node + "#", "{passphrase}" + node + "{passphrase}", node[:-1] + "g", "/nonexistent"]))
    elif op == "plus-one":
        put(node + 1)
    elif op == "minus-one":
        put(node - 1)
    elif op == "as-float":
        put(float(node))
    elif op == "negate":
        put(-node)
    elif op == "double":
        put(node * 2)
    after = get(root, p) if op not in ("delete",) else "(deleted)"
    return root, p, "%s: %s -> %s" % (pretty(p), op, json.dumps(after)[:80])


def field_of(err):
    m = re.match(r"^field (\S+): ", err)
    return m.group(1) if m else None


def top_key(field):
    return re.split(r"[.\[]", field, maxsplit=1)[0]


def judge(kind, schema_ok, schema_why, answer, touched):
    """The defect of one mutant (None when the answer is right)."""
    if "exception" in answer:
        return "exception: " + answer["exception"]
    if answer.get("ok"):
        return None if schema_ok else "accepted-invalid (schema: %s)" % schema_why
    err = answer.get("err", "")
    if schema_ok and not any(re.search(r, err) for r in CROSS[kind]):
        return "refused-valid: " + err
    if kind == "receipt":
        return None
    f = field_of(err)
    if f is None:
        return "unnamed: " + err
    tops = {str(t[0]) for t in touched if t}
    if any(not t for t in touched):
        return None  # the root itself was replaced: any field may be first
    near = set(tops)
    for t in tops:
        near |= PARTNERS[kind].get(t, set())
    if top_key(f) not in near and f != "(top)":
        return "unnamed: names %s, the edits touched %s: %s" % (f, sorted(tops), err)
    return None


def self_check():
    """Each defect kind, fabricated, is reported; right answers are not."""
    cases = [
        ("serve", False, "x", {"ok": True}, [("new_tokens",)], "accepted-invalid"),
        ("serve", True, "", {"ok": False, "err": "field new_tokens: must be an integer"}, [("new_tokens",)], "refused-valid"),
        ("serve", False, "x", {"ok": False, "err": "new_tokens is bad"}, [("new_tokens",)], "unnamed"),
        ("serve", False, "x", {"ok": False, "err": "field pages[0]: must be an integer"}, [("new_tokens",)], "unnamed"),
        ("kv", False, "x", {"exception": "type_error"}, [("rows",)], "exception"),
        ("serve", False, "x", {"ok": False, "err": "field new_tokens: must be in 3..4096"}, [("new_tokens",)], None),
        ("serve", True, "", {"ok": False, "err": "field context: must hold the longest prompt (9 tokens)"},
         [("new_tokens",)], None),
        ("kv", True, "", {"ok": True}, [("rows",)], None),
    ]
    for kind, ok, why, ans, touched, want in cases:
        got = judge(kind, ok, why, ans, touched)
        if (want is None) != (got is None) or (want and not got.startswith(want)):
            print("self-check failed: %s %s -> %s, wanted %s" % (kind, ans, got, want))
            return False
    return True


def parse_args(args, opts):
    """The fuzzers' command lines: --NAME VALUE for each name in opts (an int where its default is
    one), the rest positional. Returns (opts, positional)."""
    opts, rest, args = dict(opts), [], list(args)
    while args:
        a = args.pop(0)
        if a in opts and args:
            v = args.pop(0)
            opts[a] = int(v) if isinstance(opts[a], int) else v
        else:
            rest.append(a)
    return opts, rest


def main():
    try:  # here, not at the top: checkpoint_fuzz.py and cli_fuzz.py import this file without it
        import jsonschema
    except ImportError:
        print("SKIP: the python3 jsonschema module is missing (apt-get install python3-jsonschema)")
        return 77
    opts, rest = parse_args(sys.argv[1:], {"--count": 400, "--seed": 1, "--show": 12, "--receipt-schema": ""})
    if len(rest) < 3:
        print(__doc__)
        return 2
    probe, schema_dir, fixtures = rest[0], rest[1], rest[2:]
    if not self_check():
        return 1
    validators, nums, names = {}, {}, {}
    for kind in ("serve", "kv"):
        s = json.load(open(os.path.join(schema_dir, kind + "-fixture.schema.json")))
        jsonschema.Draft202012Validator.check_schema(s)
        validators[kind] = jsonschema.Draft202012Validator(s)
        nums[kind] = sorted(set(NUMBERS) | set(bounds(s)), key=lambda x: (float(x), str(type(x))))
        names[kind] = property_names(s)
    if opts["--receipt-schema"]:
        s = json.load(open(opts["--receipt-schema"]))
        jsonschema.Draft202012Validator.check_schema(s)
        validators["receipt"] = jsonschema.Draft202012Validator(s)
        nums["receipt"] = sorted(set(NUMBERS) | set(bounds(s)), key=lambda x: (float(x), str(type(x))))
        names["receipt"] = property_names(s)
    rng = random.Random(opts["--seed"])
    items = []  # (kind, dir, fixture, edits, touched, base name)
    for path in fixtures:
        base = json.load(open(path))
        if base.get("schema") == "kernel-contracts/receipt/1":
            kind, d = "receipt", path
        else:
            kind = "serve" if "serve-fixture" in base.get("$schema", "") else "kv"
            d = os.path.dirname(os.path.abspath(path))
        items.append((kind, d, base, [], [], path))
        seen = {json.dumps(base, sort_keys=True)}
        tries = 0
        while len(seen) < opts["--count"] + 1 and tries < 20 * opts["--count"]:
            tries += 1
            root, edits, touched = copy.deepcopy(base), [], []
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                root, p, what = mutate_once(rng, root, nums[kind], names[kind])
                edits.append(what)
                touched.append(p)
            key = json.dumps(root, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            items.append((kind, d, root, edits, touched, path))
    schema_files = {"serve": os.path.join(schema_dir, "serve-fixture.schema.json"),
                    "kv": os.path.join(schema_dir, "kv-fixture.schema.json"), "receipt": opts["--receipt-schema"]}
    # Each document twice: to its validator, and to contracts/json_schema.h with its schema
    # (which must agree with jsonschema exactly, both ways).
    lines = "".join(json.dumps({"kind": k, "dir": d, "fixture": f}) + "\n" +
                    json.dumps({"kind": "schema", "dir": schema_files[k], "fixture": f}) + "\n"
                    for k, d, f, _, _, _ in items)
    run = subprocess.run([probe], input=lines, capture_output=True, text=True)
    both = [json.loads(x) for x in run.stdout.splitlines()]
    answers, ours = both[0::2], both[1::2]
    if len(ours) < len(answers):
        answers = answers[:len(ours)]
    if run.returncode != 0 or len(answers) != len(items):
        print("the probe answered %d of %d (exit %d): %s" % (len(answers), len(items), run.returncode,
                                                           run.stderr.strip()[-400:]))
        if len(answers) < len(items):
            k, d, f, edits, _, path = items[len(answers)]
            print("  first unanswered: %s with %s" % (path, "; ".join(edits) or "no edit"))
        return 1
    tally, defects = {}, []
    for (kind, d, f, edits, touched, path), ans, own in zip(items, answers, ours):
        errors = sorted(validators[kind].iter_errors(f), key=lambda e: list(e.absolute_path))
        schema_ok = not errors
        why = ("at %s: %s" % (pretty(tuple(errors[0].absolute_path)), errors[0].message[:160])) if errors else ""
        if "exception" in own or own.get("ok") != schema_ok:
            defects.append((path, edits or ["(as committed)"], "json_schema.h disagrees with jsonschema: ours %s, "
                            "jsonschema %s" % (own.get("err") or own.get("exception") or "valid", why or "valid"), f))
        if not edits:
            if not (schema_ok and ans.get("ok")):
                defects.append((path, ["(as committed)"], "the fixture itself: schema %s, probe %s" % (why or "valid", ans), f))
            continue
        verdict = judge(kind, schema_ok, why, ans, touched)
        cls = ("valid" if schema_ok else "invalid") + "/" + ("accepted" if ans.get("ok") else "refused")
        tally[(kind, cls)] = tally.get((kind, cls), 0) + 1
        if verdict:
            defects.append((path, edits, verdict, f))
    print("fixture fuzz: %d fixtures, %d mutants (seed %d)" % (len(fixtures), len(items) - len(fixtures), opts["--seed"]))
    for (kind, cls), n in sorted(tally.items()):
        print("  %-5s %-18s %d" % (kind, cls, n))
    for kind in ("serve", "kv", "receipt"):
        # A fuzz whose mutants all fall on one side tests nothing: both verdicts must occur.
        got = {c for (k, c) in tally if k == kind}
        if any(k == kind for k, _, _, _, _, _ in items) and not ({"valid/accepted", "invalid/refused"} <= got):
            defects.append(("(all)", [], "%s: the mutants never reached both verdicts (%s)" % (kind, sorted(got)), None))
    if not defects:
        print("no defect: the validators refuse what the schemas refuse, by field, and accept the rest")
        return 0
    print("%d defects" % len(defects))
    classes = {}
    for path, edits, verdict, f in defects:
        c = re.sub(r"\d+", "N", re.sub(r"(schema at [^:]*):.*", r"\1)", verdict))[:110]
        classes[c] = classes.get(c, 0) + 1
    for c, n in sorted(classes.items(), key=lambda x: -x[1]):
        print("  %4d  %s" % (n, c))
    for path, edits, verdict, f in defects[:opts["--show"]]:
        print("- %s: %s\n    edits: %s" % (path, verdict, "; ".join(edits)))
        if f is not None:
            print("    fixture: %s" % json.dumps(f)[:600])
    return 1


if __name__ == "__main__":
    sys.exit(main())
