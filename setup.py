"""Builds the Python module ddp_torch (the torch.distributed backend "ddp") with CMake.

`pip install .` runs this through setuptools: CMake configures the project in build-python/ for
the interpreter running pip (Python_EXECUTABLE), builds the module and libddp's backend plugins
(target ddp_python_package) and installs the `runtime` and `python` components into a staging
folder. The wheel
holds the module at the top level and libddp.so.0 with the plugins in ddp_torch.libs/, which the
module finds through its RPATH ($ORIGIN/ddp_torch.libs) and libddp finds its plugins beside itself.

build-python/ sits one level under the source tree, like build/, so a build through ccache (the
project's compiler launcher, its base folder the source tree) reuses what `make` compiled with
the same flags. CMAKE_ARGS (space-separated, as scikit-build's) adds configure arguments, e.g.
CMAKE_ARGS="-DDDP_WERROR=ON" to match a build configured with it.
"""
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = pathlib.Path(__file__).resolve().parent
BUILD = SOURCE / "build-python"
BUILD.mkdir(exist_ok=True)  # egg_info writes its metadata there, before any build step


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        stage = BUILD / "stage"
        shutil.rmtree(stage, ignore_errors=True)
        configure = [
            "cmake", "-S", str(SOURCE), "-B", str(BUILD),
            "-DCMAKE_BUILD_TYPE=Release", "-DDDP_BUILD_TESTS=OFF",
            f"-DPython_EXECUTABLE={sys.executable}",
            # The staging layout is the wheel's: python/ddp_torch*.so, python/ddp_torch.libs/.
            "-DDDP_PYTHON_INSTALL_DIR=python", "-DCMAKE_INSTALL_LIBDIR=python/ddp_torch.libs",
        ] + shlex.split(os.environ.get("CMAKE_ARGS", ""))
        log = BUILD / "configure.log"
        with open(log, "w") as out:
            if subprocess.call(configure, stdout=out, stderr=subprocess.STDOUT) != 0:
                sys.exit(f"ddp-torch: cmake configure failed:\n{log.read_text()}")
        if "ddp torch plugin: ddp_torch for" not in log.read_text():
            reason = [l for l in log.read_text().splitlines() if "ddp torch plugin:" in l]
            sys.exit("ddp-torch: the module cannot be built here: " + (reason[-1] if reason else log.read_text()))
        jobs = str(self.parallel or os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", str(BUILD), "--target", "ddp_python_package", "-j", jobs])
        for component in ("runtime", "python"):
            subprocess.check_call(["cmake", "--install", str(BUILD), "--prefix", str(stage), "--component", component],
                                  stdout=subprocess.DEVNULL)
        # Real files only (a wheel keeps no symbolic links): libddp under its SONAME.
        target = pathlib.Path(self.get_ext_fullpath(ext.name)).parent
        libs = target / "ddp_torch.libs"
        libs.mkdir(parents=True, exist_ok=True)
        for module in (stage / "python").glob("ddp_torch*.so"):
            shutil.copy2(module, target / module.name)
        for lib in ["libddp.so.0"] + [p.name for p in (stage / "python/ddp_torch.libs").glob("libddp_backend_*.so")]:
            shutil.copy(stage / "python/ddp_torch.libs" / lib, libs / lib)


setup(
    packages=[],  # the module only: no discovery of the tree's folders as packages
    py_modules=[],
    ext_modules=[CMakeExtension("ddp_torch")],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own build folders away from CMake's build/.
    options={"build": {"build_base": str(BUILD / "setuptools")}, "egg_info": {"egg_base": str(BUILD)}},
)
