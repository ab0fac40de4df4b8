"""torch's binding to NCCL, and the three ways of putting libzcoll_nccl.so under it.

Each case runs a child `python3 -c "import torch; ..."` with one environment and reads back, from
inside that process: the NCCL files mapped (/proc/self/maps), the NCCL version torch reads at run
time (ProcessGroupNCCL.get_runtime_nccl_version, which calls ncclGetVersion; torch.cuda.nccl.version()
is the version of the header torch was compiled with and never changes), and whether
torch.cuda.nccl.unique_id() is zcoll's: an id zcoll made is the address of a live zcoll rendezvous
root, which zcollCommInitRank (libzcoll.so, one rank) joins; NCCL's id has another layout and is
refused. Cases:
  plain          torch's own NCCL (pip's): the baseline every other case must differ from
  LD_PRELOAD     zcoll's id and version; pip's NCCL is also mapped (torch dlopens it by full path)
                 but no call reaches it
  LD_AUDIT       exactly one NCCL mapped, zcoll's; the first search it redirected was pip's full path
  LD_LIBRARY_PATH a folder whose libnccl.so.2 is zcoll's: ignored, torch runs on pip's NCCL, both
                 through `import torch` (the full-path dlopen) and through libtorch_cuda.so's
                 DT_NEEDED alone (its DT_RPATH is searched before LD_LIBRARY_PATH)
Exits 77 (skipped, with the reason) when torch is not a CUDA build or the library was not built.
"""
import json
import os
import subprocess
import sys
import tempfile

BUILD = os.environ["ZCOLL_BUILD_DIR"]
LIB = os.path.join(BUILD, "nccl", "libzcoll_nccl.so")
AUDIT = os.path.join(BUILD, "nccl", "libzcoll_nccl_audit.so")
LIBZCOLL = os.path.join(BUILD, "libzcoll.so")

# Runs in the child: one JSON line on stdout.
PROBE = r"""
import ctypes, json, os, sys
how = sys.argv[1]
out = {}
if how == "dt_needed_only":
    import importlib.util
    torch_dir = os.path.dirname(importlib.util.find_spec("torch").origin)
    ctypes.CDLL(os.path.join(torch_dir, "lib", "libtorch_cuda.so"))
else:
    import torch
    P = torch._C._distributed_c10d.ProcessGroupNCCL
    out["runtime_version"] = list(P.get_runtime_nccl_version())
    out["build_version"] = list(torch.cuda.nccl.version())
    uid = torch.cuda.nccl.unique_id()
    z = ctypes.CDLL(sys.argv[2])
    class Id(ctypes.Structure):
        _fields_ = [("b", ctypes.c_ubyte * 128)]
    zid = Id()
    ctypes.memmove(zid.b, uid, 128)
    comm = ctypes.c_void_p()
    rc = z.zcollCommInitRank(ctypes.byref(comm), 1, zid, 0)
    out["zcoll_joined_id"] = rc == 0
    if rc == 0:
        z.zcollCommDestroy(comm)
with open("/proc/self/maps") as f:
    paths = {l.split()[-1] for l in f if l.rstrip().endswith(".so") or ".so." in l}
out["nccl_mapped"] = sorted(os.path.realpath(p) for p in paths
                            if "nccl" in os.path.basename(p) and "audit" not in p)
if len(sys.argv) > 3:  # the library's own answer (loaded here, after the maps were read)
    v = ctypes.c_int()
    ctypes.CDLL(sys.argv[3]).ncclGetVersion(ctypes.byref(v))
    out["lib_version"] = v.value
print(json.dumps(out))
"""


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(77)


def run(name, env_extra, how="torch", with_lib=True):
    env = dict(os.environ)
    env.setdefault("ZCOLL_TIMEOUT", "20")
    env.update(env_extra)
    args = [sys.executable, "-c", PROBE, how, LIBZCOLL] + ([LIB] if with_lib else [])
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError(f"{name}: exit {p.returncode}\n{p.stderr[-3000:]}")
    result = json.loads(p.stdout.strip().splitlines()[-1])
    result["stderr"] = p.stderr
    print(f"{name}: " + json.dumps({k: v for k, v in result.items() if k != "stderr"}))
    return result


