// hf_gguf.mjs — reads GGUF files with a third-party parser (@huggingface/gguf, the Hugging Face
// hub's) and checks what it reports against the GGUF rules llama.cpp applies:
//   node tests/gguf/hf_gguf.mjs FILE...    one "ok"/"FAIL" line per file; exit 1 on any FAIL.
// Checked: version 3; the tensor and key counts of the header match what was parsed; general.
// architecture is llama or qwen2; the token list has as many entries as token_embd.weight has rows
// (llama.cpp's n_vocab); tensor offsets are multiples of the alignment, in order, and the data
// section starts aligned and inside the file.
import { gguf } from "@huggingface/gguf";
import { statSync } from "node:fs";

let failed = 0;
for (const file of process.argv.slice(2)) {
    const why = [];
    try {
        const r = await gguf(file, { allowLocalFile: true });
        const m = r.metadata, t = r.tensorInfos;
        const align = BigInt(m["general.alignment"] ?? 32);
        if (m.version !== 3) why.push(`version ${m.version}`);
        if (BigInt(m.tensor_count) !== BigInt(t.length)) why.push(`tensor_count ${m.tensor_count} but ${t.length} infos`);
        const keys = Object.keys(m).filter((k) => !["version", "tensor_count", "kv_count"].includes(k));
        if (BigInt(m.kv_count) !== BigInt(keys.length)) why.push(`kv_count ${m.kv_count} but ${keys.length} keys`);
        const arch = m["general.architecture"];
        if (arch !== "llama" && arch !== "qwen2") why.push(`architecture ${arch}`);
        const emb = t.find((x) => x.name === "token_embd.weight");
        const tokens = m["tokenizer.ggml.tokens"];
        if (!emb || !Array.isArray(tokens)) why.push("no token_embd.weight or tokenizer.ggml.tokens");
        else if (BigInt(tokens.length) !== emb.shape[1]) why.push(`${tokens.length} tokens but token_embd.weight has ${emb.shape[1]} rows`);
        if (r.tensorDataOffset % align !== 0n) why.push(`data section at ${r.tensorDataOffset} is not aligned to ${align}`);
        let prev = -1n;
        for (const x of t) {
            if (x.offset % align !== 0n) why.push(`${x.name}: offset ${x.offset} not aligned`);
            if (x.offset <= prev) why.push(`${x.name}: offset ${x.offset} not after the previous tensor's`);
            prev = x.offset;
        }
        if (r.tensorDataOffset + prev >= BigInt(statSync(file).size)) why.push("the last tensor starts past the end of the file");
        if (why.length === 0) console.log(`ok   ${file}: @huggingface/gguf reads ${arch}, ${t.length} tensors, ${tokens.length} tokens`);
    } catch (e) {
        why.push(`parse error: ${e.message}`);
    }
    if (why.length) {
        failed++;
        console.log(`FAIL ${file}: ${why.slice(0, 4).join("; ")}`);
    }
}
process.exit(failed ? 1 : 0);
