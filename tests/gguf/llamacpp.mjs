// llamacpp.mjs — loads GGUF files in llama.cpp itself (node-llama-cpp's prebuilt CPU build of
// ggml-org/llama.cpp) and runs them:
//   node tests/gguf/llamacpp.mjs [!]FILE [FRUGAL_JSON]...
// For each FILE: llama.cpp must load it, make a context and decode greedily. FRUGAL_JSON, when
// given, is the output of `frugal generate --temperature 0 --ignore-eos --json` on the same file:
// llama.cpp then evaluates exactly its prompt_ids and its greedy tokens must equal frugal's ids.
// !FILE: llama.cpp must refuse to load FILE. One process for all files (starting llama.cpp takes
// seconds); one thread (the model is tiny, and spinning threads on a loaded machine cost more).
// Prints "ok ..." or "FAIL ..." per file; exit 1 on any FAIL.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const args = process.argv.slice(2);
let failed = 0;
for (let i = 0; i < args.length; i++) {
    const refuse = args[i].startsWith("!");
    const file = refuse ? args[i].slice(1) : args[i];
    let ref = null;
    if (i + 1 < args.length && args[i + 1].startsWith("{")) ref = JSON.parse(args[++i]);
    let model, ctx;
    try {
        try {
            model = await llama.loadModel({ modelPath: file });
        } catch (e) {
            if (!refuse) throw e;
            console.log(`ok   ${file}: llama.cpp refuses it (${e.message})`);
            continue;
        }
        if (refuse) {
            failed++;
            console.log(`FAIL ${file}: llama.cpp loads a file it should refuse`);
            continue;
        }
        const prompt = ref ? ref.prompt_ids : model.tokenize("hello world");
        const n = ref ? ref.ids.length : 5;
        ctx = await model.createContext({ contextSize: 128, threads: 1 });
        const out = [];
        for await (const t of ctx.getSequence().evaluate(prompt, { temperature: 0 })) {
            out.push(t);
            if (out.length >= n) break;
        }
        if (ref && JSON.stringify(out) !== JSON.stringify(ref.ids)) {
            failed++;
            console.log(`FAIL ${file}: llama.cpp greedy ${JSON.stringify(out)}, frugal ${JSON.stringify(ref.ids)}`);
        } else {
            console.log(`ok   ${file}: llama.cpp loads and decodes it${ref ? `; greedy tokens equal frugal's ${JSON.stringify(out)}` : ""}`);
        }
    } catch (e) {
        failed++;
        console.log(`FAIL ${file}: llama.cpp: ${e.message}`);
    } finally {
        if (ctx) await ctx.dispose();
        if (model) await model.dispose();
    }
}
process.exit(failed ? 1 : 0);
