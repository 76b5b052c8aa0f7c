#!/usr/bin/python3
"""gen_invoices.py - the evaluation generator for frugal's OCR: EVALUATION ONLY, NEVER TUNED ON.

No rule, threshold, label list or template of frugal may be chosen by looking at this generator's
output; its pages measure the reader, never train it. It shares no code, fonts or layouts with the
project's own generator (src/stages/ocr/docgen.c, cairo, "DejaVu Sans" / "Noto Sans CJK SC"):
it is Python with Pillow (Debian python3-pil) and draws with every other installed CJK and Latin
font from Debian's font packages:

  CJK:   fonts-wqy-zenhei, fonts-wqy-microhei, fonts-arphic-uming, fonts-arphic-ukai,
         fonts-arphic-gbsn00lp, fonts-arphic-gkai00mp, fonts-lxgw-wenkai, fonts-droid-fallback,
         fonts-noto-cjk (the Serif CJK faces only)
  Latin: fonts-liberation (Sans, Serif, Mono, Sans Narrow), fonts-freefont-ttf (FreeSans,
         FreeSerif, FreeMono), fonts-dejavu (Serif and Mono only), fonts-croscore (Arimo, Tinos,
         Cousine), fonts-urw-base35 (Nimbus Sans / Roman / Mono, URW Bookman, C059, P052, URW
         Gothic), fonts-texgyre, fonts-crosextra-carlito, fonts-crosextra-caladea,
         fonts-linuxlibertine, fonts-open-sans, fonts-roboto-unhinted, fonts-lato,
         fonts-ebgaramond, fonts-go, fonts-inconsolata, fonts-cantarell, fonts-noto-mono

  (scripts/install-deps.sh installs them all; a font that is missing is skipped, and a font
  that lacks a glyph of a page is never drawn with for that page.)

Layouts: a header block with key/value lines, a table with grid lines, two columns (seller and
buyer side by side), a narrow till receipt, a Chinese VAT-invoice form (发票代码 / 发票号码 /
购买方 / 销售方 / 价税合计 大写 + 小写); a red stamp over text on some pages. Degradations: skew,
blur, noise, down-scaling, a perspective warp as from a phone (mild, or strong with uneven
light, as a photo of a page on a desk), JPEG quality; files in PNG, JPEG and WebP.

Per page it writes PAGE.{png,jpg,webp} and PAGE.json: invoice_no, date (ISO 8601), amount
("1234.50"), currency (ISO 4217), payee, lang ("en"/"zh"), text (every drawn line, in reading
order, '\n'-separated) and how it was made (font, layout, distortions). Seeded: the same
--seed gives the same pages (byte for byte with the same Pillow and codecs).

usage: gen_invoices.py --out DIR [--n-en N] [--n-zh N] [--seed S]
"""
import argparse
import json
import math
import os
import random
import sys

from PIL import Image, ImageChops, ImageDraw, ImageFilter, ImageFont

