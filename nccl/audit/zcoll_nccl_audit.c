/* libzcoll_nccl_audit.so: an LD_AUDIT module (rtld-audit(7)) that makes every load of NCCL load
 * libzcoll_nccl.so instead.
 *
 *   LD_AUDIT=/usr/lib/libzcoll_nccl_audit.so python train.py
 *
 * The dynamic linker calls la_objsearch() with each name it is about to look for: first the name
 * as asked (a DT_NEEDED entry, or dlopen's argument, which may be a full path), then each path
 * it builds from LD_LIBRARY_PATH, DT_RPATH/DT_RUNPATH, the ldconfig cache and the default
 * directories. Whenever the name's basename is NCCL's (libnccl.so, libnccl.so.2,
 * libnccl.so.2.30.7, ...), whatever directory it carries, this module answers with
 * libzcoll_nccl.so's path. Matching the basename, not the whole name, is the point: torch loads
 * pip's NCCL by full path (ctypes.CDLL(".../nvidia/nccl/lib/libnccl.so.2")) before its own
 * DT_NEEDED is resolved, so a module that only rewrites the exact name "libnccl.so.2" never sees
 * the load it needed to catch (docs/NCCL.md, "Ways in").
 *
 * The target: ZCOLL_NCCL_LIBRARY when set (a path), else libzcoll_nccl.so in this module's own
 * directory (they are built and installed side by side). A missing target is said on stderr
 * once and nothing is redirected, so the program runs on the NCCL it would have loaded.
 * ZCOLL_NCCL_AUDIT_DEBUG (any non-empty value): the first redirection is said on stderr.
 *
 * The module runs inside the dynamic linker's lock, in an audit namespace of its own: it keeps
 * to getenv, dladdr, access and write, and allocates nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ZCOLL_AUDIT_EXPORT __attribute__((visibility("default")))

static const char kTargetName[] = "libzcoll_nccl.so";

enum target_state { TARGET_UNKNOWN, TARGET_FOUND, TARGET_MISSING };

static enum target_state g_state = TARGET_UNKNOWN;
static char g_target[4096];
static int g_logged;

static void say(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
  (void)ignored;
}

static int env_set(const char* name) {
  const char* v = getenv(name);
  return v != NULL && v[0] != '\0';
}

/* Whether `base` is NCCL's library name: "libnccl.so" alone or followed by ".<digits>..." (so
 * libnccl-net.so, NCCL's network plugins, and libnccl_static.a are not). */
static int is_nccl_basename(const char* base) {
  static const char kStem[] = "libnccl.so";
  const size_t n = sizeof(kStem) - 1;
  if (strncmp(base, kStem, n) != 0) return 0;
  for (const char* p = base + n; *p != '\0'; ++p)
    if (*p != '.' && (*p < '0' || *p > '9')) return 0;
  return base[n] == '\0' || (base[n] == '.' && base[n + 1] != '\0');
}

static const char* basename_of(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

/* g_target := ZCOLL_NCCL_LIBRARY, or kTargetName beside this module. */
static int locate_target(void) {
  const char* forced = getenv("ZCOLL_NCCL_LIBRARY");
  if (forced != NULL && forced[0] != '\0') {
    return snprintf(g_target, sizeof(g_target), "%s", forced) < (int)sizeof(g_target);
  }
  Dl_info self;
  if (dladdr((const void*)&locate_target, &self) == 0 || self.dli_fname == NULL) return 0;
  const char* slash = strrchr(self.dli_fname, '/');
  const int dir_len = slash != NULL ? (int)(slash - self.dli_fname) : 1;
  const char* dir = slash != NULL ? self.dli_fname : ".";
  return snprintf(g_target, sizeof(g_target), "%.*s/%s", dir_len, dir, kTargetName) <
         (int)sizeof(g_target);
}

static void resolve_target_once(void) {
  if (g_state != TARGET_UNKNOWN) return;
  g_state = locate_target() && access(g_target, R_OK) == 0 ? TARGET_FOUND : TARGET_MISSING;
  if (g_state == TARGET_MISSING) {
    char line[4352];
    snprintf(line, sizeof(line),
             "zcoll_nccl_audit: %s is not readable (set ZCOLL_NCCL_LIBRARY to "
             "libzcoll_nccl.so's path): NCCL is not replaced\n",
             g_target[0] != '\0' ? g_target : kTargetName);
    say(line);
  }
}

static const char* flag_name(unsigned int flag) {
  switch (flag) {
    case LA_SER_ORIG: return "as asked";
    case LA_SER_LIBPATH: return "from LD_LIBRARY_PATH";
    case LA_SER_RUNPATH: return "from DT_RPATH/DT_RUNPATH";
    case LA_SER_CONFIG: return "from the ldconfig cache";
    case LA_SER_DEFAULT: return "from a default directory";
    default: return "from elsewhere";
  }
}

static void log_first_redirect(const char* name, unsigned int flag) {
  if (g_logged || !env_set("ZCOLL_NCCL_AUDIT_DEBUG")) return;
  g_logged = 1;
  char line[8448];
  snprintf(line, sizeof(line), "zcoll_nccl_audit: %s (%s) -> %s\n", name, flag_name(flag),
           g_target);
  say(line);
}

/* The handshake: this module uses la_objsearch only, whose contract is the same in every
 * version of the interface; it takes the linker's version up to the one it was built with. */
ZCOLL_AUDIT_EXPORT unsigned int la_version(unsigned int version) {
  if (version == 0) return 0;
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

ZCOLL_AUDIT_EXPORT char* la_objsearch(const char* name, uintptr_t* cookie, unsigned int flag) {
  (void)cookie;
  if (name == NULL || !is_nccl_basename(basename_of(name))) return (char*)name;
  resolve_target_once();
  if (g_state != TARGET_FOUND) return (char*)name;
  log_first_redirect(name, flag);
  return g_target;
}
