// structured.mjs — structured outputs and function calling through the official `openai` npm
// package against `frugal serve` on random weights: response_format json_schema / json_object
// and tools with tool_choice required / a named function, non-streaming and streaming; the
// shapes are OpenAI's and the outputs valid whatever the model is. Hostile schemas are a 400
// naming the problem, and the server keeps serving.
import OpenAI from 'openai';
import { MODEL, BASE, check, done } from './lib.mjs';

const client = new OpenAI({ baseURL: BASE + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const messages = [{ role: 'system', content: 'Bank.' }, { role: 'user', content: 'Block my card.' }];

const schema = {
  type: 'object',
  properties: {
    intent: { enum: ['block_card', 'balance', 'other'] },
    urgent: { type: 'boolean' },
    amount: { type: ['number', 'null'] },
    tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 2 },
  },
  required: ['intent', 'urgent', 'tags'],
  additionalProperties: false,
};
function validIntent(o) {
  return o && typeof o === 'object' && !Array.isArray(o) &&
    ['block_card', 'balance', 'other'].includes(o.intent) && typeof o.urgent === 'boolean' &&
    (o.amount === undefined || o.amount === null || typeof o.amount === 'number') &&
    Array.isArray(o.tags) && o.tags.length <= 2 &&
    o.tags.every((t) => typeof t === 'string' && [...t].length <= 6) &&
    Object.keys(o).every((k) => ['intent', 'urgent', 'amount', 'tags'].includes(k));
}
const rf = { type: 'json_schema', json_schema: { name: 'intent', schema, strict: true } };

// json_schema, several seeds: every reply parses and validates, finish_reason stop
let allValid = true, detail = '';
for (let seed = 1; seed <= 8; seed++) {
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 120,
    temperature: 1, seed, response_format: rf });
  let o = null;
  try { o = JSON.parse(r.choices[0].message.content); } catch { /* invalid */ }
  if (!validIntent(o) || r.choices[0].finish_reason !== 'stop') {
    allValid = false; detail = JSON.stringify(r.choices[0]);
  }
}
check('openai response_format json_schema: 8 seeds valid, finish stop', allValid, detail);

// streamed: the concatenated deltas equal the non-streaming reply (greedy)
const whole = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 120,
  temperature: 0, response_format: rf });
const st = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 120,
  temperature: 0, response_format: rf, stream: true });
let text = '', finish = null;
for await (const ch of st) {
  const c = ch.choices[0];
  if (c && c.delta.content) text += c.delta.content;
  if (c && c.finish_reason) finish = c.finish_reason;
}
check('openai json_schema stream equals non-stream and validates',
  text === whole.choices[0].message.content && finish === 'stop' && validIntent(JSON.parse(text)),
  JSON.stringify([text, whole.choices[0].message.content, finish]));

// json_object on chat and completions
const jo = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 80,
  temperature: 1, seed: 3, response_format: { type: 'json_object' } });
let joOk = false;
try { const v = JSON.parse(jo.choices[0].message.content); joOk = v && typeof v === 'object' && !Array.isArray(v); } catch { /* */ }
check('openai response_format json_object: an object', joOk, JSON.stringify(jo.choices[0]));
const jc = await client.completions.create({ model: MODEL, prompt: 'JSON:', max_tokens: 80,
  temperature: 1, seed: 4, response_format: { type: 'json_object' } });
let jcOk = false;
try { jcOk = typeof JSON.parse(jc.choices[0].text) === 'object'; } catch { /* */ }
check('openai completions json_object', jcOk, JSON.stringify(jc.choices[0]));

