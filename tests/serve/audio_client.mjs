// audio_client.mjs — the official `openai` npm package's audio.transcriptions.create and
// audio.translations.create against `frugal serve`: every response_format, the segment
// granularity, and refusals surfacing as BadRequestError with the server's code.
// Usage: node audio_client.mjs SPEECH.wav WORD   (WORD: a word the recording must be heard saying)
import fs from 'node:fs';
import OpenAI from 'openai';
import { BASE, check, done } from './lib.mjs';

const [wav, word] = process.argv.slice(2);
const client = new OpenAI({ baseURL: BASE + '/v1', apiKey: process.env.FRUGAL_KEY || 'unused',
                            maxRetries: 0, timeout: 60000 });
const file = () => fs.createReadStream(wav);

const j = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1' });
check('openai transcriptions json: text heard', typeof j.text === 'string' && j.text.includes(word),
      JSON.stringify(j));
check('openai transcriptions json: usage in seconds', j.usage && j.usage.type === 'duration' &&
      j.usage.seconds >= 1, JSON.stringify(j.usage));
check('openai transcriptions json: frugal cost', j.frugal && j.frugal.joules > 0 && j.frugal.usd > 0,
      JSON.stringify(j.frugal));

const v = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1',
  response_format: 'verbose_json', timestamp_granularities: ['segment'], language: 'en',
  temperature: 0, prompt: 'banking' });
const seg = v.segments && v.segments[0];
check('openai transcriptions verbose_json', v.task === 'transcribe' && v.language === 'english' &&
      v.duration > 0.5 && v.text === j.text && v.segments.length === 1 && seg.start === 0 &&
      Math.abs(seg.end - v.duration) < 1e-6 && seg.text === v.text, JSON.stringify(v));

const t = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1',
                                                     response_format: 'text' });
check('openai transcriptions text: a string', typeof t === 'string' && t === j.text + '\n',
      JSON.stringify(t));
const srt = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1',
                                                       response_format: 'srt' });
check('openai transcriptions srt', typeof srt === 'string' &&
      /^1\n00:00:00,000 --> 00:00:\d\d,\d{3}\n/.test(srt) && srt.includes(j.text), JSON.stringify(srt));
const vtt = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1',
                                                       response_format: 'vtt' });
check('openai transcriptions vtt', typeof vtt === 'string' &&
      /^WEBVTT\n\n00:00:00\.000 --> 00:00:\d\d\.\d{3}\n/.test(vtt) && vtt.includes(j.text),
      JSON.stringify(vtt));

const tr = await client.audio.translations.create({ file: file(), model: 'whisper-1' });
check('openai translations json: the English transcript', tr.text === j.text, JSON.stringify(tr));
const trv = await client.audio.translations.create({ file: file(), model: 'whisper-1',
                                                     response_format: 'verbose_json' });
check('openai translations verbose_json', trv.task === 'translate' && trv.language === 'english' &&
      trv.text === j.text, JSON.stringify(trv));

// refusals: (request, the server's code)
const refusals = [
  [{ language: 'fr' }, 'unsupported_language'],
  [{ response_format: 'verbose_json', timestamp_granularities: ['word'] }, 'unsupported_value'],
  [{ temperature: 2 }, 'invalid_value'],
];
for (const [extra, code] of refusals) {
  try {
    await client.audio.transcriptions.create({ file: file(), model: 'whisper-1', ...extra });
    check(`openai refusal ${code}`, false, 'no error');
  } catch (e) {
    check(`openai refusal ${code}: BadRequestError`, e instanceof OpenAI.BadRequestError &&
          e.status === 400 && e.code === code, `${e.constructor.name} ${e.status} ${e.code} ${e.message}`);
  }
}
try {
  await client.audio.transcriptions.create({ file: file(), model: 'gpt-9-transcribe' });
  check('openai unknown model', false, 'no error');
} catch (e) {
  check('openai unknown model: NotFoundError', e instanceof OpenAI.NotFoundError &&
        e.code === 'model_not_found', `${e.constructor.name} ${e.status} ${e.code}`);
}
done();
