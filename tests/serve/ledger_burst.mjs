// ledger_burst.mjs — the client half of tests/cli_ledger.sh's kill -9 check: fires a burst of
// concurrent generation requests (half non-streaming, half SSE streams, chat and completions),
// each with its own W3C traceparent, and SIGKILLs the server once KILL_AFTER of them have been
// answered. Writes one line per answered request to OUT: "TRACE_ID KIND" (a non-streaming 200
// with its full JSON body, or a stream that reached its final chunk and `data: [DONE]`), and prints
// a summary line. The shell then checks every one of them has its ledger row.
// Env: FRUGAL_URL, FRUGAL_PID, N (requests), KILL_AFTER (answers before the kill), OUT (file).
// Plain Node (>= 18), no dependencies.
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';

const url = new URL(process.env.FRUGAL_URL);
const pid = Number(process.env.FRUGAL_PID);
const N = Number(process.env.N || 200);
const KILL_AFTER = Number(process.env.KILL_AFTER || 50);
const out = process.env.OUT;

let answered = [];
let killed = false;
const statuses = {};
let mismatched = 0;

function maybeKill() {
  if (!killed && answered.length >= KILL_AFTER) {
    killed = true;
    process.kill(pid, 'SIGKILL');
  }
}

function one(i) {
  return new Promise((resolve) => {
    const trace = crypto.randomBytes(16).toString('hex');
    const span = crypto.randomBytes(8).toString('hex');
    const streaming = i % 2 === 1;
    const chat = i % 4 < 2;
    const body = chat
      ? { messages: [{ role: 'user', content: `request ${i}: say something` }], max_tokens: 8 }
      : { prompt: `request ${i}: once upon a time`, max_tokens: 8 };
    if (streaming) body.stream = true;
    const data = JSON.stringify(body);
    const req = http.request({
      host: url.hostname, port: url.port, method: 'POST',
      path: chat ? '/v1/chat/completions' : '/v1/completions',
      agent: false,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data),
                 traceparent: `00-${trace}-${span}-01`, Connection: 'close' },
    }, (res) => {
      statuses[res.statusCode] = (statuses[res.statusCode] || 0) + 1;
      const tp = res.headers.traceparent || '';
      if (res.statusCode === 200 && tp.split('-')[1] !== trace) mismatched++;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        let ok = false;
        if (res.statusCode === 200) {
          if (streaming) {
            ok = /\ndata: \[DONE\]\n/.test('\n' + text) && !/"error"/.test(text);
          } else {
            try { ok = Array.isArray(JSON.parse(text).choices); } catch { ok = false; }
          }
        }
        if (ok) {
          answered.push(`${trace} ${streaming ? 'stream' : 'json'}`);
          maybeKill();
        }
        resolve();
      });
      res.on('error', () => resolve());
      res.on('aborted', () => resolve());
    });
    req.on('error', () => resolve());
    req.setTimeout(60000, () => { req.destroy(); });
    req.end(data);
  });
}

const all = [];
for (let i = 0; i < N; i++) all.push(one(i));
await Promise.all(all);
if (!killed) { killed = true; try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
fs.writeFileSync(out, answered.join('\n') + (answered.length ? '\n' : ''));
console.log(`answered ${answered.length} of ${N}; statuses ${JSON.stringify(statuses)}; ` +
            `traceparent mismatches ${mismatched}`);
