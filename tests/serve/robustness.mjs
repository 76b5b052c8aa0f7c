// robustness.mjs — clients that misbehave. Usage: node robustness.mjs disconnect|slow|connlimit
//   disconnect: a client that drops a stream mid-way (and one that drops a non-streaming request)
//               gets its generation cancelled and its KV blocks freed at the next step, as
//               /metrics shows; the server keeps serving.
//   slow:       (server with idle_timeout_s 1, body_timeout_s 1.5) a stalled body, a slow-drip
//               body and stalled headers are cut off by the timeouts; the server keeps serving.
//   connlimit:  (server with max_connections 4) connections over their tier's share get a
//               clear 503 + Retry-After; /health keeps its reserved slot.
import { BASE, chat, check, done, metric, metrics, post, rawConnect, sleep, stream, waitClose }
  from './lib.mjs';

const mode = process.argv[2];

async function healthy(name) {
  const r = await post('/v1/completions', { prompt: 'Hello', max_tokens: 2, temperature: 0 });
  check(`${name}: server keeps serving`, r.status === 200, r.text);
}

async function waitMetric(pred, limitMs = 3000) {
  const t0 = performance.now();
  let m = await metrics();
  while (!pred(m) && performance.now() - t0 < limitMs) { await sleep(20); m = await metrics(); }
  return m;
}

if (mode === 'disconnect') {
  const m0 = await metrics();
  const c0 = metric(m0, 'frugal_requests_cancelled_total', { reason: 'client_disconnect' });
  // streaming: read a few chunks, look at /metrics while it runs, then drop the connection
  const ac = new AbortController();
  const body = chat('Tell me a long story about a bank.', { max_tokens: 400, ignore_eos: true,
                                                            stream: true });
  const res = await fetch(BASE + '/v1/chat/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    signal: ac.signal });
  const reader = res.body.getReader();
  let seen = '';
  while ((seen.match(/"content"/g) || []).length < 4) {
    const { value, done: end } = await reader.read();
    if (end) break;
    seen += new TextDecoder().decode(value);
  }
  const blocksWhileRunning = metric(await metrics(), 'frugal_kv_blocks_used');
  ac.abort();
  try { await reader.read(); } catch { /* aborted */ }
  check('disconnect: request held KV blocks while streaming', blocksWhileRunning > 0,
        String(blocksWhileRunning));
  let m = await waitMetric((t) => metric(t, 'frugal_requests_cancelled_total',
                                         { reason: 'client_disconnect' }) >= c0 + 1 &&
                                  metric(t, 'frugal_kv_blocks_used') === 0);
  check('disconnect mid-stream: cancelled counter +1',
        metric(m, 'frugal_requests_cancelled_total', { reason: 'client_disconnect' }) === c0 + 1);
  check('disconnect mid-stream: KV blocks freed', metric(m, 'frugal_kv_blocks_used') === 0);
  check('disconnect mid-stream: nothing running', metric(m, 'frugal_requests_running') === 0);
  check('disconnect mid-stream: requests_total counts a 499',
        metric(m, 'frugal_requests_total', { endpoint: '/v1/chat/completions', status: '499' }) >= 1);

  // non-streaming: send the request on a raw socket and hang up while it runs
  const s = await rawConnect();
  const payload = JSON.stringify(chat('Tell me another long story.', { max_tokens: 400, ignore_eos: true }));
  s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`);
  await waitMetric((t) => metric(t, 'frugal_requests_running') >= 1, 5000); /* it is generating */
  s.destroy();
  m = await waitMetric((t) => metric(t, 'frugal_requests_cancelled_total',
                                     { reason: 'client_disconnect' }) >= c0 + 2 &&
                              metric(t, 'frugal_kv_blocks_used') === 0);
  check('disconnect non-streaming: cancelled counter +1',
        metric(m, 'frugal_requests_cancelled_total', { reason: 'client_disconnect' }) === c0 + 2);
  check('disconnect non-streaming: KV blocks freed', metric(m, 'frugal_kv_blocks_used') === 0);
  await healthy('disconnect');
} else if (mode === 'slow') {
  // the three slow clients run at the same time (each takes about a timeout)
  const stalledBody = (async () => {
    // body stalls after 10 of 100 bytes: closed by the idle timeout (1 s)
    const s = await rawConnect();
    s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"prompt":');
    const r = await waitClose(s, 6000);
    check('stalled body: connection closed by the idle timeout', r.closedMs !== null &&
          r.closedMs >= 700 && r.closedMs < 5000, String(r.closedMs));
  })();
  const stalledHeaders = (async () => {
    const s = await rawConnect();
    s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le');
    const r = await waitClose(s, 6000);
    check('stalled headers: answered 408 and closed by the head timeout (1 s)',
          r.closedMs !== null && r.closedMs >= 700 && r.closedMs < 5000 &&
          r.data.startsWith('HTTP/1.1 408'), `${r.closedMs} ms: ${r.data.slice(0, 40)}`);
  })();
  const drip = (async () => {
    // body drips one byte every 150 ms (never idle long enough): cut by the body timeout (1.5 s)
    const s = await rawConnect();
    const payload = JSON.stringify({ prompt: 'x'.repeat(200), max_tokens: 1 });
    s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${payload.length}\r\n\r\n`);
    let i = 0, stopped = false;
    s.on('close', () => { stopped = true; });
    s.on('error', () => { stopped = true; });
    const sender = (async () => {
      while (!stopped && i < payload.length) { s.write(payload[i++]); await sleep(150); }
    })();
    const r = await waitClose(s, 8000);
    stopped = true;
    await sender;
    check('slow-drip body: cut off by the body timeout while still sending',
          r.closedMs !== null && r.closedMs >= 1200 && r.closedMs < 6000 && i < payload.length,
          `closed after ${r.closedMs} ms, ${i}/${payload.length} bytes sent`);
  })();
  await Promise.all([stalledBody, stalledHeaders, drip]);
  await healthy('slow clients');
} else if (mode === 'connlimit') {
  // (server with max_connections 4: P1 may hold 2 slots, P0 3, the control endpoints 4)
  // two P1 requests whose bodies never come hold the P1 share; the next P1 request gets a clear
  // 503 + Retry-After at once (never a silent close); /health still has its reserved slot
  const socks = [];
  for (let k = 0; k < 2; k++) {
    const s = await rawConnect();
    s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{');
    socks.push(s);
  }
  await sleep(100);
  const r = await post('/v1/completions', { prompt: 'Hello', max_tokens: 2 });
  check('connection limit: 503 too_many_connections with Retry-After', r.status === 503 &&
        r.json && r.json.error.code === 'too_many_connections' && r.headers.get('retry-after'),
        `${r.status} ${r.text}`);
  const h = await fetch(BASE + '/health');
  check('connection limit: /health keeps its reserved slot', h.status === 200, String(h.status));
  for (const s of socks) s.destroy();
  await sleep(300);
  await healthy('connection limit');
} else {
  console.log('usage: node robustness.mjs disconnect|slow|connlimit');
  process.exit(2);
}
done();
