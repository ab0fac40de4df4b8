"""Builds the zcoll torch.distributed backend against the installed torch.

libzcoll.so comes from ZCOLL_BUILD_DIR (default: ../build when it holds libzcoll.so), else it is
built here from this repository's sources with CMake; the extension links against it and finds
it at run time next to itself ($ORIGIN), where the zcoll-core distribution (core/, a
requirement of this one, installed with it) puts it.

This distribution owns the torch files of the zcoll package (zcoll/_torch.py, zeropp.py, ops.py,
fsdp.py, ddp.py, deepspeed.py, the _C extension); zcoll-core owns zcoll/__init__.py, zcoll.core
and libzcoll.so, so no file belongs to both.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    import torch
    from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension
except ImportError as err:  # pip's isolated build environment has no torch
    sys.exit(f"zcoll's torch backend is compiled against the torch it will run with, and this "
             f"build cannot import torch ({err}). Install torch first (pip install "
             f"'torch>=2.11,<2.16'), then build without pip's isolated environment, which "
             f"hides it: pip install --no-build-isolation ./python")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def zcoll_library_dir():
    build = Path(os.environ.get("ZCOLL_BUILD_DIR", REPO / "build"))
    if (build / "libzcoll.so").exists():
        return build
    build = HERE / "build" / "zcoll"
    if not (build / "libzcoll.so").exists():
        subprocess.check_call(["cmake", "-S", str(REPO), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                               "-DZCOLL_WITH_CUDA=OFF", "-DZCOLL_BUILD_TESTS=OFF", "-DZCOLL_BUILD_PERF=OFF"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "zcoll",
                               "-j", str(os.cpu_count() or 2)])
    return build


LIB_DIR = zcoll_library_dir()
# Linked as libzcoll.so, loaded by its SONAME (libzcoll.so.0) through the $ORIGIN rpath.
for name in ("libzcoll.so", "libzcoll.so.0"):
    shutil.copy2(LIB_DIR / "libzcoll.so", HERE / "zcoll" / name)



def with_cuda():
    """CUDA tensors are supported when torch has CUDA and a CUDA toolkit (headers) is installed;
    ZCOLL_TORCH_CUDA=0 or 1 forces the choice."""
    forced = os.environ.get("ZCOLL_TORCH_CUDA")
    if forced is not None:
        return forced == "1"
    return torch.version.cuda is not None and CUDA_HOME is not None


class TorchModulesOnly(build_py):
    """Leaves zcoll/__init__.py to zcoll-core (the subpackages are not listed either)."""

    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir)
                if not (package == "zcoll" and m[1] == "__init__")]

    def run(self):
        super().run()
        # zcoll-core's files must not be in this wheel: libzcoll.so (copied into the package
        # folder above to link against, so setuptools takes it as package data), and anything a
        # build directory from before zcoll-core existed left there (zcoll/__init__.py).
        built = Path(self.build_lib) / "zcoll"
        for name in ("__init__.py", "libzcoll.so", "libzcoll.so.0", "libzcoll_jax.so"):
            (built / name).unlink(missing_ok=True)
        for sub in ("core", "jax"):
            shutil.rmtree(built / sub, ignore_errors=True)


def core_requirement():
    """zcoll-core from this checkout (a direct reference pip builds with this one), or, for a
    wheel meant for an index, ZCOLL_CORE_REQUIREMENT (e.g. "zcoll-core==0.1.0")."""
    return os.environ.get("ZCOLL_CORE_REQUIREMENT") or f"zcoll-core @ {(HERE / 'core').as_uri()}"


CUDA = with_cuda()
Extension = CUDAExtension if CUDA else CppExtension

setup(
    ext_modules=[
        Extension(
            "zcoll._C",
            ["csrc/common.cc", "csrc/work.cc", "csrc/backend.cc", "csrc/bindings.cc"],
            include_dirs=[str(REPO / "include"), str(LIB_DIR / "include")],
            library_dirs=[str(HERE / "zcoll")],
            libraries=["zcoll"],
            define_macros=[("ZCOLL_TORCH_CUDA", "1")] if CUDA else [],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-interference-size"],
            extra_link_args=["-Wl,-rpath,$ORIGIN"],
        )
    ],
    cmdclass={"build_ext": BuildExtension, "build_py": TorchModulesOnly},
    install_requires=[core_requirement()],
)
