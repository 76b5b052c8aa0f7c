// lib.mjs — helpers shared by the client tests of `frugal serve`: a tiny reporter (one
// "ok NAME" / "FAIL NAME: why" line per check, read by tests/cli_serve.sh), an SSE reader over
// fetch, raw-socket helpers and a /metrics scraper. Plain Node (>= 18), no dependencies.
import net from 'node:net';

export const BASE = process.env.FRUGAL_URL || 'http://127.0.0.1:8080';
export const MODEL = process.env.FRUGAL_MODEL || 'qwen2-tiny';

let failures = 0;
export function check(name, cond, detail = '') {
  if (cond) console.log(`ok ${name}`);
  else { failures++; console.log(`FAIL ${name}${detail ? ': ' + detail : ''}`); }
  return cond;
}
export function done() { process.exit(failures ? 1 : 0); }
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function post(path, body, headers = {}) {
  const t0 = performance.now();
  const res = await fetch(BASE + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, json, ms: performance.now() - t0 };
}

// Streams a request; returns {status, headers, events: [parsed data], done, ttftMs, text, error}.
// TTFT = time to the first chunk that carries generated text.
export async function stream(path, body, headers = {}, opts = {}) {
  const t0 = performance.now();
  const res = await fetch(BASE + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify({ ...body, stream: true }),
    signal: opts.signal,
  });
  const out = { status: res.status, headers: res.headers, events: [], done: false, ttftMs: null,
                text: '', error: null, json: null };
  if (res.status !== 200) {
    out.text = await res.text();
    try { out.json = JSON.parse(out.text); } catch { /* ignore */ }
    return out;
  }
  const dec = new TextDecoder();
  let buf = '';
  for await (const chunk of res.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of ev.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') { out.done = true; continue; }
        const j = JSON.parse(data);
        out.events.push(j);
        if (j.error) { out.error = j.error; continue; }
        const c = j.choices && j.choices[0];
        const piece = c ? (c.delta ? c.delta.content : c.text) : null;
        if (piece) {
          if (out.ttftMs === null) out.ttftMs = performance.now() - t0;
          out.text += piece;
        }
        if (opts.onEvent && opts.onEvent(j, out) === false) return out;
      }
    }
  }
  return out;
}

export async function metrics() {
  const res = await fetch(BASE + '/metrics', { headers: metricsHeaders });
  return res.text();
}
export let metricsHeaders = {};
export function setMetricsHeaders(h) { metricsHeaders = h; }

// Sum of the samples of `name` whose labels include every pair in `labels`.
export function metric(text, name, labels = {}) {
  let sum = 0, found = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$/);
    if (!m || m[1] !== name) continue;
    const ls = {};
    for (const kv of (m[3] || '').split(',').filter(Boolean)) {
      const [k, v] = kv.split('=');
      ls[k] = v.replace(/^"|"$/g, '');
    }
    if (Object.entries(labels).every(([k, v]) => ls[k] === v)) { sum += Number(m[4]); found = true; }
  }
  return found ? sum : NaN;
}

// A raw TCP connection to the server (for slow, partial and vanishing clients).
export function rawConnect() {
  const u = new URL(BASE);
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(u.port), u.hostname, () => resolve(s));
    s.on('error', reject);
  });
}

// Resolves with {closedMs, data} when the server closes the socket (or after limitMs).
export function waitClose(sock, limitMs) {
  const t0 = performance.now();
  let data = '';
  sock.on('data', (d) => { data += d.toString(); });
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ closedMs: null, data }), limitMs);
    sock.on('close', () => { clearTimeout(timer); resolve({ closedMs: performance.now() - t0, data }); });
  });
}

export function chat(content, extra = {}) {
  return { model: MODEL, messages: [{ role: 'user', content }], temperature: 0, ...extra };
}

export function percentile(xs, p) {
  const a = [...xs].sort((x, y) => x - y);
  if (!a.length) return NaN;
  return a[Math.min(a.length - 1, Math.floor((p / 100) * a.length))];
}
