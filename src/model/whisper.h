/* whisper.h — a Whisper speech model (encoder-decoder): hyperparameters, vocabulary layout and
 * weights, loaded from an HF folder or from whisper.cpp's ggml .bin file.
 *
 * Usage:
 *   fr_err err = {0};
 *   fr_whisper_model *m = fr_whisper_load("whisper-small/", &err);   // or "ggml-small.bin"
 *   if (!m) { fprintf(stderr, "%s\n", err.msg); return 1; }
 *   ... backend/cpu/whisper.h computes with it; stages/asr/whisper_asr.h decodes ...
 *   fr_whisper_free(m);
 * A loaded model is immutable and may be shared by any number of threads.
 *
 * Sources:
 *   - HF folder (WhisperForConditionalGeneration, transformers 4 or 5 layout): config.json,
 *     model.safetensors (or an index and shards; F32, F16 or BF16), generation_config.json
 *     (suppress_tokens, begin_suppress_tokens, lang_to_id, task_to_id, no_timestamps_token_id,
 *     max_initial_timestamp_index, decoder_start_token_id, eos_token_id), preprocessor_config.json
 *     (feature_size must equal num_mel_bins; n_fft 400, hop 160, 16 kHz, 30 s chunks) and
 *     tokenizer.json (the text of the tokens; optional: without it the model gives ids only).
 *     Tensor names: model.encoder.conv1.weight, model.encoder.layers.N.self_attn.q_proj.weight,
 *     model.decoder.layers.N.encoder_attn.k_proj.weight, ...; proj_out.weight when not tied.
 *   - ggml .bin (whisper.cpp): magic 0x67676d6c, 11 int32 hparams (n_vocab, n_audio_ctx,
 *     n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head,
 *     n_text_layer, n_mels, ftype), the mel filter bank (n_mel, n_fft, floats), the vocabulary
 *     (count, then length-prefixed byte strings), then tensors (n_dims, name length, type 0 F32 /
 *     1 F16, dims innermost first, name, data) until the end of the file, with openai-whisper's
 *     names (encoder.blocks.N.attn.query.weight, decoder.blocks.N.cross_attn.key.weight, ...).
 *     Every count, size and dimension is bounded by the bytes present before anything is
 *     allocated; a duplicate, unknown or missing tensor, or one whose shape disagrees with the
 *     hparams, is an error naming it.
 *
 * Vocabulary layout (Whisper's, whatever the BPE size): ids 0..n_text-1 are text (byte-level
 * BPE), then <|endoftext|> = n_text, <|startoftranscript|>, n_lang languages (<|en|>, <|zh|>, ...
 * in openai-whisper's order: 99, or 100 with <|yue|> for large-v3), <|translate|>, <|transcribe|>,
 * <|startoflm|>, <|startofprev|>, <|nocaptions|>, <|notimestamps|>, then the timestamps
 * <|0.00|>..<|30.00|> (0.02 s apart) up to n_vocab. An HF folder states the ids in
 * generation_config.json (checked against this layout); a ggml file gives n_text as its word
 * count (less one when its last word is <|endoftext|>, as convert-h5-to-ggml.py writes it).
 *
 * All weights are F32 after load, in one block owned by the model (F16/BF16 converted). Shapes
 * below are in torch order (outermost first), rows contiguous: a linear layer W is (out, in).
 * Errors carry codes: FR_ERR_NOT_FOUND (no such file), FR_ERR_BAD_REQUEST (corrupt, truncated
 * or inconsistent file), FR_ERR_UNSUPPORTED (a dtype, activation or layout we do not compute),
 * FR_ERR_TOO_LARGE (a size over the caps below).
 */
#ifndef FRUGAL_WHISPER_H
#define FRUGAL_WHISPER_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define FR_WHISPER_SAMPLE_RATE 16000
#define FR_WHISPER_N_FFT 400
#define FR_WHISPER_HOP 160
#define FR_WHISPER_CHUNK_S 30
#define FR_WHISPER_N_SAMPLES (FR_WHISPER_SAMPLE_RATE * FR_WHISPER_CHUNK_S) /* 480000 */
#define FR_WHISPER_N_FRAMES (FR_WHISPER_N_SAMPLES / FR_WHISPER_HOP)         /* 3000 */
#define FR_WHISPER_N_TIMESTAMPS 1501 /* <|0.00|> .. <|30.00|> */
#define FR_WHISPER_MAX_LANGS 100
/* caps checked at load (large-v3 is 1280 wide, 32 layers, 128 mels, 51866 tokens) */
#define FR_WHISPER_MAX_STATE 8192
#define FR_WHISPER_MAX_LAYERS 128
#define FR_WHISPER_MAX_VOCAB 262144
#define FR_WHISPER_MAX_MELS 512
#define FR_WHISPER_MAX_TEXT_CTX 4096

