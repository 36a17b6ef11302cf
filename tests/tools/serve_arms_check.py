#!/usr/bin/env python3
"""Each arm of a serve-gate receipt ran the lane mix its name says (the gates compare arms, so
an arm that quietly ran another config turns a gate into a comparison of equal things):

  solo, windows*       every lane a window (pool off): no page taken, no round mixes kinds
  pages-all-*          every lane on pages: pages taken, no round mixes window and paged lanes
  concurrent-*         window and paged lanes side by side: some round mixes them

and each queued its prompts in the order its name says (admission_order, the prompts in the
order the engine gave them a lane: a permutation of them all): concurrent-reverse* and
resumed* queue the last prompt first, so it takes a lane before the first prompt does; every
other arm takes the first prompt before the last.

A drafted arm's draft numbers follow from its counts: tokens_per_verify is (accepted + verifies) /
verifies (each verify emits the tokens it accepted and one of its own) and acceptance_rate is
accepted / draft_positions (mutation sweep round 19: accepted / verifies passed).

Usage: serve_arms_check.py RECEIPT. Exit 0 when every arm holds, 1 naming each that does not.
"""
import json
import sys


def main():
    with open(sys.argv[1]) as f:
        r = json.load(f)
    bad, seen = [], set()
    for a in r["arms"]:
        name, pages, mixed = a["arm"], a["pages_taken"], a["rounds_mixing_window_and_paged_lanes"]
        at = f"{name} ({a['format']})"
        if name == "solo" or name.startswith("windows"):
            seen.add("windows" if name != "solo" else "solo")
            if pages != 0 or mixed != 0:
                bad.append(f"{at}: a windows-only arm took {pages} pages, {mixed} rounds mixed lane kinds")
        elif name.startswith("pages-all-"):
            seen.add("pages-all")
            if pages <= 0 or mixed != 0:
                bad.append(f"{at}: a pages-only arm took {pages} pages, {mixed} rounds mixed lane kinds")
        elif name.startswith("concurrent-"):
            seen.add("concurrent")
            if mixed <= 0:
                bad.append(f"{at}: no round mixed window and paged lanes")
        dr = a.get("draft")
        if dr is not None:
            seen.add("drafted")
            v, acc, pos = dr["verifies"], dr["accepted"], dr["draft_positions"]
            tpv, rate = (acc + v) / v if v else 0.0, acc / pos if pos else 0.0
            if abs(dr["tokens_per_verify"] - tpv) > 1e-9 * max(1.0, tpv) or abs(dr["acceptance_rate"] - rate) > 1e-9:
                bad.append(f"{at}: tokens_per_verify {dr['tokens_per_verify']}, acceptance_rate {dr['acceptance_rate']}; "
                           f"{acc} accepted, {v} verifies, {pos} draft positions give {tpv} and {rate}")
        order = a.get("admission_order")
        np_ = len(a["tokens"])
        if order is None or sorted(order) != list(range(np_)):
            bad.append(f"{at}: admission_order {order} is not a permutation of its {np_} prompts")
        elif np_ >= 2:
            reverse = name.startswith("concurrent-reverse") or name.startswith("resumed")
            if reverse:
                seen.add("reverse")
            last_first = order.index(np_ - 1) < order.index(0)
            if last_first != reverse:
                bad.append(f"{at}: admission_order {order}: the {'last' if not reverse else 'first'} prompt took a "
                           f"lane first, but the arm queues them {'in reverse' if reverse else 'forward'}")
    for kind in ("solo", "windows", "concurrent", "reverse", "drafted"):
        if kind not in seen:
            bad.append(f"no {kind} arm in the receipt")
    for b in bad:
        print("serve_arms_check: " + b)
    print(f"serve_arms_check: {len(r['arms'])} arms, {len(bad)} wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
