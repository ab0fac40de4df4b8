#!/usr/bin/env bash
# docs/ENVIRONMENT.md is generated from the parameter table (tools/params_markdown.cc): it must
# be byte for byte what `zcoll_info --params-markdown` prints, and it must name every environment
# variable the code reads by a literal name (getenv in the library, os.environ in the Python package).
set -euo pipefail
page=$(realpath "$ZCOLL_SOURCE_DIR/docs/ENVIRONMENT.md")
cd "$ZCOLL_SOURCE_DIR"
read_names=$( { grep -rhoE 'getenv\("[A-Z0-9_]+"\)' src topology cuda python/csrc tools/*.cc nccl/src nccl/audit || true
                grep -rhoE 'os\.environ(\.get)?[[(]"[A-Z0-9_]+"' python/zcoll python/setup.py || true; } |
              grep -oE '"[A-Z0-9_]+"' | tr -d '"' | sort -u)
missing=0
for name in $read_names; do
  if ! grep -q "\`$name\`" "$page"; then
    echo "FAIL: the code reads $name, which docs/ENVIRONMENT.md does not list (add it to the"
    echo "parameter table, src/base/params.cc, or to kOtherVariables in tools/params_markdown.cc)"
    missing=1
  fi
done
[ "$missing" = 0 ]
generated=$(mktemp)
trap 'rm -f "$generated"' EXIT
"$ZCOLL_BUILD_DIR/tools/zcoll_info" --params-markdown > "$generated"
diff -u "$page" "$generated" | head -40 || true
if ! cmp -s "$page" "$generated"; then
  echo "FAIL: docs/ENVIRONMENT.md differs from the parameter table (diff above: - the page, + the"
  echo "table). Regenerate it from the repository root after building:"
  echo "  build/tools/zcoll_info --params-markdown > docs/ENVIRONMENT.md"
  exit 1
fi
echo "OK: docs/ENVIRONMENT.md is the generated page and lists the $(echo $read_names | wc -w) variables read by name"
