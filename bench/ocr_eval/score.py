#!/usr/bin/python3
"""score.py - scores `frugal ocr` JSON outputs against gen_invoices.py ground truth.

usage: score.py --truth DIR --out DIR --engine NAME --seconds S --cores C
Per language: all-fields-correct rate (invoice number, date, amount, currency, payee all right),
per-field accuracy, character accuracy (1 - CER of the OCR text against the drawn text, both
without whitespace: tesseract puts spaces between CJK characters), pages/s per core: from the
whole `frugal ocr` processes (start-up and model loading included) and from the reader's own
time (the output's "ocr_ms").
Field comparison uses the forms of src/stages/ocr/fields.h (fr_fields_norm_*): invoice number
upper-case without spaces; payee lower-case letters, digits and non-ASCII characters without
CJK/fullwidth punctuation; amount, date and currency exactly.
"""
import argparse
import glob
import json
import os
import re

FIELDS = ["invoice_no", "date", "amount", "currency", "payee"]


def norm_id(s):
    return re.sub(r"\s", "", s).upper()


def norm_payee(s):
    out = []
    for ch in s:
        o = ord(ch)
        if o >= 0x80:
            if 0xFF00 <= o <= 0xFFEF or 0x3000 <= o <= 0x303F:
                continue
            out.append(ch)
        elif ch.isalnum():
            out.append(ch.lower())
    return "".join(out)


def norm(field, v):
    if field == "invoice_no":
        return norm_id(v)
    if field == "payee":
        return norm_payee(v)
    return v


def levenshtein(a, b):
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--truth", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--misses", action="store_true", help="print every wrong field")
    a = ap.parse_args()
    stats = {}
    n_pages = 0
    ocr_ms = 0.0  # the reader's own time per page (frugal ocr's "ocr_ms"), without start-up
    for tj in sorted(glob.glob(os.path.join(a.truth, "*.json"))):
        t = json.load(open(tj, encoding="utf-8"))
        name = os.path.splitext(os.path.basename(tj))[0]
        st = stats.setdefault(t["lang"], dict(n=0, all=0, f={k: 0 for k in FIELDS}, edits=0, chars=0,
                                               failed=0))
        st["n"] += 1
        n_pages += 1
        op = os.path.join(a.out, name + ".out.json")
        got, text = {}, ""
        try:
            o = json.load(open(op, encoding="utf-8"))
            got = o.get("fields") or {}
            text = (o.get("ocr") or {}).get("text") or ""
            ocr_ms += float(o.get("ocr_ms") or 0)
        except (OSError, ValueError):
            st["failed"] += 1  # a page the reader did not return counts as all wrong
        ok_all = True
        for k in FIELDS:
            ok = norm(k, got.get(k, "")) == norm(k, t[k]) and t[k] != ""
            st["f"][k] += ok
            ok_all &= ok
            if not ok and a.misses:
                print(f"  {name} {k}: got {got.get(k, '')!r} want {t[k]!r}")
        st["all"] += ok_all
        ref = re.sub(r"\s", "", t["text"])
        hyp = re.sub(r"\s", "", text)
        st["edits"] += min(levenshtein(ref, hyp), len(ref))
        st["chars"] += len(ref)
    pps = n_pages / a.seconds / a.cores if a.seconds > 0 else 0.0
    print(f"engine {a.engine}: {n_pages} pages in {a.seconds:.1f} s on {a.cores} core(s) = "
          f"{pps:.3f} pages/s per core (whole processes); OCR alone {ocr_ms / 1e3:.1f} s = "
          f"{n_pages / (ocr_ms / 1e3) / a.cores if ocr_ms > 0 else 0:.3f} pages/s per core")
    print(f"{'lang':5} {'pages':>5} {'all':>7} " + " ".join(f"{k:>10}" for k in FIELDS) + f" {'char acc':>9}")
    for lang, st in sorted(stats.items()):
        n = st["n"]
        pct = lambda v: f"{100.0 * v / n:6.1f}%"
        print(f"{lang:5} {n:5d} {pct(st['all']):>7} " +
              " ".join(f"{pct(st['f'][k]):>10}" for k in FIELDS) +
              f" {100.0 * (1 - st['edits'] / max(1, st['chars'])):8.1f}%" +
              (f"  ({st['failed']} pages failed)" if st["failed"] else ""))


if __name__ == "__main__":
    main()
