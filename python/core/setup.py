"""Builds the zcoll-core wheel: the framework-free part of the ``zcoll`` package (its
``__init__`` and ``zcoll.core``; ``zcoll.jax`` too once it exists) and the libzcoll.so they load.

The sources are ../zcoll (the one package tree both distributions install from; the torch
distribution, ../pyproject.toml, owns the other files). libzcoll.so comes from ZCOLL_BUILD_DIR
(default: the repository's build/ when it holds libzcoll.so), else it is built here with CMake
(without CUDA), and is bundled as zcoll/libzcoll.so.0: zcoll.core loads it, and the torch
extension finds it through its $ORIGIN rpath. No compiled Python code: the wheel is tagged
py3-none-<platform> (any Python 3.9+, any framework version), not abi3.
"""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent / "zcoll"
REPO = HERE.parent.parent


def zcoll_library_dir():
    build = Path(os.environ.get("ZCOLL_BUILD_DIR", REPO / "build"))
    if (build / "libzcoll.so").exists():
        return build
    build = HERE / "build" / "zcoll"
    if not (build / "libzcoll.so").exists():
        subprocess.check_call(["cmake", "-S", str(REPO), "-B", str(build),
                               "-DCMAKE_BUILD_TYPE=Release", "-DZCOLL_WITH_CUDA=OFF",
                               "-DZCOLL_BUILD_TESTS=OFF", "-DZCOLL_BUILD_PERF=OFF"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "zcoll",
                               "-j", str(os.cpu_count() or 2)])
    return build


LIB_DIR = zcoll_library_dir()
for name in ("libzcoll.so", "libzcoll.so.0"):
    shutil.copy2(LIB_DIR / "libzcoll.so", PACKAGE / name)
# zcoll.jax's XLA FFI handlers, when CMake built them (it does where python3 imports jax.ffi);
# found beside the package by zcoll/jax/_targets.py, libzcoll.so.0 through their $ORIGIN rpath.
JAX_HANDLERS = ["libzcoll_jax.so"] if (LIB_DIR / "libzcoll_jax.so").exists() else []
for name in JAX_HANDLERS:
    shutil.copy2(LIB_DIR / name, PACKAGE / name)


class WithNativeLibrary(Distribution):
    """libzcoll.so makes the wheel platform-specific (installed to platlib)."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """py3-none-<platform>: the wheel carries a native library but no Python extension."""

    def get_tag(self):
        return "py3", "none", super().get_tag()[2]


class FrameworkFreeModulesOnly(build_py):
    """Of the zcoll package's own modules, only __init__.py: the rest are the torch backend's
    (the zcoll distribution, ../setup.py)."""

    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir)
                if package != "zcoll" or m[1] == "__init__"]


packages = ["zcoll"] + [f"zcoll.{sub}" for sub in ("core", "jax")
                        if (PACKAGE / sub / "__init__.py").exists()]
setup(
    packages=packages,
    package_dir={"zcoll": os.path.relpath(PACKAGE, HERE)},
    package_data={"zcoll": ["libzcoll.so", "libzcoll.so.0"] + JAX_HANDLERS},
    distclass=WithNativeLibrary,
    cmdclass={"bdist_wheel": PlatformWheel, "build_py": FrameworkFreeModulesOnly},
)