// tools
// (the fixture's context is 512 tokens and Qwen's tool prompt is long: tools stay small)
const tools = [
  { type: 'function', function: { name: 'block', parameters: { type: 'object',
      properties: { d: { type: 'string', minLength: 4, maxLength: 4 }, r: { enum: ['lost', 'stolen'] } },
      required: ['d', 'r'], additionalProperties: false } } },
  { type: 'function', function: { name: 'bal' } },
];
function validCall(tc, name) {
  if (!tc || tc.type !== 'function' || typeof tc.id !== 'string' || !tc.id) return false;
  if (name && tc.function.name !== name) return false;
  let a;
  try { a = JSON.parse(tc.function.arguments); } catch { return false; }
  if (tc.function.name === 'block')
    return typeof a.d === 'string' && [...a.d].length === 4 && ['lost', 'stolen'].includes(a.r) &&
      Object.keys(a).length === 2;
  return tc.function.name === 'bal' && typeof a === 'object';
}
let reqOk = true; detail = '';
for (let seed = 1; seed <= 4; seed++) {
  const r = await client.chat.completions.create({ model: MODEL, messages, tools, max_tokens: 90,
    temperature: 1, seed, tool_choice: 'required' });
  const m = r.choices[0].message;
  if (r.choices[0].finish_reason !== 'tool_calls' || m.content !== null || !m.tool_calls ||
      m.tool_calls.length !== 1 || !validCall(m.tool_calls[0])) { reqOk = false; detail = JSON.stringify(r.choices[0]); }
}
check('openai tools required: one valid call, finish tool_calls', reqOk, detail);

const ns = await client.chat.completions.create({ model: MODEL, messages, tools, max_tokens: 90,
  temperature: 1, seed: 11, stream: true, tool_choice: { type: 'function', function: { name: 'block' } } });
const acc = []; finish = null;
for await (const ch of ns) {
  const c = ch.choices[0];
  if (!c) continue;
  if (c.finish_reason) finish = c.finish_reason;
  for (const d of c.delta.tool_calls || []) {
    acc[d.index] = acc[d.index] || { id: '', type: 'function', function: { name: '', arguments: '' } };
    if (d.id) acc[d.index].id = d.id;
    if (d.function && d.function.name) acc[d.index].function.name += d.function.name;
    if (d.function && d.function.arguments) acc[d.index].function.arguments += d.function.arguments;
  }
}
check('openai tools named, streamed: tool_calls deltas make one valid call',
  finish === 'tool_calls' && acc.length === 1 && validCall(acc[0], 'block'), JSON.stringify({ acc, finish }));

// tool_choice auto with a previous call and its result in the history: a normal reply
const auto = await client.chat.completions.create({ model: MODEL, tools, max_tokens: 8, temperature: 0,
  messages: [...messages, { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
    function: { name: 'block', arguments: '{"d":"1234","r":"stolen"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: '{"ok": true}' }] });
check('openai tools auto with history: a reply', ['stop', 'length', 'tool_calls'].includes(auto.choices[0].finish_reason),
  JSON.stringify(auto.choices[0]));

// tool_choice auto, streamed: the deltas (content and any calls) equal the non-streamed reply
const aw = await client.chat.completions.create({ model: MODEL, messages, tools, max_tokens: 24, temperature: 0 });
const as = await client.chat.completions.create({ model: MODEL, messages, tools, max_tokens: 24, temperature: 0,
  stream: true });
let atext = '', afinish = null, achunks = 0;
for await (const ch of as) {
  const c = ch.choices[0];
  if (!c) continue;
  if (c.delta.content) { atext += c.delta.content; achunks++; }
  if (c.finish_reason) afinish = c.finish_reason;
}
check('openai tools auto, streamed: content equals non-stream',
  atext === (aw.choices[0].message.content || '') && afinish === aw.choices[0].finish_reason,
  JSON.stringify([atext, aw.choices[0].message.content, afinish, achunks]));

// hostile and unsupported schemas: 400 naming the problem
async function refused(name, s, code, word) {
  try {
    await client.chat.completions.create({ model: MODEL, messages, max_tokens: 50,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: s } } });
    check(name, false, 'no error');
  } catch (e) {
    check(name, e instanceof OpenAI.APIError && e.status === 400 && e.code === code &&
      e.error.param === 'response_format.json_schema.schema' && e.message.includes(word), String(e));
  }
}
await refused('openai unsupported keyword: 400 naming it', { type: 'string', pattern: '^a+$' },
  'unsupported_schema', 'pattern');
await refused('openai $ref loop: 400', { $defs: { a: { $ref: '#/$defs/a' } }, $ref: '#/$defs/a' },
  'unsupported_schema', '$defs');
let deep = {};
for (let i = 0; i < 200; i++) deep = { type: 'array', items: deep };
await refused('openai deep nesting: 400', deep, 'schema_too_large', 'nests');
await refused('openai huge enum: 400', { enum: Array.from({ length: 5000 }, (_, i) => 'v' + i) },
  'schema_too_large', 'enum');
const after = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 4 });
check('openai still serving after hostile schemas', after.choices[0].message.role === 'assistant');
done();
