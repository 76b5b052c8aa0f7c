#!/usr/bin/env python3
"""prefix_chat.py — multi-turn chat through `frugal serve`: TTFT per turn as the client sees it,
with the prefix cache on and off (--no-prefix-cache), and usage.prompt_tokens_details.cached_tokens.

    python3 bench/prefix_chat.py --model PATH [--bin build/frugal] [--convs 4] [--turns 6]
                                 [--reply 32] [--serve "OPTS"]

`convs` conversations share one system prompt; turn t sends the system prompt, the conversation
so far (user messages and the assistant's replies as text: the server renders the chat template
and tokenizes again) and a new user message, streaming with include_usage, greedy, ignore_eos,
`reply` tokens. Turns are interleaved, one request in flight. TTFT = request sent to the first
chunk carrying a token (return_token_ids, so a token without text counts). The same
conversation runs on a server with the cache, then on one without; the replies must be equal.
Prints a Markdown table (median TTFT per turn over the conversations) and the totals.
Standard library only.
"""
import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import time

SYSTEM = (
    "You are the customer service assistant of a retail bank. Answer in two or three short "
    "sentences, politely and without jargon. Never ask for a full card number, a PIN, a password "
    "or a one-time code. If the customer reports a lost or stolen card, say that the card is "
    "blocked now and that a new one arrives within five working days. If the customer reports a "
    "payment they do not recognise, open a dispute and say that the money is returned within ten "
    "working days while it is examined. For questions about loans, mortgages or investments, "
    "offer a call back from an adviser during opening hours, Monday to Friday from nine to six. "
    "For a change of address, explain that it can be done in the app under profile and settings. "
    "Fees: a transfer inside the country is free, a transfer abroad costs five euros, a card "
    "replacement is free once a year. Close every answer by asking whether there is anything else."
)
QUESTIONS = [
    "My card was declined at the supermarket this morning, what happened?",
    "I do not recognise a payment of 42 euros from yesterday evening.",
    "How long does a transfer to Spain take and what does it cost?",
    "Can I change my address without going to a branch?",
    "I lost my wallet with my card in it on the train.",
    "When will the new card arrive and will it have the same number?",
    "Could someone call me about a mortgage next week?",
    "Is the card replacement free if it is the second one this year?",
]


def start(binary, model, extra):
    cmd = [binary, "serve", "--model", model, "--port", "0", "--ledger", ""] + extra
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    m = re.match(r"listening on http://[^:]*:(\d+)", line)
    if not m:
        p.kill()
        sys.exit("server did not start: " + line)
    return p, int(m.group(1))


def turn(port, messages, reply):
    body = json.dumps({"messages": messages, "max_tokens": reply, "temperature": 0,
                       "ignore_eos": True, "return_token_ids": True, "stream": True,
                       "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.monotonic()
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit("HTTP %d: %s" % (r.status, r.read()[:300]))
    ttft, text, usage = None, [], None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices", []):
            if ttft is None and ch.get("token_ids"):
                ttft = time.monotonic() - t0
            text.append(ch.get("delta", {}).get("content") or "")
    c.close()
    return ttft, "".join(text), usage


def run(args, cache):
    extra = args.serve.split() + ([] if cache else ["--no-prefix-cache"])
    p, port = start(args.bin, args.model, extra)
    hist = [[{"role": "system", "content": SYSTEM}] for _ in range(args.convs)]
    res = [[None] * args.convs for _ in range(args.turns)]
    try:
        for t in range(args.turns):
            for c in range(args.convs):
                q = QUESTIONS[(t + c) % len(QUESTIONS)] + " (customer %d)" % (c + 1)
                hist[c].append({"role": "user", "content": q})
                ttft, text, usage = turn(port, hist[c], args.reply)
                hist[c].append({"role": "assistant", "content": text})
                res[t][c] = (ttft, usage["prompt_tokens"],
                             usage["prompt_tokens_details"]["cached_tokens"], text)
            print("  cache %s: turn %d done" % ("on" if cache else "off", t + 1), file=sys.stderr)
    finally:
        p.terminate()
        p.wait()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", default="build/frugal")
    ap.add_argument("--convs", type=int, default=4)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--reply", type=int, default=32)
    ap.add_argument("--serve", default="", help="more `frugal serve` options")
    args = ap.parse_args()
    on = run(args, True)
    off = run(args, False)
    same = all(on[t][c][3] == off[t][c][3] for t in range(args.turns) for c in range(args.convs))
    print("replies identical with and without the cache: %s\n" % ("yes" if same else "NO"))
    print("| turn | prompt tokens (mean) | cached tokens (mean, on) | TTFT off s (median) | "
          "TTFT on s (median) | off / on |\n|---|---|---|---|---|---|")
    tot_on = tot_off = 0.0
    for t in range(args.turns):
        a = [off[t][c][0] for c in range(args.convs)]
        b = [on[t][c][0] for c in range(args.convs)]
        tot_off += sum(a)
        tot_on += sum(b)
        np_ = statistics.mean(on[t][c][1] for c in range(args.convs))
        nc = statistics.mean(on[t][c][2] for c in range(args.convs))
        ma, mb = statistics.median(a), statistics.median(b)
        print("| %d | %.0f | %.0f | %.3f | %.3f | %.1fx |" % (t + 1, np_, nc, ma, mb, ma / mb))
    print("\nsum of TTFT over all %d requests: off %.2f s, on %.2f s"
          % (args.turns * args.convs, tot_off, tot_on))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
