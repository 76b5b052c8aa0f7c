/* onnx_lstm.c — the LSTM kernel of the ONNX executor (op_lstm in onnx_ops.c checks the shapes
 * and attributes): one forward direction, ONNX's gate order i, o, f, c, activations sigmoid,
 * tanh, tanh, no peepholes. Plain loops in fp32: for Silero VAD (H = 64, one or a few steps per
 * window) the products are too small for sgemm to pay.
 *
 *   g = W x_t + R h + (Wb + Rb)       (4H) per batch row
 *   i = s(g_i), o = s(g_o), f = s(g_f), u = tanh(g_c)
 *   c = f * c + i * u,  h = o * tanh(c)
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/onnx_ops.h"

static float lstm_sig(float v) { return 1.0f / (1.0f + expf(-v)); }

/* gates (4H) of one batch row: W x + R h + biases. */
static void lstm_gates(const ox_lstm *L, const float *x, const float *h, const float *w,
                       const float *r, const float *b, float *g) {
    const int64_t H = L->hid, I = L->n_in;
    for (int64_t j = 0; j < 4 * H; j++) {
        float acc = b ? b[j] + b[4 * H + j] : 0.0f;
        const float *wj = w + j * I, *rj = r + j * H;
        for (int64_t k = 0; k < I; k++) acc += wj[k] * x[k];
        for (int64_t k = 0; k < H; k++) acc += rj[k] * h[k];
        g[j] = acc;
    }
}

void ox_lstm_run(const ox_lstm *L, const float *x, const float *w, const float *r,
                 const float *b, const float *h0, const float *c0, float *y, float *yh,
                 float *yc, float *scratch) {
    const int64_t S = L->seq, B = L->batch, I = L->n_in, H = L->hid;
    float *g = scratch, *h = scratch + 4 * B * H, *cs = h + B * H;
    if (h0) memcpy(h, h0, (size_t)(B * H) * sizeof *h);
    else memset(h, 0, (size_t)(B * H) * sizeof *h);
    if (c0) memcpy(cs, c0, (size_t)(B * H) * sizeof *cs);
    else memset(cs, 0, (size_t)(B * H) * sizeof *cs);
    for (int64_t t = 0; t < S; t++)
        for (int64_t bi = 0; bi < B; bi++) {
            float *gb = g + bi * 4 * H, *hb = h + bi * H, *cb = cs + bi * H;
            lstm_gates(L, x + (t * B + bi) * I, hb, w, r, b, gb);
            for (int64_t j = 0; j < H; j++) {
                const float ig = lstm_sig(gb[j]), og = lstm_sig(gb[H + j]);
                const float fg = lstm_sig(gb[2 * H + j]), u = tanhf(gb[3 * H + j]);
                cb[j] = fg * cb[j] + ig * u;
                hb[j] = og * tanhf(cb[j]);
            }
            if (y) memcpy(y + (t * B + bi) * H, hb, (size_t)H * sizeof *hb);
        }
    if (yh) memcpy(yh, h, (size_t)(B * H) * sizeof *h);
    if (yc) memcpy(yc, cs, (size_t)(B * H) * sizeof *cs);
}
