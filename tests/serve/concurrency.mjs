// concurrency.mjs — 32 concurrent streaming requests (fp32 greedy) must each be token-identical
// to the same request run alone. Prompts differ in content and length, so prefill chunks of some
// requests share steps with decodes of others. Token ids come from the `return_token_ids`
// extension (the choice of a response; the new ids of each stream chunk).
import { chat, check, done, metric, metrics, post, stream } from './lib.mjs';

const N = Number(process.env.N || 32), MAXTOK = Number(process.env.MAXTOK || 24);
const words = ['bank', 'card', 'transfer', 'balance', 'the', 'my', 'please', 'why', 'fee', 'rate',
               'account', 'pending', 'declined', 'refund', 'limit', 'PIN', 'top-up', 'cash'];
const prompts = [];
for (let i = 0; i < N; i++) {
  const n = 3 + ((i * 7) % 29);
  const w = [];
  for (let k = 0; k < n; k++) w.push(words[(i * 5 + k * 3) % words.length]);
  prompts.push(`Request ${i}: ` + w.join(' ') + '?');
}
const body = (i) => chat(prompts[i], { max_tokens: MAXTOK, ignore_eos: true, return_token_ids: true });

// alone, one at a time
const alone = [];
for (let i = 0; i < N; i++) {
  const r = await post('/v1/chat/completions', body(i));
  if (r.status !== 200) { check(`alone ${i}`, false, r.text); done(); }
  alone.push(r.json.choices[0]);
}
// together
const steps0 = metric(await metrics(), 'frugal_engine_steps_total');
const t0 = performance.now();
const together = await Promise.all(prompts.map((_, i) => stream('/v1/chat/completions', body(i))));
const wall = performance.now() - t0;
let same = 0;
const bad = [];
for (let i = 0; i < N; i++) {
  const s = together[i];
  const ids = [];  // each chunk carries the ids new since the previous one
  for (const e of s.events) if (e.choices && e.choices[0] && e.choices[0].token_ids) ids.push(...e.choices[0].token_ids);
  const ok = s.status === 200 && s.done && ids && JSON.stringify(ids) ===
             JSON.stringify(alone[i].token_ids) && s.text === alone[i].message.content;
  if (ok) same++; else bad.push(i);
}
check(`${N} concurrent streams all complete`, together.every((s) => s.status === 200 && s.done));
check(`${N} concurrent streams token-identical to alone`, same === N, `differ: ${bad.join(',')}`);
const steps = metric(await metrics(), 'frugal_engine_steps_total') - steps0;
check('requests were batched (steps well below requests x tokens)', steps < (N * MAXTOK) / 4,
      `${steps} steps for ${N * MAXTOK} tokens`);
check('every request generated max_tokens ids', alone.every((c) => c.token_ids.length === MAXTOK));
console.log(`# ${N} concurrent streams of ${MAXTOK} tokens in ${wall.toFixed(0)} ms, ${steps} steps`);
done();
