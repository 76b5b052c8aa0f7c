/* main.c — `frugal <command> [options]`: dispatch to the command implementations. */
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"
#include "tools/mkmodel.h"
#include "serve/serve.h"
#include "tools/meter_cmds.h"
#include "tools/nlu_cmds.h"
#include "tools/ocr_cmds.h"
#include "tools/asr_cmds.h"
#include "tools/speech_eval.h"
#include "tools/transcribe_cmd.h"
#include "tools/vad_cmd.h"
#include "tools/assist_cmd.h"
#include "tools/analyze_heads.h"
#include "tools/eval_vqa.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"tokenize", fr_cmd_tokenize, "tokenize --model PATH TEXT: print token ids as a JSON array"},
    {"generate", fr_cmd_generate, "generate --model PATH (--prompt TEXT | --messages FILE) [...]"},
    {"render", fr_cmd_render, "render --model PATH --messages FILE: print the chat prompt"},
    {"mkmodel", fr_cmd_mkmodel, "mkmodel --out PATH --arch qwen2|llama --hidden N ...: random-weight model"},
    {"serve", fr_cmd_serve, "serve --model PATH [--host H] [--port N] [--config FILE]: OpenAI-compatible HTTP server"},
    {"audit", fr_cmd_audit, "audit --ledger PATH [--html F] [--png F] [--ab]: cost audit / A/B over the ledger"},
    {"roi", fr_cmd_roi, "roi --a LEDGER [--a-arm A] --b LEDGER [--b-arm B]: ROI table of two configurations"},
    {"train-intent", fr_cmd_train_intent, "train-intent --data CSV --out MODEL [--val-frac F] [--seed S]: train the intent classifier"},
    {"eval-nlu", fr_cmd_eval_nlu, "eval-nlu --model MODEL --data CSV [--nlupp DIR --folds A-B]: intent accuracy, latency, slot P/R/F1"},
    {"assist", fr_cmd_assist, "assist [--config FILE] [--model PATH]: JSON requests on stdin, responses on stdout"},
    {"asr", fr_cmd_asr, "asr [--lm-kind domain|generic] [--lm PATH] [--no-vad] FILE...: transcribe WAV/FLAC/OGG"},
    {"vad", fr_cmd_vad, "vad [--model PATH] [--threshold P] [--probs] FILE...: speech spans (Silero VAD)"},
    {"transcribe", fr_cmd_transcribe, "transcribe --model DIR_OR_BIN --audio FILE [--language xx] [--timestamps] [--json]: Whisper on the CPU"},
    {"build-lm", fr_cmd_build_lm, "build-lm --csv CSV [--nlupp DIR] --out LM.arpa [--bin LM.bin]: domain speech LM"},
    {"eval-speech", fr_cmd_eval_speech, "eval-speech --rows tune|eval | --manifest FILE: speech->intent per voice, n-best rescoring"},
    {"eval-asr", fr_cmd_eval_asr, "eval-asr [--csv CSV] [--n N] [--workers N]: espeak-ng WER, generic vs domain LM"},
    {"ocr", fr_cmd_ocr, "ocr FILE [--type MEDIA] [--lang L] [--threshold T] [--force-ocr]: density, route, OCR lines, fields as JSON"},
    {"gen-docs", fr_cmd_gen_docs, "gen-docs --out DIR [--n N] [--lang eng|chi_sim|both] [--seed S]: synthetic invoices/receipts + truth JSON"},
    {"eval-ocr", fr_cmd_eval_ocr, "eval-ocr [--n N] [--lang eng|chi_sim|both] [--threads T]: OCR field accuracy, pages/s, density separation"},
    {"analyze", fr_cmd_analyze, "analyze heads --model DIR --data FILE.jsonl --out DIR: attention-head redundancy over image tokens"},
    {"eval-vqa", fr_cmd_eval_vqa, "eval-vqa --model DIR --data FILE.jsonl [--keep-ratios L] [--budgets L] [--json]: VQA exact match, ANLS, latency, joules"},
    /* commands of later subsystems are added here */
};

static void usage(FILE *f) {
    fprintf(f, "usage: frugal <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`frugal <command> --help` shows a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "frugal: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