FONT_DIRS = ["/usr/share/fonts/truetype", "/usr/share/fonts/opentype"]
# (file name, face index, can draw CJK)
FONT_CANDIDATES = [
    ("wqy-zenhei.ttc", 0, True), ("wqy-microhei.ttc", 0, True),
    ("uming.ttc", 0, True), ("ukai.ttc", 0, True),
    ("gbsn00lp.ttf", 0, True), ("gkai00mp.ttf", 0, True),
    ("LXGWWenKai-Regular.ttf", 0, True), ("DroidSansFallbackFull.ttf", 0, True),
    ("NotoSerifCJK-Regular.ttc", 2, True), ("NotoSerifCJK-Bold.ttc", 2, True),
    ("LiberationSans-Regular.ttf", 0, False), ("LiberationSerif-Regular.ttf", 0, False),
    ("LiberationMono-Regular.ttf", 0, False), ("LiberationSansNarrow-Regular.ttf", 0, False),
    ("LiberationSans-Bold.ttf", 0, False),
    ("FreeSans.ttf", 0, False), ("FreeSerif.ttf", 0, False), ("FreeMono.ttf", 0, False),
    ("DejaVuSerif.ttf", 0, False), ("DejaVuSansMono.ttf", 0, False),
    ("Arimo-Regular.ttf", 0, False), ("Tinos-Regular.ttf", 0, False),
    ("Cousine-Regular.ttf", 0, False),
    ("NimbusSans-Regular.otf", 0, False), ("NimbusRoman-Regular.otf", 0, False),
    ("NimbusMonoPS-Regular.otf", 0, False), ("URWBookman-Light.otf", 0, False),
    ("C059-Roman.otf", 0, False), ("P052-Roman.otf", 0, False), ("URWGothic-Book.otf", 0, False),
    ("texgyreheros-regular.otf", 0, False), ("texgyretermes-regular.otf", 0, False),
    ("texgyrepagella-regular.otf", 0, False), ("texgyreschola-regular.otf", 0, False),
    ("texgyrecursor-regular.otf", 0, False), ("texgyreadventor-regular.otf", 0, False),
    ("Carlito-Regular.ttf", 0, False), ("Caladea-Regular.ttf", 0, False),
    ("LinLibertine_R.otf", 0, False), ("LinBiolinum_R.otf", 0, False),
    ("OpenSans-Regular.ttf", 0, False), ("Roboto-Regular.ttf", 0, False),
    ("Lato-Regular.ttf", 0, False), ("EBGaramond12-Regular.otf", 0, False),
    ("Go-Regular.ttf", 0, False), ("Go-Mono.ttf", 0, False), ("Inconsolata.otf", 0, False),
    ("Cantarell-Regular.otf", 0, False), ("NotoMono-Regular.ttf", 0, False),
]


def find_fonts():
    found = {}
    for d in FONT_DIRS:
        for root, _, files in os.walk(d):
            for f in files:
                found.setdefault(f, os.path.join(root, f))
    latin, cjk = [], []
    for name, idx, is_cjk in FONT_CANDIDATES:
        if name in found:
            (cjk if is_cjk else latin).append((found[name], idx))
    # CJK fonts also draw Latin text
    return latin + cjk, cjk


EN_COMPANIES_A = ["Northwind", "Bluebird", "Harbor", "Cedar", "Granite", "Silverline", "Oakridge",
                  "Lakeside", "Redwood", "Summit", "Pioneer", "Brightwater", "Ironbridge", "Maple"]
EN_COMPANIES_B = ["Traders", "Logistics", "Supplies", "Consulting", "Foods", "Electric",
                  "Design Studio", "Hardware", "Printing", "Labs", "Partners", "Outfitters"]
EN_SUFFIX = ["Ltd", "LLC", "Inc.", "GmbH", "Co.", "PLC", ""]
EN_ITEMS = ["Office chairs", "Consulting hours", "Printer toner", "Cloud hosting", "Delivery",
            "Cable set", "Desk lamps", "Maintenance", "Software licence", "Paper A4 boxes"]
ZH_CITY = ["北京", "上海", "广州", "深圳", "杭州", "南京", "成都", "武汉", "西安", "苏州", "天津"]
ZH_NAME = ["华信", "恒达", "金桥", "新元", "鼎盛", "瑞丰", "宏图", "东方", "远航", "嘉禾", "明德"]
ZH_KIND = ["科技", "商贸", "电子", "物流", "餐饮", "建材", "文化传媒", "信息技术", "食品"]
ZH_ITEMS = ["办公用品", "技术服务费", "打印纸", "电脑配件", "咨询服务", "运输费", "餐费", "软件许可"]
ZH_DIGITS = "零壹贰叁肆伍陆柒捌玖"

EN_CURRENCIES = [("USD", "$"), ("USD", "US$"), ("USD", "USD "), ("EUR", "€"), ("EUR", "EUR "),
                 ("GBP", "£"), ("GBP", "GBP "), ("HKD", "HK$"), ("JPY", "JPY ")]
