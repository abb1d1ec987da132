#!/bin/sh
# Test instrumentation: record the sha256 of the bundle's config.json as this runtime sees it,
# then exec the next runtime. Installed twice, as trace-before (in front of radium-runtime) and
# trace-after (behind it, in front of runc), so a test can prove radium-runtime left it alone.
phase=$(basename "$0")
next=$(cat "$0.next")
prev=""
bundle=""
for arg in "$@"; do
    case "$prev" in --bundle|-b|-bundle) bundle="$arg" ;; esac
    case "$arg" in --bundle=*) bundle="${arg#--bundle=}" ;; esac
    prev="$arg"
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
    sum=$(sha256sum < "$bundle/config.json" | cut -d' ' -f1)
    echo "$phase $sum" >> "$RADIUM_TRACE_DIR/$(basename "$bundle")"
fi
exec "$next" "$@"
