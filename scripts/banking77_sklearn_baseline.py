#!/usr/bin/env python3
"""Reference figures for bench/RESULTS.md: scikit-learn linear models over TF-IDF word 1-2-grams
and char_wb 2-5-grams on the same stratified validation splits that `frugal train-intent` carves
(src/stages/nlu/intent_train.c: per label, rows sorted by splitmix64(seed * 0x100000001b3 ^ row),
the first round(n * frac) go to validation). Needs scikit-learn (Debian: python3-sklearn); not
used by the build or the tests.

    python3 scripts/banking77_sklearn_baseline.py data/banking77/train.csv --seeds 1 2 3 4 5
"""
import argparse
import csv

M = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def split(labels, frac, seed):
    by = {}
    for i, c in enumerate(labels):
        by.setdefault(c, []).append(i)
    val = set()
    for idx in by.values():
        idx = sorted(idx, key=lambda i: (splitmix64(((seed * 0x100000001B3) & M) ^ i), i))
        k = int(len(idx) * frac + 0.5)
        k = min(k, len(idx) - 1)
        val.update(idx[:k])
    return val


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--val-frac", type=float, default=0.1)
    ap.add_argument("--C", type=float, nargs="+", default=[100.0])
    ap.add_argument("--svc", action="store_true", help="also LinearSVC(C=1)")
    a = ap.parse_args()
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_union
    from sklearn.svm import LinearSVC

    rows = [(r["text"], r["category"]) for r in csv.DictReader(open(a.csv, newline=""))]
    for seed in a.seeds:
        val = split([c for _, c in rows], a.val_frac, seed)
        tr = [r for i, r in enumerate(rows) if i not in val]
        va = [r for i, r in enumerate(rows) if i in val]
        vec = make_union(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                         TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True))
        xtr = vec.fit_transform([t for t, _ in tr])
        xva = vec.transform([t for t, _ in va])
        ytr = [c for _, c in tr]
        yva = [c for _, c in va]
        models = [("LogisticRegression C=%g" % c, LogisticRegression(C=c, max_iter=3000)) for c in a.C]
        if a.svc:
            models.append(("LinearSVC C=1", LinearSVC(C=1)))
        for name, clf in models:
            acc = (clf.fit(xtr, ytr).predict(xva) == yva).mean()
            print("seed %d  %-26s %.2f %% of %d validation rows" % (seed, name, 100 * acc, len(va)), flush=True)


if __name__ == "__main__":
    main()
