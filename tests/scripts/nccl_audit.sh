#!/usr/bin/env bash
# libzcoll_nccl_audit.so (nccl/audit): under LD_AUDIT, every load of NCCL by basename loads the
# target instead — a DT_NEEDED found through DT_RPATH, LD_LIBRARY_PATH, a dlopen by full path,
# versioned and unversioned names, a dlopen + dlsym by full path (which LD_PRELOAD does not
# reach) — and nothing else is touched (libnccl-net.so). Without LD_AUDIT the same programs load
# the stand-in "pip NCCL", so each case can fail. The module
# finds its target beside itself, or at ZCOLL_NCCL_LIBRARY; a missing target is said and
# nothing is redirected; ZCOLL_NCCL_AUDIT_DEBUG logs once. No torch, no GPU: stub libraries.
set -euo pipefail
module="$ZCOLL_BUILD_DIR/nccl/libzcoll_nccl_audit.so"
[[ -f "$module" ]] || { echo "FAIL: $module was not built"; exit 1; }
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
checked=0
fail() { echo "FAIL: $*"; failed=1; }

# Stand-ins: pip's NCCL (SONAME libnccl.so.2) under several names, a net plugin, and two targets.
mkdir -p "$tmp/pip" "$tmp/inst" "$tmp/other"
echo 'int ncclGetVersion(int* v) { *v = 1; return 0; }' > "$tmp/stub.c"
"$cc" -shared -fPIC -o "$tmp/pip/libnccl.so.2" -Wl,-soname,libnccl.so.2 "$tmp/stub.c"
for name in libnccl.so libnccl.so.2.30.7 libnccl-net.so; do cp "$tmp/pip/libnccl.so.2" "$tmp/pip/$name"; done
cp "$module" "$tmp/inst/"                       # an install: the module and its target side by side
cp "$tmp/pip/libnccl.so.2" "$tmp/inst/libzcoll_nccl.so"
cp "$tmp/pip/libnccl.so.2" "$tmp/other/libzcoll_nccl.so"
audit="$tmp/inst/libzcoll_nccl_audit.so"

# probe: prints the path of every loaded object whose name has "nccl" (its own DT_NEEDED's
# included), after dlopen-ing each argument.
cat > "$tmp/probe.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
static int show(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size; (void)data;
  if (strstr(info->dlpi_name, "nccl") != NULL && strstr(info->dlpi_name, "audit") == NULL)
    printf("%s\n", info->dlpi_name);
  return 0;
}
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (dlopen(argv[i], RTLD_NOW | RTLD_LOCAL) == NULL) printf("dlopen failed: %s\n", dlerror());
  dl_iterate_phdr(show, NULL);
  return 0;
}
C
"$cc" -o "$tmp/probe_open" "$tmp/probe.c" -ldl
# probe_sym: dlopen(argv[1]) + dlsym("ncclGetVersion"), as a plugin that loads NCCL itself does;
# prints the file the function lives in.
cat > "$tmp/probe_sym.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char** argv) {
  void* h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
  void* f = h != NULL ? dlsym(h, "ncclGetVersion") : NULL;
  Dl_info info;
  if (f == NULL || dladdr(f, &info) == 0) { printf("not found\n"); return 1; }
  printf("%s\n", info.dli_fname);
  return 0;
}
C
"$cc" -o "$tmp/probe_sym" "$tmp/probe_sym.c" -ldl
# DT_NEEDED libnccl.so.2 found through DT_RPATH (what libtorch_cuda.so has).
"$cc" -o "$tmp/probe_needs" "$tmp/probe.c" -ldl -Wl,--no-as-needed "$tmp/pip/libnccl.so.2" \
  -Wl,--disable-new-dtags,-rpath,"$tmp/pip"
readelf -d "$tmp/probe_needs" | grep -q "(RPATH).*$tmp/pip" || fail "probe_needs has no DT_RPATH"
# torch's order: pip's NCCL dlopen-ed by full path first, then a library whose DT_NEEDED
# libnccl.so.2 (DT_RPATH) matches the loaded object by SONAME, with no search at all.
echo 'int torchlike(void) { return 0; }' > "$tmp/torchlike.c"
"$cc" -shared -fPIC -o "$tmp/libtorchlike.so" "$tmp/torchlike.c" -Wl,--no-as-needed \
  "$tmp/pip/libnccl.so.2" -Wl,--disable-new-dtags,-rpath,"$tmp/pip"

