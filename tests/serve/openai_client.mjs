// openai_client.mjs — the official `openai` npm package against `frugal serve`: models, chat and
// completions, non-streaming and streaming (with usage), and an API error surfacing as APIError.
import OpenAI from 'openai';
import { BASE, MODEL, check, done } from './lib.mjs';

const client = new OpenAI({ baseURL: BASE + '/v1', apiKey: process.env.FRUGAL_KEY || 'unused',
                            maxRetries: 0, timeout: 60000 });

const models = await client.models.list();
const ids = [];
for await (const m of models) ids.push(m.id);
check('openai models.list', ids.length === 1 && ids[0] === MODEL, JSON.stringify(ids));

const msg = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hello.' }];
const c1 = await client.chat.completions.create({ model: MODEL, messages: msg, max_tokens: 12,
                                                  temperature: 0 });
check('openai chat non-stream shape', c1.object === 'chat.completion' &&
      c1.choices[0].message.role === 'assistant' && typeof c1.choices[0].message.content === 'string',
      JSON.stringify(c1));
check('openai chat usage', c1.usage.completion_tokens >= 1 && c1.usage.completion_tokens <= 12 &&
      c1.usage.total_tokens === c1.usage.prompt_tokens + c1.usage.completion_tokens,
      JSON.stringify(c1.usage));
check('openai chat finish_reason', ['stop', 'length'].includes(c1.choices[0].finish_reason));

// Streaming with usage: concatenated deltas equal the non-streaming text (greedy).
const s = await client.chat.completions.create({ model: MODEL, messages: msg, max_tokens: 12,
  temperature: 0, stream: true, stream_options: { include_usage: true } });
let text = '', finish = null, usage = null, nchunks = 0, role = null;
for await (const ch of s) {
  nchunks++;
  if (ch.usage) usage = ch.usage;
  const c = ch.choices[0];
  if (!c) continue;
  if (c.delta.role) role = c.delta.role;
  if (c.delta.content) text += c.delta.content;
  if (c.finish_reason) finish = c.finish_reason;
}
check('openai chat stream text equals non-stream', text === c1.choices[0].message.content,
      JSON.stringify([text, c1.choices[0].message.content]));
check('openai chat stream role, finish, usage', role === 'assistant' &&
      finish === c1.choices[0].finish_reason && usage && usage.completion_tokens ===
      c1.usage.completion_tokens, JSON.stringify({ role, finish, usage, nchunks }));

// Content-part arrays (text parts) are accepted.
const c2 = await client.chat.completions.create({ model: MODEL, max_completion_tokens: 4,
  temperature: 0, messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }] });
check('openai chat content parts + max_completion_tokens', c2.usage.completion_tokens <= 4);

const p1 = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 10,
                                             temperature: 0, seed: 7 });
check('openai completions non-stream', p1.object === 'text_completion' &&
      typeof p1.choices[0].text === 'string' && p1.usage.completion_tokens >= 1, JSON.stringify(p1));
const ps = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 10,
                                             temperature: 0, stream: true });
let ptext = '';
for await (const ch of ps) if (ch.choices[0]) ptext += ch.choices[0].text;
check('openai completions stream equals non-stream', ptext === p1.choices[0].text,
      JSON.stringify([ptext, p1.choices[0].text]));

// Sampling with a seed is reproducible.
const r1 = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 8,
                                             temperature: 0.9, top_p: 0.9, seed: 1234 });
const r2 = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 8,
                                             temperature: 0.9, top_p: 0.9, seed: 1234 });
check('openai seeded sampling reproducible', r1.choices[0].text === r2.choices[0].text);

// Errors arrive as APIError with OpenAI's shape.
try {
  await client.chat.completions.create({ model: MODEL, messages: msg, max_tokens: -5 });
  check('openai 400 as APIError', false, 'no error');
} catch (e) {
  check('openai 400 as APIError', e instanceof OpenAI.APIError && e.status === 400 &&
        e.error && e.error.param === 'max_tokens', String(e));
}
try {
  await client.chat.completions.create({ model: 'no-such-model', messages: msg, max_tokens: 2 });
  check('openai unknown model 404', false, 'no error');
} catch (e) {
  check('openai unknown model 404', e.status === 404 && e.code === 'model_not_found', String(e));
}
done();