typedef struct fr_whisper_hparams {
    int n_vocab;       /* tokens (text + specials + timestamps) */
    int n_mels;        /* mel bins of the input features (80 or 128) */
    int n_audio_ctx;   /* encoder positions (1500 for 30 s) */
    int n_audio_state; /* encoder width (d_model) */
    int n_audio_head;  /* encoder attention heads */
    int n_audio_layer; /* encoder blocks */
    int n_audio_ff;    /* encoder MLP width (4 * d_model in openai's models) */
    int n_text_ctx;    /* decoder positions (448) */
    int n_text_state;  /* decoder width (= n_audio_state) */
    int n_text_head;   /* decoder attention heads */
    int n_text_layer;  /* decoder blocks */
    int n_text_ff;     /* decoder MLP width */
} fr_whisper_hparams;

typedef struct fr_whisper_vocab {
    int n_text;          /* text tokens: ids 0..n_text-1 */
    int eot;             /* <|endoftext|> (= n_text) */
    int sot;             /* <|startoftranscript|> */
    int lang_begin;      /* <|en|>: languages are lang_begin .. lang_begin + n_lang - 1 */
    int n_lang;          /* 99 or 100 */
    bool multilingual;   /* language and task tokens in the prompt (false for the .en models) */
    int translate, transcribe, solm, prev, nosp; /* task and other special tokens */
    int no_timestamps;   /* <|notimestamps|> */
    int ts_begin;        /* <|0.00|>; timestamps are ts_begin .. n_vocab-1 */
    int *suppress;       /* always suppressed ids (generation_config suppress_tokens) */
    int n_suppress;
    int *begin_suppress; /* suppressed at the first generated position (begin_suppress_tokens) */
    int n_begin_suppress;
    int max_initial_ts;  /* max_initial_timestamp_index (50 in openai's models), -1 = none */
    char *text_bytes;    /* the raw bytes of every text token, concatenated */
    uint32_t *text_off;  /* n_text + 1 offsets into text_bytes; NULL when the model has no text */
} fr_whisper_vocab;

/* An attention block's projections: q/k/v/o weights (state, state), q/v/o biases (state); k has
 * no bias in Whisper. */
typedef struct fr_whisper_attn {
    const float *q_w, *q_b, *k_w, *v_w, *v_b, *o_w, *o_b;
} fr_whisper_attn;

typedef struct fr_whisper_layer {
    const float *attn_ln_w, *attn_ln_b;   /* (state) LayerNorm before self-attention */
    fr_whisper_attn attn;                 /* self-attention */
    const float *cross_ln_w, *cross_ln_b; /* (state) decoder only: before cross-attention */
    fr_whisper_attn cross;                /* decoder only: cross-attention over the encoder */
    const float *mlp_ln_w, *mlp_ln_b;     /* (state) before the MLP */
    const float *fc1_w, *fc1_b;           /* (ff, state), (ff) */
    const float *fc2_w, *fc2_b;           /* (state, ff), (state) */
} fr_whisper_layer;

typedef enum fr_whisper_format {
    FR_WHISPER_HF = 0,   /* HF folder */
    FR_WHISPER_GGML = 1, /* whisper.cpp .bin */
} fr_whisper_format;

typedef struct fr_whisper_model {
    char *path;                   /* what was loaded (owned) */
    fr_whisper_format format;     /* where it came from */
    fr_whisper_hparams hp;
    fr_whisper_vocab vocab;
    float *mel_filters;           /* (n_mels, 201) from the ggml file, or NULL (HF: computed) */
    const float *conv1_w, *conv1_b; /* (state, n_mels, 3), (state) */
    const float *conv2_w, *conv2_b; /* (state, state, 3), (state) */
    const float *enc_pos;         /* (n_audio_ctx, state) */
    fr_whisper_layer *enc;        /* n_audio_layer blocks */
    const float *enc_ln_w, *enc_ln_b; /* (state) the encoder's final LayerNorm */
    const float *tok_emb;         /* (n_vocab, state) */
    const float *dec_pos;         /* (n_text_ctx, state) */
    fr_whisper_layer *dec;        /* n_text_layer blocks */
    const float *dec_ln_w, *dec_ln_b; /* (state) the decoder's final LayerNorm */
    const float *proj;            /* (n_vocab, state): tok_emb when tied, else proj_out */
    float *arena;                 /* every weight above (owned) */
    size_t arena_floats;          /* its size */
    int64_t n_params;             /* elements of all weights */
} fr_whisper_model;

/* Load from an HF folder or a ggml .bin file. Returns NULL with err (code and one line naming the
 * file and the problem). */
fr_whisper_model *fr_whisper_load(const char *path, fr_err *err);
/* Parse a ggml .bin image held by the caller (copied: the buffer may be freed afterwards); `name`
 * is used in messages (the fuzzer's entry). */
fr_whisper_model *fr_whisper_load_ggml_buffer(const uint8_t *data, size_t size, const char *name,
                                              fr_err *err);
void fr_whisper_free(fr_whisper_model *m);

/* The language code of language index i (0 = "en"), or NULL out of range (openai's order). */
const char *fr_whisper_lang_code(int i);
/* The index of a language code ("en", "de", ...), or -1. */
int fr_whisper_lang_index(const char *code);
/* Bytes of text token id (NULL for a special token, an id out of range or a model without
 * text); *len gets the count. */
const char *fr_whisper_token_bytes(const fr_whisper_model *m, int id, size_t *len);

#endif