ZH_CURRENCIES = [("CNY", "¥"), ("CNY", "￥"), ("CNY", "RMB "), ("CNY", "CNY ")]

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]


def zh_upper(amount):
    """Chinese capital figures of an amount, as on a VAT invoice (大写)."""
    units = ["", "拾", "佰", "仟", "万", "拾", "佰", "仟", "亿"]
    yuan = int(amount)
    jiao_fen = round((amount - yuan) * 100)
    s = ""
    digits = str(yuan)
    for i, ch in enumerate(digits):
        u = units[len(digits) - 1 - i]
        s += ZH_DIGITS[int(ch)] + (u if ch != "0" else "")
    while "零零" in s:
        s = s.replace("零零", "零")
    s = s.rstrip("零") + "元"
    if jiao_fen == 0:
        return s + "整"
    return s + ZH_DIGITS[jiao_fen // 10] + "角" + ZH_DIGITS[jiao_fen % 10] + "分"


def money(rng, amount, cur_sym, lang):
    """The amount as printed: thousands separators, a decimal convention that suits the currency."""
    whole = f"{amount:,.2f}"
    if cur_sym.strip() in ("€", "EUR") and rng.random() < 0.5:
        whole = whole.replace(",", " ").replace(".", ",").replace(" ", ".")  # 1.234,50
    if cur_sym.strip() == "JPY":
        whole = f"{int(amount):,}"
    return cur_sym + whole


def make_fields(rng, lang):
    if lang == "en":
        payee = f"{rng.choice(EN_COMPANIES_A)} {rng.choice(EN_COMPANIES_B)} {rng.choice(EN_SUFFIX)}".strip()
        buyer = f"{rng.choice(EN_COMPANIES_A)} {rng.choice(EN_COMPANIES_B)} {rng.choice(EN_SUFFIX)}".strip()
        cur, sym = rng.choice(EN_CURRENCIES)
        forms = [f"INV-{rng.randint(2019, 2025)}-{rng.randint(1, 9999):04d}",
                 f"{rng.randint(10000000, 99999999)}",
                 f"{rng.choice('ABCDEFGHKLMNPRST')}{rng.choice('ABCDEFGHKLMNPRST')}-{rng.randint(100000, 999999)}"]
    else:
        payee = f"{rng.choice(ZH_CITY)}{rng.choice(ZH_NAME)}{rng.choice(ZH_KIND)}有限公司"
        buyer = f"{rng.choice(ZH_CITY)}{rng.choice(ZH_NAME)}{rng.choice(ZH_KIND)}有限公司"
        while buyer == payee:
            buyer = f"{rng.choice(ZH_CITY)}{rng.choice(ZH_NAME)}{rng.choice(ZH_KIND)}有限公司"
        cur, sym = rng.choice(ZH_CURRENCIES)
        forms = [f"{rng.randint(10000000, 99999999)}", f"{rng.randint(10000000, 99999999)}",
                 f"NO-{rng.randint(2019, 2025)}-{rng.randint(1, 9999):04d}"]
    inv = rng.choice(forms)
    y, m, d = rng.randint(2019, 2025), rng.randint(1, 12), rng.randint(1, 28)
    iso = f"{y:04d}-{m:02d}-{d:02d}"
    if lang == "en":
        fmts = [iso, f"{d} {MONTHS[m - 1]} {y}", f"{MONTHS[m - 1]} {d}, {y}",
                f"{MONTHS[m - 1][:3]} {d}, {y}", f"{d:02d}.{m:02d}.{y}"]
        if d > 12:  # slash forms only where they are not ambiguous
            fmts.append(f"{m:02d}/{d:02d}/{y}" if cur == "USD" else f"{d:02d}/{m:02d}/{y}")
    else:
        fmts = [f"{y}年{m}月{d}日", f"{y}年{m:02d}月{d:02d}日", f"{y}-{m:02d}-{d:02d}", f"{y}/{m}/{d}"]
    date_txt = rng.choice(fmts)
    n_items = rng.randint(1, 5)
    items = []
    for _ in range(n_items):
        qty = rng.randint(1, 20)
        price = rng.choice([rng.randint(1, 500), rng.randint(1, 50000) / 100])
        items.append((rng.choice(EN_ITEMS if lang == "en" else ZH_ITEMS), qty, price))
    sub = round(sum(q * p for _, q, p in items), 2)
    tax_rate = rng.choice([0, 0.06, 0.1, 0.13, 0.2]) if lang == "en" else rng.choice([0.06, 0.09, 0.13])
    tax = round(sub * tax_rate, 2)
    total = round(sub + tax, 2)
    if cur == "JPY":
        total = float(int(total))
    return dict(payee=payee, buyer=buyer, currency=cur, sym=sym, invoice_no=inv, date=iso,
                date_txt=date_txt, items=items, sub=sub, tax=tax, tax_rate=tax_rate, total=total)


class Page:
    """A white page that records every line of text it draws, in reading order."""

    def __init__(self, w, h, font_path, font_idx):
        self.img = Image.new("RGB", (w, h), "white")
        self.d = ImageDraw.Draw(self.img)
        self.font_path, self.font_idx = font_path, font_idx
        self.lines = []
        self.cache = {}

    def font(self, size):
        if size not in self.cache:
            self.cache[size] = ImageFont.truetype(self.font_path, size, index=self.font_idx)
        return self.cache[size]

    def text(self, x, y, s, size, fill="black", record=True):
        self.d.text((x, y), s, font=self.font(size), fill=fill)
        if record:
            self.lines.append((y, x, s))
        return self.d.textbbox((x, y), s, font=self.font(size))

    def row(self, y, cells, size):
        """Cells (x, text) drawn on one baseline, recorded as one line."""
        for x, s in cells:
            self.d.text((x, y), s, font=self.font(size), fill="black")
        self.lines.append((y, cells[0][0], " ".join(s for _, s in cells)))

    def truth_text(self):
        # reading order: top to bottom (lines within 8 px are one row), then left to right
        rows = sorted(self.lines, key=lambda t: (t[0], t[1]))
        return "\n".join(s for _, _, s in rows)


def labels(lang, rng):
    if lang == "en":
        return dict(title=rng.choice(["INVOICE", "Invoice", "TAX INVOICE", "Receipt"]),
                    no=rng.choice(["Invoice No.", "Invoice Number:", "Invoice #", "Invoice No:"]),
                    date=rng.choice(["Date:", "Issue date:", "Invoice Date:"]),
                    payee=rng.choice(["Payee:", "From:", "Seller:", "Vendor:"]),
                    buyer=rng.choice(["Bill to:", "Customer:"]),
                    total=rng.choice(["Total:", "Amount due:", "Total due:", "Balance due:", "Grand Total:"]),
                    sub="Subtotal:", tax="Tax", item="Description", qty="Qty", price="Unit price",
                    amt="Amount")
    return dict(title=rng.choice(["增值税普通发票", "发票", "收款收据", "电子发票(普通发票)"]),
                no=rng.choice(["发票号码:", "发票号码：", "No."]),
                date=rng.choice(["开票日期:", "日期:", "开票日期："]),
                payee=rng.choice(["收款方:", "销售方名称:", "收款人:", "收款单位:"]),
                buyer=rng.choice(["购买方名称:", "付款方:"]),
                total=rng.choice(["价税合计(小写):", "合计金额:", "金额:", "总计:"]),
                sub="小计:", tax="税额", item="项目名称", qty="数量", price="单价", amt="金额")


def layout_header(pg, f, L, lang, rng, s):
    W = pg.img.width
    x0, y = int(W * 0.08), int(s * 2)
    pg.text(x0, y, f["payee"], int(s * 1.6))
    y += int(s * 2.6)
    pg.text(x0, y, L["title"], int(s * 1.3))
    y += int(s * 2.2)
    for a, b in ((L["no"], f["invoice_no"]), (L["date"], f["date_txt"]), (L["payee"], f["payee"]),
                 (L["buyer"], f["buyer"])):
        pg.text(x0, y, f"{a} {b}", s)
        y += int(s * 1.7)
    y += s
    for name, q, p in f["items"]:
        pg.row(y, [(x0, name), (int(W * 0.5), str(q)), (int(W * 0.68), money(rng, q * p, "", lang))], s)
        y += int(s * 1.6)
    y += s
    pg.text(x0, y, f"{L['sub']} {money(rng, f['sub'], f['sym'], lang)}", s)
    y += int(s * 1.6)
    pg.text(x0, y, f"{L['total']} {money(rng, f['total'], f['sym'], lang)}", int(s * 1.15))
    return y


def layout_table(pg, f, L, lang, rng, s):
    W = pg.img.width
    x0, x1 = int(W * 0.07), int(W * 0.93)
    y = int(s * 2)
    pg.text(x0, y, L["title"], int(s * 1.5))
    y += int(s * 2.5)
    pg.text(x0, y, f"{L['payee']} {f['payee']}", s)
    y += int(s * 1.7)
    pg.text(x0, y, f"{L['no']} {f['invoice_no']}", s)
    y += int(s * 1.7)
    pg.text(x0, y, f"{L['date']} {f['date_txt']}", s)
    y += int(s * 2.2)
    cols = [x0, int(W * 0.45), int(W * 0.58), int(W * 0.75), x1]
    rows = [(L["item"], L["qty"], L["price"], L["amt"])]
    rows += [(n, str(q), money(rng, p, "", lang), money(rng, q * p, "", lang)) for n, q, p in f["items"]]
    rh = int(s * 1.8)
    top = y
    for r in rows:
        pg.row(y + int(s * 0.35), [(cols[i] + int(s * 0.3), r[i]) for i in range(4)], s)
        y += rh
    for i in range(len(rows) + 1):
        pg.d.line([(x0, top + i * rh), (x1, top + i * rh)], fill="black", width=2)
    for c in cols:
        pg.d.line([(c, top), (c, top + len(rows) * rh)], fill="black", width=2)
    y += s
    pg.text(cols[2], y, f"{L['total']} {money(rng, f['total'], f['sym'], lang)}", s)
    return y


def layout_twocol(pg, f, L, lang, rng, s):
    W = pg.img.width
    xl, xr = int(W * 0.07), int(W * 0.55)
    y = int(s * 2)
    pg.text(xl, y, L["title"], int(s * 1.6))
    y += int(s * 3)
    pg.row(y, [(xl, f"{L['payee']} {f['payee']}"), (xr, f"{L['no']} {f['invoice_no']}")], s)
    y += int(s * 1.8)
    pg.row(y, [(xl, f"{L['buyer']} {f['buyer']}"), (xr, f"{L['date']} {f['date_txt']}")], s)
    y += int(s * 3)
    for name, q, p in f["items"]:
        pg.row(y, [(xl, f"{name} x{q}"), (xr, money(rng, q * p, f["sym"], lang))], s)
        y += int(s * 1.6)
    y += s
    pg.row(y, [(xl, L["total"].rstrip(":：")), (xr, money(rng, f["total"], f["sym"], lang))], int(s * 1.1))
    return y


def layout_vat(pg, f, L, lang, rng, s):
    """A Chinese VAT invoice form: code and number at the top right, buyer and seller boxes."""
    W = pg.img.width
    x0, x1 = int(W * 0.05), int(W * 0.95)
    y = int(s * 1.5)
    pg.text(int(W * 0.3), y, "增值税普通发票", int(s * 1.6))
    y += int(s * 2.6)
    code = str(rng.randint(10 ** 11, 10 ** 12 - 1))
    pg.text(int(W * 0.58), y, f"发票代码: {code}", s)
    y += int(s * 1.6)
    pg.text(int(W * 0.58), y, f"{L['no'] if L['no'] != 'No.' else '发票号码:'} {f['invoice_no']}", s)
    y += int(s * 1.6)
    pg.text(int(W * 0.58), y, f"{L['date']} {f['date_txt']}", s)
    y += int(s * 2)
    top = y
    pg.text(x0 + s // 2, y + s // 2, f"购买方名称: {f['buyer']}", s)
    y += int(s * 2.2)
    pg.d.rectangle([x0, top, x1, y], outline="black", width=2)
    top = y
    for name, q, p in f["items"]:
        pg.row(y + s // 2, [(x0 + s // 2, name), (int(W * 0.5), str(q)),
                            (int(W * 0.72), money(rng, q * p, "", lang))], s)
        y += int(s * 1.6)
    y += s // 2
    pg.d.rectangle([x0, top, x1, y], outline="black", width=2)
    top = y
    pg.row(y + s // 2, [(x0 + s // 2, f"价税合计(大写) {zh_upper(f['total'])}"),
                        (int(W * 0.66), f"(小写) {money(rng, f['total'], f['sym'], lang)}")], s)
    y += int(s * 2.2)
    pg.d.rectangle([x0, top, x1, y], outline="black", width=2)
    top = y
    pg.text(x0 + s // 2, y + s // 2, f"销售方名称: {f['payee']}", s)
    y += int(s * 2.2)
    pg.d.rectangle([x0, top, x1, y], outline="black", width=2)
    return y


def layout_receipt(pg, f, L, lang, rng, s):
    """A till receipt: one narrow centred column, dashed rules, items with quantity x price."""
    W = pg.img.width
    s = int(s * 0.9)
    x0, x1 = int(W * rng.uniform(0.25, 0.32)), int(W * rng.uniform(0.68, 0.75))
    y = int(s * 2)

    def centred(t, size):
        bb = pg.d.textbbox((0, 0), t, font=pg.font(size))
        pg.text((x0 + x1 - (bb[2] - bb[0])) // 2, y, t, size)

    def rule():
        for x in range(x0, x1, s):
            pg.d.line([(x, y + s // 2), (x + s // 2, y + s // 2)], fill="black", width=2)

    centred(f["payee"], int(s * 1.2))
    y += int(s * 2)
    centred(L["title"], s)
    y += int(s * 1.8)
    pg.text(x0, y, f"{L['no']} {f['invoice_no']}", s)
    y += int(s * 1.5)
    pg.text(x0, y, f"{L['date']} {f['date_txt']}", s)
    y += int(s * 1.5)
    rule()
    y += int(s * 1.5)
    for name, q, p in f["items"]:
        pg.text(x0, y, name, s)
        y += int(s * 1.4)
        amt = money(rng, q * p, "", lang)
        bb = pg.d.textbbox((0, 0), amt, font=pg.font(s))
        pg.row(y, [(x0 + s, f"{q} x {money(rng, p, '', lang)}"), (x1 - (bb[2] - bb[0]), amt)], s)
        y += int(s * 1.6)
    rule()
    y += int(s * 1.5)
    pg.text(x0, y, f"{L['total']} {money(rng, f['total'], f['sym'], lang)}", int(s * 1.1))
    y += int(s * 2)
    centred("THANK YOU" if lang == "en" else "谢谢惠顾", s)
    return y


def stamp(pg, rng, lang, s):
    """A red round stamp over part of the page (not recorded as text: it is not a field)."""
    W, H = pg.img.size
    r = int(s * rng.uniform(3, 4.5))
    cx, cy = int(W * rng.uniform(0.55, 0.8)), int(H * rng.uniform(0.1, 0.45))
    over = Image.new("RGBA", pg.img.size, (0, 0, 0, 0))
    od = ImageDraw.Draw(over)
    red = (210, 30, 30, rng.randint(120, 190))
    od.ellipse([cx - r, cy - r, cx + r, cy + r], outline=red, width=max(3, s // 6))
    word = "发票专用章" if lang == "zh" else "PAID"
    fnt = pg.font(int(s * 1.1))
    bb = od.textbbox((0, 0), word, font=fnt)
    od.text((cx - (bb[2] - bb[0]) // 2, cy - (bb[3] - bb[1]) // 2), word, font=fnt, fill=red)
    od.regular_polygon((cx, cy - r // 2, s // 2), 5, fill=red)
    pg.img = Image.alpha_composite(pg.img.convert("RGBA"), over).convert("RGB")


def solve(a, b):
    """Gaussian elimination for the 8x8 perspective system (no numpy)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                k = m[r][c] / m[c][c]
                m[r] = [m[r][j] - k * m[c][j] for j in range(n + 1)]
    return [m[i][n] / m[i][i] for i in range(n)]


def perspective(img, rng, amount):
    W, H = img.size
    j = lambda: rng.uniform(0, amount) * min(W, H)
    dst = [(j(), j()), (W - j(), j()), (W - j(), H - j()), (j(), H - j())]
    src = [(0, 0), (W, 0), (W, H), (0, H)]
    a, b = [], []
    for (x, y), (u, v) in zip(dst, src):  # maps output (x, y) to input (u, v)
        a.append([x, y, 1, 0, 0, 0, -u * x, -u * y]); b.append(u)
        a.append([0, 0, 0, x, y, 1, -v * x, -v * y]); b.append(v)
    coef = solve(a, b)
    bg = rng.randint(90, 160)
    return img.transform(img.size, Image.PERSPECTIVE, coef, Image.BICUBIC, fillcolor=(bg, bg, bg))


def uneven_light(img, rng):
    """Light falling off across the page, as in a photo taken under a desk lamp."""
    W, H = img.size
    g = Image.linear_gradient("L").resize((512, 512), Image.BILINEAR)
    g = g.rotate(rng.uniform(0, 360), resample=Image.BICUBIC).crop((128, 128, 384, 384))
    g = g.resize((W, H), Image.BILINEAR)  # the centre of the turned ramp: no corners left
    lo = rng.randint(150, 200)  # the darkest corner keeps lo/255 of the light
    g = g.point(lambda v: lo + (255 - lo) * v // 255)
    return ImageChops.multiply(img, Image.merge("RGB", (g, g, g)))


def degrade(img, rng):
    info = {}
    r = rng.random()
    if r < 0.35:
        info["perspective"] = round(rng.uniform(0.01, 0.05), 3)
        img = perspective(img, rng, info["perspective"])
    elif r < 0.5:  # a phone photo: strong keystone and uneven light
        info["perspective"] = round(rng.uniform(0.05, 0.09), 3)
        img = perspective(img, rng, info["perspective"])
        img = uneven_light(img, rng)
        info["light"] = "uneven"
    ang = rng.uniform(-3, 3) if rng.random() < 0.6 else 0.0
    if ang:
        img = img.rotate(ang, resample=Image.BICUBIC, expand=True, fillcolor="white")
    info["skew_deg"] = round(ang, 2)
    scale = rng.choice([1.0, 1.0, 0.85, 0.7])
    if scale != 1.0:
        img = img.resize((int(img.width * scale), int(img.height * scale)), Image.LANCZOS)
    info["scale"] = scale
    blur = rng.choice([0, 0, 0.6, 1.0])
    if blur:
        img = img.filter(ImageFilter.GaussianBlur(blur))
    info["blur"] = blur
    if rng.random() < 0.5:
        sigma = rng.randint(8, 30)
        noise = Image.frombytes("L", img.size, rng.randbytes(img.width * img.height))
        noise = noise.point(lambda v: 128 + (v - 128) * sigma // 128).convert("RGB")
        img = Image.blend(img, noise, 0.15)
        info["noise"] = sigma
    return img, info


LAYOUTS = {"header": layout_header, "table": layout_table, "twocol": layout_twocol,
           "receipt": layout_receipt, "vat": layout_vat}


def covers(font, text):
    """Whether font has a glyph for every character of text (a missing one draws as .notdef)."""
    notdef = font.getmask("\U0010fffd")
    nd = (notdef.size, bytes(notdef))
    for ch in set(text):
        if ch.isspace():
            continue
        m = font.getmask(ch)
        if (m.size, bytes(m)) == nd:
            return False
    return True


def draw_page(idx, lang, seed, font_path, font_idx):
    rng = random.Random(seed * 1000003 + idx * 2 + (lang == "zh"))
    f = make_fields(rng, lang)
    L = labels(lang, rng)
    layout = rng.choice(["header", "table", "twocol", "receipt"] +
                        (["vat", "vat"] if lang == "zh" else []))
    W, H = 1240, 1754  # A4 at 150 dpi
    s = rng.randint(24, 32)
    pg = Page(W, H, font_path, font_idx)
    LAYOUTS[layout](pg, f, L, lang, rng, s)
    return rng, f, layout, s, pg


def make_page(idx, lang, seed, fonts_all, fonts_cjk, out):
    # the font from its own stream; the page's content and distortions do not depend on it
    fonts = list(fonts_cjk if lang == "zh" else fonts_all)
    random.Random(f"font-{seed}-{idx}-{lang}").shuffle(fonts)
    for font_path, font_idx in fonts:
        rng, f, layout, s, pg = draw_page(idx, lang, seed, font_path, font_idx)
        word = "发票专用章" if lang == "zh" else "PAID"
        if covers(pg.font(24), pg.truth_text() + word):
            break
    else:
        sys.exit(f"gen_invoices: no installed font draws every character of {lang}-{idx:04d}")
    stamped = rng.random() < 0.35
    if stamped:
        stamp(pg, rng, lang, s)
    img, info = degrade(pg.img, rng)
    fmt = rng.choice(["png", "jpg", "jpg", "webp"])
    name = f"{lang}-{idx:04d}"
    path = os.path.join(out, f"{name}.{fmt}")
    q = rng.randint(45, 92)
    if fmt == "png":
        img.convert("L").save(path, optimize=False)
    elif fmt == "jpg":
        img.save(path, quality=q)
    else:
        img.save(path, quality=q, method=4)
    truth = dict(file=os.path.basename(path), lang=lang, invoice_no=f["invoice_no"], date=f["date"],
                 amount=f"{f['total']:.2f}", currency=f["currency"], payee=f["payee"],
                 text=pg.truth_text(),
                 made=dict(font=os.path.basename(font_path), layout=layout, stamp=stamped,
                           format=fmt, quality=q if fmt != "png" else None, **info))
    with open(os.path.join(out, f"{name}.json"), "w", encoding="utf-8") as fh:
        json.dump(truth, fh, ensure_ascii=False, indent=1)


def main():
    ap = argparse.ArgumentParser(description="evaluation invoices (evaluation only, never tuned on)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-en", type=int, default=20)
    ap.add_argument("--n-zh", type=int, default=20)
    ap.add_argument("--seed", type=int, default=2024)
    a = ap.parse_args()
    fonts_all, fonts_cjk = find_fonts()
    if not fonts_cjk or not fonts_all:
        sys.exit("gen_invoices: no usable fonts (install the packages listed at the top)")
    os.makedirs(a.out, exist_ok=True)
    for i in range(a.n_en):
        make_page(i, "en", a.seed, fonts_all, fonts_cjk, a.out)
    for i in range(a.n_zh):
        make_page(i, "zh", a.seed, fonts_all, fonts_cjk, a.out)
    print(f"gen_invoices: {a.n_en} en + {a.n_zh} zh pages in {a.out} "
          f"({len(fonts_all)} fonts, {len(fonts_cjk)} CJK)")


if __name__ == "__main__":
    main()
