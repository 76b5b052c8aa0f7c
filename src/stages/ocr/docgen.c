/* docgen.c — synthetic invoice/receipt renderer with cairo; see docgen.h. */
#include "stages/ocr/docgen.h"

#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rng {
    uint64_t s; /* splitmix64 state */
} rng;

static uint64_t rnext(rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int rint_(rng *r, int lo, int hi) { return lo + (int)(rnext(r) % (uint64_t)(hi - lo + 1)); }
static double runi(rng *r) { return (double)(rnext(r) >> 11) / 9007199254740992.0; }
#define PICK(r, arr) ((arr)[rnext(r) % FR_ARRAY_LEN(arr)])

void fr_doc_opts_clean(fr_doc_opts *o, uint64_t seed) {
    memset(o, 0, sizeof *o);
    o->dpi = 150;
    o->seed = seed;
}

void fr_doc_opts_random(fr_doc_opts *o, bool chinese, uint64_t seed) {
    rng r = {seed ^ 0x5bd1e995u};
    memset(o, 0, sizeof *o);
    o->chinese = chinese;
    o->seed = seed;
    o->receipt = rnext(&r) & 1;
    o->dpi = rint_(&r, 100, 150);
    o->rotate_deg = (float)(runi(&r) * 6.0 - 3.0);
    o->noise = (float)(runi(&r) * 14.0);
    o->jpeg_quality = rnext(&r) % 3 ? rint_(&r, 40, 85) : 0;
    o->varied = !chinese;
}

/* amount in cents -> "1,234.56" (comma_decimal: "1.234,56") */
static void money_style(long cents, bool comma_decimal, char *out, size_t cap) {
    char digits[32];
    snprintf(digits, sizeof digits, "%ld", cents / 100);
    size_t n = strlen(digits), o = 0;
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) out[o++] = comma_decimal ? '.' : ',';
        out[o++] = digits[i];
    }
    snprintf(out + o, cap - o, "%c%02ld", comma_decimal ? ',' : '.', cents % 100);
}

static void money(long cents, char *out, size_t cap) { money_style(cents, false, out, cap); }

/* A varied page's currency: ISO code, the mark, whether it follows the figure, the decimal comma. */
typedef struct cur_style {
    const char *code;   /* ISO 4217 */
    const char *mark;   /* "$", "US$", "USD ", "€", ... (with its space where one is written) */
    bool after;         /* "1.234,56 €" */
    bool comma_decimal; /* "1.234,56" */
} cur_style;

static const cur_style CUR_STYLES[] = {
    {"USD", "$", false, false},      {"USD", "US$", false, false},
    {"USD", "USD ", false, false},   {"EUR", "\xe2\x82\xac", false, false},
    {"EUR", "\xe2\x82\xac", false, true}, {"EUR", " \xe2\x82\xac", true, true},
    {"EUR", "\xe2\x82\xac ", false, true}, {"EUR", " EUR", true, true},
    {"GBP", "\xc2\xa3", false, false}, {"GBP", "\xc2\xa3 ", false, false},
    {"GBP", "GBP ", false, false},
};

/* The figure with its currency mark: "$1,234.56", "1.234,56 €". */
static void priced(const cur_style *c, long cents, char *out, size_t cap) {
    char m[32];
    money_style(cents, c->comma_decimal, m, sizeof m);
    if (c->after) snprintf(out, cap, "%s%s", m, c->mark);
    else snprintf(out, cap, "%s%s", c->mark, m);
}

/* Faces of a varied English page (family, bold): Debian fonts, weights the evaluation generator
 * does not draw with. */
static const struct { const char *family; bool bold; } EN_FACES[] = {
    {"DejaVu Sans", false},     {"DejaVu Sans", true},      {"DejaVu Sans Condensed", false},
    {"DejaVu Serif", true},     {"Liberation Serif", true}, {"Liberation Mono", true},
    {"Arimo", true},            {"Tinos", true},            {"Cousine", true},
    {"Carlito", true},          {"Caladea", true},          {"FreeSans", true},
    {"FreeSerif", true},        {"C059", true},             {"P052", true},
    {"Lato", true},             {"Cantarell", true},        {"URW Gothic", true},
};