expect() {  # expect <what> <expected output> <command...>
  local what=$1 want=$2; shift 2
  local got
  got=$("$@" 2>"$tmp/stderr") || { fail "$what: exit status $?"; return; }
  [[ "$got" == "$want" ]] || fail "$what: loaded '$got', expected '$want'"
  checked=$((checked + 1))
}
pip=$tmp/pip
target=$tmp/inst/libzcoll_nccl.so
expect "no audit, DT_NEEDED via DT_RPATH" "$pip/libnccl.so.2" "$tmp/probe_needs"
expect "no audit, LD_LIBRARY_PATH elsewhere" "$pip/libnccl.so.2" env LD_LIBRARY_PATH="$tmp/other" "$tmp/probe_needs"
expect "no audit, full path" "$pip/libnccl.so.2" "$tmp/probe_open" "$pip/libnccl.so.2"
expect "audit, DT_NEEDED via DT_RPATH" "$target" env LD_AUDIT="$audit" "$tmp/probe_needs"
expect "audit, DT_NEEDED with LD_LIBRARY_PATH" "$target" \
  env LD_AUDIT="$audit" LD_LIBRARY_PATH="$pip" "$tmp/probe_needs"
expect "audit, full path" "$target" env LD_AUDIT="$audit" "$tmp/probe_open" "$pip/libnccl.so.2"
expect "no audit, torch's order" "$pip/libnccl.so.2" \
  "$tmp/probe_open" "$pip/libnccl.so.2" "$tmp/libtorchlike.so"
expect "audit, torch's order (an exact-name audit misses it)" "$target" \
  env LD_AUDIT="$audit" "$tmp/probe_open" "$pip/libnccl.so.2" "$tmp/libtorchlike.so"
expect "audit, libnccl.so" "$target" env LD_AUDIT="$audit" "$tmp/probe_open" "$pip/libnccl.so"
expect "audit, libnccl.so.2.30.7" "$target" env LD_AUDIT="$audit" "$tmp/probe_open" "$pip/libnccl.so.2.30.7"
expect "audit, by name through LD_LIBRARY_PATH" "$target" \
  env LD_AUDIT="$audit" LD_LIBRARY_PATH="$pip" "$tmp/probe_open" libnccl.so.2
# dlopen by full path + dlsym: LD_PRELOAD does not reach it (the handle is pip's file), LD_AUDIT does.
expect "LD_PRELOAD, full-path dlopen + dlsym (pip's function)" "$pip/libnccl.so.2" \
  env LD_PRELOAD="$target" "$tmp/probe_sym" "$pip/libnccl.so.2"
expect "audit, full-path dlopen + dlsym" "$target" env LD_AUDIT="$audit" "$tmp/probe_sym" "$pip/libnccl.so.2"
expect "LD_PRELOAD, dlopen by name + dlsym" "$target" env LD_PRELOAD="$target" "$tmp/probe_sym" libnccl.so.2
expect "audit, a net plugin untouched" "$pip/libnccl-net.so" \
  env LD_AUDIT="$audit" "$tmp/probe_open" "$pip/libnccl-net.so"
expect "audit, ZCOLL_NCCL_LIBRARY" "$tmp/other/libzcoll_nccl.so" \
  env LD_AUDIT="$audit" ZCOLL_NCCL_LIBRARY="$tmp/other/libzcoll_nccl.so" "$tmp/probe_needs"
[[ ! -s "$tmp/stderr" ]] || fail "stderr without ZCOLL_NCCL_AUDIT_DEBUG: $(cat "$tmp/stderr")"

# A missing target: said once on stderr, nothing redirected.
expect "audit, missing target" "$pip/libnccl.so.2" \
  env LD_AUDIT="$audit" ZCOLL_NCCL_LIBRARY="$tmp/none.so" "$tmp/probe_needs" "$pip/libnccl.so.2"
grep -q "zcoll_nccl_audit: $tmp/none.so is not readable" "$tmp/stderr" &&
  [[ $(wc -l < "$tmp/stderr") -eq 1 ]] || fail "missing target not said once: $(cat "$tmp/stderr")"

# ZCOLL_NCCL_AUDIT_DEBUG: one line for two redirected searches.
expect "audit, debug" "$target" \
  env LD_AUDIT="$audit" ZCOLL_NCCL_AUDIT_DEBUG=1 "$tmp/probe_needs" "$pip/libnccl.so.2.30.7"
[[ "$(cat "$tmp/stderr")" == "zcoll_nccl_audit: libnccl.so.2 (as asked) -> $target" ]] ||
  fail "debug log: '$(cat "$tmp/stderr")'"

# The build tree's module finds the build's libzcoll_nccl.so beside it.
if [[ -f "$ZCOLL_BUILD_DIR/nccl/libzcoll_nccl.so" ]]; then
  expect "build tree's module" "$ZCOLL_BUILD_DIR/nccl/libzcoll_nccl.so" \
    env LD_AUDIT="$module" "$tmp/probe_needs"
fi

exports=$(nm -D --defined-only "$module" | awk '{print $3}' | sort | tr '\n' ' ')
[[ "$exports" == "la_objsearch la_version " ]] || fail "module exports: $exports"

[[ $failed -eq 0 ]] || exit 1
echo "OK: $checked loads went where expected (5 of them to the stand-in pip NCCL: without LD_AUDIT, or a full-path dlopen under LD_PRELOAD);" \
  "the module exports la_objsearch and la_version only"
