// sp_llamacpp.mjs — llama.cpp's SentencePiece tokenizer (node-llama-cpp's prebuilt CPU build of
// ggml-org/llama.cpp) on the GGUF `llama` vocabulary that tests/test_sp_tokenizer.c writes:
//   node tests/gguf/sp_llamacpp.mjs FILE.gguf EXPECT.json
// EXPECT.json is tests/fixtures/sp/spm/expect.json: for each fixture string sentencepiece's own
// ids (sp_ids), which frugal's GGUF path reproduces (test_sp_tokenizer). llama.cpp tokenizes each
// string without special-token parsing and without BOS; strings holding "<s>", "</s>" or
// "<unk>" are left out (sentencepiece reads them as text, llama.cpp may not). Prints one line per
// difference, then "ok ..." or "FAIL ..."; exit 1 on a difference.
import { readFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [file, expectPath] = process.argv.slice(2);
const expect = JSON.parse(readFileSync(expectPath, "utf8"));
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: file });
let n = 0, bad = 0;
for (const c of expect.cases) {
    if (/<s>|<\/s>|<unk>/.test(c.text)) continue;
    n++;
    let ids = Array.from(model.tokenize(c.text, false));
    if (ids.length && ids[0] === 1 && (c.sp_ids.length === 0 || c.sp_ids[0] !== 1)) ids = ids.slice(1);
    if (JSON.stringify(ids) !== JSON.stringify(c.sp_ids)) {
        bad++;
        if (bad <= 5) console.log(`  ${JSON.stringify(c.text)}: llama.cpp ${JSON.stringify(ids)}, sentencepiece ${JSON.stringify(c.sp_ids)}`);
    }
}
await model.dispose();
if (bad || n < 40) {
    console.log(`FAIL llama.cpp's SentencePiece tokenizer differs from sentencepiece on ${bad} of ${n} strings`);
    process.exit(1);
}
console.log(`ok   llama.cpp's SentencePiece tokenizer gives sentencepiece's ids on all ${n} strings`);