def version_tuple(code):
    # NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9 (major*1000 + ... before).
    return [code // 10000, (code % 10000) // 100, code % 100] if code >= 10000 else \
           [code // 1000, (code % 1000) // 100, code % 100]


def main():
    try:
        import torch
    except ImportError as e:
        skip(f"torch does not import: {e}")
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
    if torch.version.cuda is None or not os.path.exists(torch_lib):
        skip(f"torch {torch.__version__} is not a CUDA build (no libtorch_cuda.so)")
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        cache = f.read()
    if "ZCOLL_BUILD_NCCL:BOOL=OFF" in cache or "ZCOLL_NCCL_H-NOTFOUND" in cache:
        skip("libzcoll_nccl.so is not part of this build (ZCOLL_BUILD_NCCL=OFF or no nccl.h)")
    for path in (LIB, AUDIT, LIBZCOLL):
        if not os.path.exists(path):
            skip(f"{path} was not built")
    zcoll_lib = os.path.realpath(LIB)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    plain = run("plain", {})
    pip_nccl = [p for p in plain["nccl_mapped"] if p != zcoll_lib]
    check(len(pip_nccl) == 1 and plain["nccl_mapped"] == pip_nccl,
          f"plain: expected torch's own NCCL alone, got {plain['nccl_mapped']}")
    check(not plain["zcoll_joined_id"], "plain: zcoll joined NCCL's own id: the id check is void")
    lib_version = version_tuple(plain["lib_version"])

    pre = run("LD_PRELOAD", {"LD_PRELOAD": LIB})
    check(pre["zcoll_joined_id"], "LD_PRELOAD: torch.cuda.nccl.unique_id() is not zcoll's")
    check(pre["runtime_version"] == lib_version,
          f"LD_PRELOAD: torch's runtime NCCL version {pre['runtime_version']} is not the library's {lib_version}")
    check(zcoll_lib in pre["nccl_mapped"], "LD_PRELOAD: libzcoll_nccl.so not mapped")
    check(pre["build_version"] == plain["build_version"],
          "torch.cuda.nccl.version() changed with the library: it is not the header's version")

    aud = run("LD_AUDIT", {"LD_AUDIT": AUDIT, "ZCOLL_NCCL_AUDIT_DEBUG": "1"})
    check(aud["nccl_mapped"] == [zcoll_lib],
          f"LD_AUDIT: expected exactly zcoll's library mapped, got {aud['nccl_mapped']}")
    check(aud["zcoll_joined_id"], "LD_AUDIT: torch.cuda.nccl.unique_id() is not zcoll's")
    check(aud["runtime_version"] == lib_version, f"LD_AUDIT: runtime version {aud['runtime_version']}")
    # The module's one debug line names the first search it redirected: torch's full path.
    said = [l for l in aud["stderr"].splitlines() if l.startswith("zcoll_nccl_audit: ")]
    asked = said[0][len("zcoll_nccl_audit: "):].split(" (as asked) -> ")[0] if said else ""
    check(len(said) == 1 and pip_nccl and os.path.realpath(asked) == pip_nccl[0],
          f"LD_AUDIT: expected one line redirecting torch's full path {pip_nccl}, got {said}")

    with tempfile.TemporaryDirectory() as folder:
        os.symlink(LIB, os.path.join(folder, "libnccl.so.2"))
        llp = run("LD_LIBRARY_PATH", {"LD_LIBRARY_PATH": folder})
        check(llp["nccl_mapped"] == pip_nccl,
              f"LD_LIBRARY_PATH: expected pip's NCCL alone, got {llp['nccl_mapped']}")
        check(not llp["zcoll_joined_id"], "LD_LIBRARY_PATH: the id is zcoll's")
        check(llp["runtime_version"] == plain["runtime_version"],
              f"LD_LIBRARY_PATH: runtime version {llp['runtime_version']}")
        rpath = run("LD_LIBRARY_PATH, libtorch_cuda.so's DT_NEEDED alone",
                    {"LD_LIBRARY_PATH": folder}, how="dt_needed_only")
        check(rpath["nccl_mapped"] == pip_nccl,
              f"DT_NEEDED with LD_LIBRARY_PATH: expected pip's NCCL, got {rpath['nccl_mapped']}")

    if failures:
        print("FAIL:\n" + "\n".join(failures))
        sys.exit(1)
    both = "also" if any(p != zcoll_lib for p in pre["nccl_mapped"]) else "not"
    print(f"OK: torch {torch.__version__}: LD_PRELOAD and LD_AUDIT give zcoll's id and version "
          f"{lib_version} (pip's NCCL is {both} mapped under LD_PRELOAD, never under LD_AUDIT); "
          f"LD_LIBRARY_PATH leaves pip's NCCL {plain['runtime_version']}")


if __name__ == "__main__":
    main()
