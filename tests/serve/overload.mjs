// overload.mjs — flood the server with P2 (batch) streams while P0 (interactive) requests keep
// arriving. Expected (server started with tests/serve/overload.json: 8 running slots, P2 queue
// bound 4, P2 wait limit 300 ms):
//   - P2 requests beyond the queue bound / wait limit get 429 with Retry-After at once;
//   - every P0 request completes, and its time to first token stays within the stated bound
//     relative to the idle server: median <= 4 x idle median + 200 ms, max <= idle max + 1.5 s
//     (P0 preempts P2 for a slot and gets 70% of each step; the slack covers HTTP, client and
//     sanitizer overhead on a 2-core machine shared with the flooding clients);
//   - P2 still makes progress (some P2 requests complete: no starvation).
import { chat, check, done, percentile, sleep, stream } from './lib.mjs';

const FLOOD_MS = Number(process.env.FLOOD_MS || 3000), CLIENTS = Number(process.env.CLIENTS || 32);
const p2body = chat('Summarise the account history of customer number 12345 in detail, with all ' +
                    'card payments, transfers, refunds and fees of the last three months.',
                    { max_tokens: 48, ignore_eos: true });
const p0body = (i) => chat(`Quick question ${i}: what is my balance?`, { max_tokens: 8, ignore_eos: true });

async function p0(i) {
  const r = await stream('/v1/chat/completions', p0body(i), { 'X-Priority': 'P0' });
  return { ok: r.status === 200 && r.done, ttft: r.ttftMs, status: r.status, text: r.text };
}

// idle baseline (after a few warm-up requests: connection setup, JIT)
for (let i = 0; i < 4; i++) await p0(i);
const idle = [];
for (let i = 0; i < 8; i++) idle.push(await p0(i));
const idleT = idle.map((r) => r.ttft);
check('idle P0 requests complete', idle.every((r) => r.ok));

// flood
let stop = false;
const p2 = { ok: 0, r429: 0, retryAfterOk: 0, codes: new Set(), other: 0 };
async function flooder() {
  while (!stop) {
    const r = await stream('/v1/chat/completions', p2body, { 'X-Priority': 'P2' });
    if (r.status === 200 && r.done) p2.ok++;
    else if (r.status === 429) {
      p2.r429++;
      const ra = Number(r.headers.get('retry-after'));
      if (Number.isInteger(ra) && ra >= 1) p2.retryAfterOk++;
      if (r.json && r.json.error) p2.codes.add(r.json.error.code);
      await sleep(50);
    } else p2.other++;
  }
}
const floods = [];
for (let c = 0; c < CLIENTS; c++) floods.push(flooder());
await sleep(300);
const loaded = [];
const tEnd = performance.now() + FLOOD_MS;
for (let i = 0; performance.now() < tEnd || loaded.length < 5; i++) {
  loaded.push(await p0(100 + i));
  await sleep(100);
}
stop = true;
await Promise.all(floods);

const loadT = loaded.map((r) => r.ttft);
const idleMed = percentile(idleT, 50), idleMax = Math.max(...idleT);
const loadMed = percentile(loadT, 50), loadMax = Math.max(...loadT);
console.log(`# idle P0 TTFT median ${idleMed.toFixed(1)} ms, max ${idleMax.toFixed(1)} ms; ` +
            `under flood median ${loadMed.toFixed(1)} ms, p90 ${percentile(loadT, 90).toFixed(1)} ms, ` +
            `max ${loadMax.toFixed(1)} ms over ${loaded.length} requests`);
console.log(`# P2: ${p2.ok} completed, ${p2.r429} refused with 429 (${[...p2.codes].join(',')}), ` +
            `${p2.other} other`);
check('P2 flood gets 429s', p2.r429 > 0);
check('every 429 carries Retry-After >= 1', p2.retryAfterOk === p2.r429, `${p2.retryAfterOk}/${p2.r429}`);
check('429 bodies name queue_full or overload',
      [...p2.codes].every((c) => c === 'queue_full' || c === 'overload') && p2.codes.size > 0);
check('no other P2 failures', p2.other === 0, String(p2.other));
check('P2 still completes some requests', p2.ok > 0);
check('every P0 request completes under flood', loaded.length >= 5 && loaded.every((r) => r.ok),
      JSON.stringify(loaded.filter((r) => !r.ok)));
check('P0 TTFT median under flood <= 4 x idle median + 200 ms', loadMed <= 4 * idleMed + 200,
      `${loadMed.toFixed(1)} vs idle ${idleMed.toFixed(1)}`);
check('P0 TTFT max under flood <= idle max + 1500 ms', loadMax <= idleMax + 1500,
      `${loadMax.toFixed(1)} vs idle ${idleMax.toFixed(1)}`);
done();