typedef struct page {
    cairo_t *cr;       /* drawing context */
    double dpi;        /* pixels per inch */
    const char *font;  /* regular family */
    double width_in;   /* page width, inches (text is shrunk to fit inside 0.1 in margins) */
    bool bold_all;     /* every line in the bold weight (a varied page's bold face) */
} page;

static void text_at(page *p, double x_in, double y_in, double pt, bool bold, int align,
                    const char *s) {
    cairo_select_font_face(p->cr, p->font, CAIRO_FONT_SLANT_NORMAL,
                           bold || p->bold_all ? CAIRO_FONT_WEIGHT_BOLD
                                               : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(p->cr, pt * p->dpi / 72.0);
    double x = x_in * p->dpi;
    cairo_text_extents_t te;
    cairo_text_extents(p->cr, s, &te);
    /* align: 0 left, 1 right, 2 centred */
    double room = (align == 1 ? x_in - 0.1 : align == 0 ? p->width_in - 0.1 - x_in
                                                     : 2 * FR_MIN(x_in - 0.1, p->width_in - 0.1 - x_in)) * p->dpi;
    if (te.x_advance > room && room > 0) {
        cairo_set_font_size(p->cr, pt * p->dpi / 72.0 * room / te.x_advance);
        cairo_text_extents(p->cr, s, &te);
    }
    if (align == 1) x -= te.x_advance;
    else if (align == 2) x -= te.x_advance / 2;
    cairo_move_to(p->cr, x, y_in * p->dpi);
    cairo_show_text(p->cr, s);
}

static const char *const EN_A[] = {"Acme", "Northwind", "Bluebird", "Summit", "Harbor", "Maple",
                                   "Granite", "Silver Oak", "Redwood", "Pioneer", "Evergreen",
                                   "Lakeside"};
static const char *const EN_B[] = {"Trading", "Logistics", "Supplies", "Consulting", "Foods",
                                   "Electronics", "Hardware", "Services"};
static const char *const EN_C[] = {"Ltd", "Inc", "LLC", "Co"};
static const char *const EN_ITEMS[] = {"Office chairs", "Printer paper", "Toner cartridge",
                                       "Consulting hours", "Shipping", "Network cable",
                                       "Coffee beans", "Desk lamp", "Software license",
                                       "Maintenance"};
static const char *const EN_MON[] = {"January", "February", "March", "April", "May", "June",
                                     "July", "August", "September", "October", "November",
                                     "December"};
static const char *const ZH_A[] = {"北京", "上海", "广州", "深圳", "杭州", "成都", "南京", "武汉"};
static const char *const ZH_B[] = {"华信", "恒通", "金源", "创达", "东方", "新世纪", "博远", "瑞丰"};
static const char *const ZH_C[] = {"科技", "贸易", "物流", "商贸", "电子", "食品"};
static const char *const ZH_ITEMS[] = {"办公用品", "打印纸", "墨盒", "技术服务费", "咨询服务",
                                       "运输费", "咖啡豆", "网络设备"};

/* What a varied English page shows and where it starts. */
typedef struct en_varied {
    const char *payee, *customer, *inv, *date_txt; /* the fields as printed */
    const long *items;   /* line item amounts, cents */
    int n_items;         /* their count */
    long sub, tax;       /* subtotal and tax, cents */
    int tax_pct;         /* tax rate, percent */
    long total;          /* the amount due, cents */
    const cur_style *cs; /* currency */
    int layout;          /* 0 one column, 1 two columns, 2 label and value columns apart */
    bool receipt;        /* narrow till receipt */
    double L, R, yy;     /* left and right margins and the first baseline, inches */
    double body, step;   /* body size (pt) and line step (in) */
    double wi;           /* page width, inches */
} en_varied;

static const char *const EN_INV_L[] = {"Invoice No:", "Invoice Number:", "Invoice #", "Invoice No."};
static const char *const EN_DATE_L[] = {"Date:", "Invoice Date:", "Issue date:", "Date"};
static const char *const EN_PAYEE_L[] = {"Payee:", "Seller:", "From:", "Vendor:", "Supplier:"};
static const char *const EN_TOTAL_L[] = {"Total", "TOTAL", "Amount Due", "Total Due", "Balance due",
                                         "Grand Total"};

/* A varied English page (layout, labels, currency marks on every money line; r2 draws the
 * choices, r the item names as the fixed page does). */
static void draw_en_varied(page *p, rng *r, rng *r2, const en_varied *v) {
    char buf[192], m1[48], m2[48];
    double L = v->L, R = v->R, yy = v->yy, body = v->body, step = v->step, wi = v->wi;
    const char *il = PICK(r2, EN_INV_L), *dl = PICK(r2, EN_DATE_L), *pl = PICK(r2, EN_PAYEE_L);
    if (v->receipt) {
        text_at(p, wi / 2, yy, 12, true, 2, v->payee), yy += step * 1.3;
        snprintf(buf, sizeof buf, "%d %s Street", rint_(r2, 1, 999), PICK(r2, EN_A));
        text_at(p, wi / 2, yy, body - 1, false, 2, buf), yy += step * 1.4;
        snprintf(buf, sizeof buf, "%s %s", rnext(r2) & 1 ? "Receipt No:" : il, v->inv);
        text_at(p, L, yy, body, false, 0, buf), yy += step;
        snprintf(buf, sizeof buf, "%s %s %02d:%02d", dl, v->date_txt, rint_(r2, 8, 21), rint_(r2, 0, 59));
        text_at(p, L, yy, body, false, 0, buf), yy += step * 1.4;
    } else {
        text_at(p, L, yy, 20, true, 0, rnext(r2) & 1 ? "INVOICE" : "Tax Invoice"), yy += step * 1.6;
        text_at(p, L, yy, 13, true, 0, v->payee), yy += step;
        snprintf(buf, sizeof buf, "%d %s Road, Springfield", rint_(r2, 1, 999), PICK(r2, EN_A));
        text_at(p, L, yy, body - 2, false, 0, buf), yy += step * 1.5;
        double xr = wi * 0.55, xv = L + 1.45;
        if (v->layout == 1) { /* two columns: the parties left, the invoice's own data right */
            snprintf(buf, sizeof buf, "%s %s", pl, v->payee), text_at(p, L, yy, body, false, 0, buf);
            snprintf(buf, sizeof buf, "%s %s", il, v->inv), text_at(p, xr, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "Bill To: %s", v->customer), text_at(p, L, yy, body, false, 0, buf);
            snprintf(buf, sizeof buf, "%s %s", dl, v->date_txt), text_at(p, xr, yy, body, false, 0, buf);
            yy += step * 1.6;
        } else if (v->layout == 2) { /* labels in one column, values in another */
            const char *lab[4] = {pl, il, dl, "Bill To:"};
            const char *val[4] = {v->payee, v->inv, v->date_txt, v->customer};
            for (int i = 0; i < 4; i++) {
                text_at(p, L, yy, body, false, 0, lab[i]);
                text_at(p, xv, yy, body, false, 0, val[i]), yy += step;
            }
            yy += step * 0.6;
        } else {
            snprintf(buf, sizeof buf, "%s %s", pl, v->payee), text_at(p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "%s %s", il, v->inv), text_at(p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "%s %s", dl, v->date_txt), text_at(p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "Bill To: %s", v->customer), text_at(p, L, yy, body, false, 0, buf), yy += step * 1.6;
        }
        text_at(p, L, yy, body, true, 0, "Description");
        text_at(p, R, yy, body, true, 1, "Amount"), yy += step * 1.2;
    }
    bool marks = rnext(r2) & 1; /* a currency mark on the item lines too */
    for (int i = 0; i < v->n_items; i++) {
        if (marks) priced(v->cs, v->items[i], m1, sizeof m1);
        else money_style(v->items[i], v->cs->comma_decimal, m1, sizeof m1);
        text_at(p, L, yy, body, false, 0, PICK(r, EN_ITEMS));
        text_at(p, R, yy, body, false, 1, m1), yy += step;
    }
    yy += step * 0.4;
    priced(v->cs, v->sub, m1, sizeof m1), priced(v->cs, v->tax, m2, sizeof m2);
    snprintf(buf, sizeof buf, "Subtotal: %s", m1), text_at(p, R, yy, body, false, 1, buf), yy += step;
    snprintf(buf, sizeof buf, "Tax (%d%%): %s", v->tax_pct, m2), text_at(p, R, yy, body, false, 1, buf), yy += step;
    priced(v->cs, v->total, m1, sizeof m1);
    const char *tl = PICK(r2, EN_TOTAL_L);
    if (v->layout == 2 || (rnext(r2) & 1)) { /* the label at the left margin, the figure right */
        snprintf(buf, sizeof buf, "%s:", tl), text_at(p, L, yy, body + 1, true, 0, buf);
        text_at(p, R, yy, body + 1, true, 1, m1), yy += step * 1.5;
    } else {
        snprintf(buf, sizeof buf, "%s: %s", tl, m1), text_at(p, R, yy, body + 1, true, 1, buf), yy += step * 1.5;
    }
    if (v->receipt) text_at(p, wi / 2, yy, body, false, 2, "Thank you!");
}

int fr_doc_render(const fr_doc_opts *o, fr_image *out, fr_doc_truth *t, fr_err *err) {
    memset(out, 0, sizeof *out);
    memset(t, 0, sizeof *t);
    rng r = {o->seed * 0x2545F4914F6CDD1Dull + 17};
    int dpi = o->dpi >= 50 && o->dpi <= 600 ? o->dpi : 150;
    double wi = o->receipt ? 3.2 : 5.83, hi = o->receipt ? 5.6 : 8.27;
    int W = (int)(wi * dpi), H = (int)(hi * dpi);
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    if (cairo_surface_status(sf) != CAIRO_STATUS_SUCCESS) {
        fr_err_set(err, "docgen: cannot create a %dx%d surface", W, H);
        cairo_surface_destroy(sf);
        return -1;
    }
    cairo_t *cr = cairo_create(sf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_translate(cr, W / 2.0, H / 2.0);
    cairo_rotate(cr, o->rotate_deg * M_PI / 180.0);
    cairo_translate(cr, -W / 2.0, -H / 2.0);
    double ink = 0.05 + runi(&r) * 0.15;
    cairo_set_source_rgb(cr, ink, ink, ink);
    page p = {cr, dpi, o->chinese ? "Noto Sans CJK SC" : "DejaVu Sans", wi, false};
    /* a varied English page draws its own choices from a second stream, so the first one (and
     * with it the content of the fixed page) stays as it was */
    rng r2 = {o->seed * 0x9E3779B97F4A7C15ull + 0x1234567ull};
    bool varied = o->varied && !o->chinese;
    const cur_style *cs = &CUR_STYLES[0];
    int layout = 0;
    if (varied) {
        size_t f = rnext(&r2) % FR_ARRAY_LEN(EN_FACES);
        p.font = EN_FACES[f].family;
        p.bold_all = EN_FACES[f].bold;
        cs = &CUR_STYLES[rnext(&r2) % FR_ARRAY_LEN(CUR_STYLES)];
        layout = o->receipt ? 0 : (int)(rnext(&r2) % 3);
    }

    /* content */
    char payee[96], customer[96], inv[32], date_txt[48], buf[160], m1[32], m2[32];
    int y = rint_(&r, 2020, 2025), mo = rint_(&r, 1, 12), d = rint_(&r, 1, 28);
    snprintf(t->date, sizeof t->date, "%04d-%02d-%02d", y, mo, d);
    if (o->chinese) {
        snprintf(payee, sizeof payee, "%s%s%s有限公司", PICK(&r, ZH_A), PICK(&r, ZH_B), PICK(&r, ZH_C));
        snprintf(customer, sizeof customer, "%s%s%s有限公司", PICK(&r, ZH_A), PICK(&r, ZH_B),
                 PICK(&r, ZH_C));
        if (o->receipt) snprintf(inv, sizeof inv, "R%08d", rint_(&r, 0, 99999999));
        else snprintf(inv, sizeof inv, "%08d", rint_(&r, 10000000, 99999999));
        if (rnext(&r) & 1) snprintf(date_txt, sizeof date_txt, "%04d年%02d月%02d日", y, mo, d);
        else snprintf(date_txt, sizeof date_txt, "%s", t->date);
        snprintf(t->currency, sizeof t->currency, "CNY");
    } else {
        snprintf(payee, sizeof payee, "%s %s %s", PICK(&r, EN_A), PICK(&r, EN_B), PICK(&r, EN_C));
        snprintf(customer, sizeof customer, "%s %s %s", PICK(&r, EN_A), PICK(&r, EN_B),
                 PICK(&r, EN_C));
        switch (rnext(&r) % 3) {
        case 0: snprintf(inv, sizeof inv, "INV-%04d-%05d", y, rint_(&r, 1, 99999)); break;
        case 1: snprintf(inv, sizeof inv, "%08d", rint_(&r, 10000000, 99999999)); break;
        default:
            snprintf(inv, sizeof inv, "%c%c-%06d", 'A' + rint_(&r, 0, 25), 'A' + rint_(&r, 0, 25),
                     rint_(&r, 0, 999999));
        }
        switch (rnext(&r) % 4) {
        case 0: snprintf(date_txt, sizeof date_txt, "%s", t->date); break;
        case 1: snprintf(date_txt, sizeof date_txt, "%02d/%02d/%04d", d, mo, y); break;
        case 2: snprintf(date_txt, sizeof date_txt, "%.3s %d, %04d", EN_MON[mo - 1], d, y); break;
        default: snprintf(date_txt, sizeof date_txt, "%d %s %04d", d, EN_MON[mo - 1], y);
        }
        snprintf(t->currency, sizeof t->currency, "USD");
        if (varied) {
            /* numeric dates in the order the currency's countries write them: month first with
             * slashes on a dollar page, day first otherwise; dots are day first everywhere */
            bool usd = !strcmp(cs->code, "USD");
            switch (rnext(&r2) % 6) {
            case 0: snprintf(date_txt, sizeof date_txt, "%s", t->date); break;
            case 1:
                if (usd) snprintf(date_txt, sizeof date_txt, "%02d/%02d/%04d", mo, d, y);
                else snprintf(date_txt, sizeof date_txt, "%02d/%02d/%04d", d, mo, y);
                break;
            case 2: snprintf(date_txt, sizeof date_txt, "%02d.%02d.%04d", d, mo, y); break;
            case 3: snprintf(date_txt, sizeof date_txt, "%.3s %d, %04d", EN_MON[mo - 1], d, y); break;
            case 4: snprintf(date_txt, sizeof date_txt, "%d %s %04d", d, EN_MON[mo - 1], y); break;
            default: snprintf(date_txt, sizeof date_txt, "%s %d, %04d", EN_MON[mo - 1], d, y);
            }
            snprintf(t->currency, sizeof t->currency, "%s", cs->code);
        }
    }
    snprintf(t->invoice_no, sizeof t->invoice_no, "%s", inv);
    snprintf(t->payee, sizeof t->payee, "%s", payee);
    int n_items = rint_(&r, 2, o->receipt ? 5 : 4);
    long items[5], sub = 0;
    for (int i = 0; i < n_items; i++) {
        items[i] = o->receipt ? rint_(&r, 150, 9999) : rint_(&r, 1000, 250000);
        sub += items[i];
    }
    int tax_pct = o->chinese ? (rnext(&r) & 1 ? 6 : 13) : (int)(rnext(&r) % 3) * 5;
    long tax = sub * tax_pct / 100, total = sub + tax;
    snprintf(t->amount, sizeof t->amount, "%ld.%02ld", total / 100, total % 100);
    const char *cur = o->chinese ? "\xc2\xa5" : "$";

    double L = o->receipt ? 0.2 : 0.5, R = wi - L, yy = o->receipt ? 0.45 : 0.7;
    double body = o->receipt ? 10.5 : 11, step = body * 1.75 / 72.0;
    if (o->chinese) {
        if (o->receipt) {
            text_at(&p, wi / 2, yy, 12, true, 2, payee), yy += step * 1.4;
            text_at(&p, wi / 2, yy, body, false, 2, "收据"), yy += step * 1.3;
            snprintf(buf, sizeof buf, "单号：%s", inv), text_at(&p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "日期：%s %02d:%02d", date_txt, rint_(&r, 8, 21), rint_(&r, 0, 59));
            text_at(&p, L, yy, body, false, 0, buf), yy += step * 1.4;
        } else {
            text_at(&p, L, yy, 20, true, 0, "发票"), yy += step * 1.6;
            text_at(&p, L, yy, 13, true, 0, payee), yy += step * 1.5;
            snprintf(buf, sizeof buf, "收款方：%s", payee), text_at(&p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "发票号码：%s", inv), text_at(&p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "开票日期：%s", date_txt), text_at(&p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "付款方：%s", customer), text_at(&p, L, yy, body, false, 0, buf), yy += step * 1.6;
            text_at(&p, L, yy, body, true, 0, "项目"), text_at(&p, R, yy, body, true, 1, "金额"), yy += step * 1.2;
        }
        for (int i = 0; i < n_items; i++) {
            money(items[i], m1, sizeof m1);
            text_at(&p, L, yy, body, false, 0, PICK(&r, ZH_ITEMS));
            snprintf(buf, sizeof buf, "%s%s", cur, m1), text_at(&p, R, yy, body, false, 1, buf), yy += step;
        }
        yy += step * 0.4;
        money(sub, m1, sizeof m1), money(tax, m2, sizeof m2);
        snprintf(buf, sizeof buf, "小计：%s%s", cur, m1), text_at(&p, R, yy, body, false, 1, buf), yy += step;
        snprintf(buf, sizeof buf, "税额：%s%s", cur, m2), text_at(&p, R, yy, body, false, 1, buf), yy += step;
        money(total, m1, sizeof m1);
        snprintf(buf, sizeof buf, "%s：%s%s", o->receipt ? "合计" : "价税合计", cur, m1);
        text_at(&p, R, yy, body + 1, true, 1, buf), yy += step * 1.5;
        if (o->receipt) text_at(&p, wi / 2, yy, body, false, 2, "谢谢惠顾");
    } else if (varied) {
        en_varied ev = {payee, customer, inv, date_txt, items, n_items, sub, tax, tax_pct, total,
                        cs, layout, o->receipt, L, R, yy, body, step, wi};
        draw_en_varied(&p, &r, &r2, &ev);
    } else {
        if (o->receipt) {
            text_at(&p, wi / 2, yy, 12, true, 2, payee), yy += step * 1.3;
            snprintf(buf, sizeof buf, "%d %s Street", rint_(&r, 1, 999), PICK(&r, EN_A));
            text_at(&p, wi / 2, yy, body - 1, false, 2, buf), yy += step * 1.4;
            snprintf(buf, sizeof buf, "Receipt No: %s", inv), text_at(&p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "Date: %s %02d:%02d", date_txt, rint_(&r, 8, 21), rint_(&r, 0, 59));
            text_at(&p, L, yy, body, false, 0, buf), yy += step * 1.4;
        } else {
            text_at(&p, L, yy, 20, true, 0, "INVOICE"), yy += step * 1.6;
            text_at(&p, L, yy, 13, true, 0, payee), yy += step;
            snprintf(buf, sizeof buf, "%d %s Road, Springfield", rint_(&r, 1, 999), PICK(&r, EN_A));
            text_at(&p, L, yy, body - 2, false, 0, buf), yy += step * 1.5;
            snprintf(buf, sizeof buf, "Payee: %s", payee), text_at(&p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "%s %s", rnext(&r) & 1 ? "Invoice No:" : "Invoice Number:", inv);
            text_at(&p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "Date: %s", date_txt), text_at(&p, L, yy, body, false, 0, buf), yy += step;
            snprintf(buf, sizeof buf, "Bill To: %s", customer), text_at(&p, L, yy, body, false, 0, buf), yy += step * 1.6;
            text_at(&p, L, yy, body, true, 0, "Description"), text_at(&p, R, yy, body, true, 1, "Amount"), yy += step * 1.2;
        }
        for (int i = 0; i < n_items; i++) {
            money(items[i], m1, sizeof m1);
            text_at(&p, L, yy, body, false, 0, PICK(&r, EN_ITEMS));
            text_at(&p, R, yy, body, false, 1, m1), yy += step;
        }
        yy += step * 0.4;
        money(sub, m1, sizeof m1), money(tax, m2, sizeof m2);
        snprintf(buf, sizeof buf, "Subtotal: %s", m1), text_at(&p, R, yy, body, false, 1, buf), yy += step;
        snprintf(buf, sizeof buf, "Tax (%d%%): %s", tax_pct, m2), text_at(&p, R, yy, body, false, 1, buf), yy += step;
        money(total, m1, sizeof m1);
        static const char *const TL[] = {"Total", "TOTAL", "Amount Due", "Total Due"};
        snprintf(buf, sizeof buf, "%s: %s%s", PICK(&r, TL), cur, m1);
        text_at(&p, R, yy, body + 1, true, 1, buf), yy += step * 1.5;
        if (o->receipt) text_at(&p, wi / 2, yy, body, false, 2, "Thank you!");
    }
    cairo_surface_flush(sf);
    if (cairo_status(cr) != CAIRO_STATUS_SUCCESS) {
        fr_err_set(err, "docgen: cairo: %s", cairo_status_to_string(cairo_status(cr)));
        cairo_destroy(cr);
        cairo_surface_destroy(sf);
        return -1;
    }
    /* to gray + noise */
    fr_image g = {fr_xmalloc((size_t)W * H), (uint32_t)W, (uint32_t)H, 1};
    const uint8_t *data = cairo_image_surface_get_data(sf);
    int stride = cairo_image_surface_get_stride(sf);
    for (int yy2 = 0; yy2 < H; yy2++) {
        const uint32_t *row = (const uint32_t *)(data + (size_t)yy2 * stride);
        for (int x = 0; x < W; x++) {
            uint32_t px = row[x];
            int v = (int)((77 * ((px >> 16) & 255) + 150 * ((px >> 8) & 255) + 29 * (px & 255)) >> 8);
            if (o->noise > 0) v += (int)lround((runi(&r) + runi(&r) + runi(&r) - 1.5) * 2.0 * o->noise);
            g.pix[(size_t)yy2 * W + x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    cairo_destroy(cr);
    cairo_surface_destroy(sf);
    if (o->jpeg_quality > 0) {
        fr_buf jb = {0};
        if (fr_img_encode(&g, FR_IMG_JPEG, o->jpeg_quality, &jb, err) ||
            fr_img_decode((const uint8_t *)jb.data, jb.len, "image/jpeg", NULL, 1, out, err)) {
            fr_buf_free(&jb);
            fr_image_free(&g);
            return -1;
        }
        fr_buf_free(&jb);
        fr_image_free(&g);
        return 0;
    }
    *out = g;
    return 0;
}

static void jstr(fr_buf *b, const char *k, const char *v, bool comma) {
    fr_buf_printf(b, "\"%s\":\"", k);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\') fr_buf_printf(b, "\\%c", *v);
        else fr_buf_append(b, v, 1);
    }
    fr_buf_puts(b, comma ? "\"," : "\"");
}

void fr_doc_truth_json(const fr_doc_opts *o, const fr_doc_truth *t, fr_buf *b) {
    fr_buf_printf(b, "{\"kind\":\"%s\",\"lang\":\"%s\",\"dpi\":%d,\"rotate_deg\":%.2f,"
                     "\"noise\":%.1f,\"jpeg_quality\":%d,\"seed\":%llu,",
                  o->receipt ? "receipt" : "invoice", o->chinese ? "chi_sim" : "eng", o->dpi,
                  o->rotate_deg, o->noise, o->jpeg_quality, (unsigned long long)o->seed);
    jstr(b, "invoice_no", t->invoice_no, true);
    jstr(b, "amount", t->amount, true);
    jstr(b, "currency", t->currency, true);
    jstr(b, "date", t->date, true);
    jstr(b, "payee", t->payee, false);
    fr_buf_puts(b, "}");
}

void fr_doc_photo(int kind, uint32_t w, uint32_t h, uint64_t seed, fr_image *out) {
    rng r = {seed * 0x9E3779B97F4A7C15ull + 3};
    out->width = w;
    out->height = h;
    out->channels = 3;
    out->pix = fr_xmalloc((size_t)w * h * 3);
    double base[3] = {runi(&r) * 255, runi(&r) * 255, runi(&r) * 255};
    double gx[3], gy[3];
    for (int c = 0; c < 3; c++) gx[c] = runi(&r) * 2 - 1, gy[c] = runi(&r) * 2 - 1;
    struct { double x, y, rad, col[3]; } blob[24];
    int nb = kind == 2 ? 12 : 24;
    for (int i = 0; i < nb; i++) {
        blob[i].x = runi(&r) * w;
        blob[i].y = runi(&r) * h;
        blob[i].rad = (0.03 + runi(&r) * 0.25) * (w < h ? w : h);
        for (int c = 0; c < 3; c++) blob[i].col[c] = runi(&r) * 255;
    }
    double fx = 0.01 + runi(&r) * 0.08, fy = 0.01 + runi(&r) * 0.08;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            double v[3];
            for (int c = 0; c < 3; c++) {
                double val;
                switch (kind) {
                case 0: val = base[c] + 120 * (gx[c] * x / w + gy[c] * y / h); break;
                case 1: val = runi(&r) * 255; break;
                case 2: {
                    val = base[c];
                    for (int i = 0; i < nb; i++) {
                        double dx = fabs(x - blob[i].x), dy = fabs(y - blob[i].y);
                        if ((i & 1) ? (dx < blob[i].rad && dy < blob[i].rad * 0.6)
                                    : (dx * dx + dy * dy < blob[i].rad * blob[i].rad))
                            val = blob[i].col[c];
                    }
                    break;
                }
                case 3: {
                    double acc = base[c] * 0.3, wsum = 0.3;
                    for (int i = 0; i < nb; i++) {
                        double dx = x - blob[i].x, dy = y - blob[i].y;
                        double k = exp(-(dx * dx + dy * dy) / (2 * blob[i].rad * blob[i].rad));
                        acc += k * blob[i].col[c];
                        wsum += k;
                    }
                    val = acc / wsum + 20 * sin(x * fx + c) * cos(y * fy) + (runi(&r) - 0.5) * 16;
                    break;
                }
                default: {
                    int sx = (int)(x * fx * 2), sy = (int)(y * fy * 2);
                    val = ((sx + sy) & 1) ? 230 : 25;
                    if (kind == 4 && (seed & 1)) val = (sx & 1) ? 230 : 25;
                }
                }
                v[c] = val;
            }
            uint8_t *px = out->pix + ((size_t)y * w + x) * 3;
            for (int c = 0; c < 3; c++) px[c] = (uint8_t)(v[c] < 0 ? 0 : v[c] > 255 ? 255 : v[c]);
        }
}
