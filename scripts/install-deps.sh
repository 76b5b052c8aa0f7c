#!/bin/sh
# Installs the Debian 12 packages frugal needs to build and test. Idempotent; needs root (or sudo).
set -e
PKGS="build-essential pkg-config clang libclang-rt-14-dev
      libopenblas-dev libpcre2-dev libutf8proc-dev libcjson-dev
      libmicrohttpd-dev libsqlite3-dev sqlite3 libcurl4-openssl-dev zlib1g-dev
      prometheus curl
      libtesseract-dev tesseract-ocr-eng tesseract-ocr-chi-sim tesseract-ocr-osd libleptonica-dev
      libpng-dev libjpeg-dev libwebp-dev libtiff-dev libcairo2-dev fonts-dejavu-core fonts-noto-cjk
      libpocketsphinx-dev libsphinxbase-dev pocketsphinx-en-us libsndfile1-dev libsamplerate0-dev espeak-ng"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "installing:$missing"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi
# Node.js (for the official `openai` client in the serving tests): the machine's own if present.
if ! command -v node >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
fi
