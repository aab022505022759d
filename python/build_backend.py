"""build_backend.py: the package's PEP 517 backend (pyproject.toml: backend-path "."): setuptools'
own, run on a temporary copy of python/, so that `pip install ./python` leaves no build/ or
*.egg-info in the source tree; and libdsgap shipped inside the package (dsgap/libdsgap.so, found
by dsgap.torch_abi.library_path() after a plain install) when one is built: $DSGAP_LIB at install
time, else the repository's build/libdsgap.so or build-cpu/libdsgap.so. Without one, the package
installs without it and dsgap.torch needs DSGAP_LIB (dsgap.capture does not use libdsgap)."""
import contextlib
import os
import shutil
import sys
import tempfile

from setuptools import build_meta as _sb

HERE = os.path.dirname(os.path.abspath(__file__))


def _libdsgap():
    for p in (os.environ.get("DSGAP_LIB"), os.path.join(HERE, "..", "build", "libdsgap.so"),
              os.path.join(HERE, "..", "build-cpu", "libdsgap.so")):
        if p and os.path.isfile(p):
            return os.path.realpath(p)
    return None


@contextlib.contextmanager
def _copy():
    """a temporary copy of the package's sources (with libdsgap), the working directory there"""
    old = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="dsgap-build-") as tmp:
        src = os.path.join(tmp, "python")
        shutil.copytree(HERE, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "bench"))
        lib = _libdsgap()
        if lib:
            shutil.copy2(lib, os.path.join(src, "dsgap", "libdsgap.so"))
        else:
            sys.stderr.write("dsgap: no built libdsgap found (DSGAP_LIB, build/libdsgap.so): installing without it; "
                             "dsgap.torch then needs DSGAP_LIB\n")
        os.chdir(src)
        try:
            yield src
        finally:
            os.chdir(old)


def _abs(d):
    return os.path.abspath(os.path.join(os.getcwd(), d))


def get_requires_for_build_wheel(config_settings=None):
    with _copy():
        return _sb.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    with _copy():
        return _sb.get_requires_for_build_sdist(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = _abs(metadata_directory)
    with _copy():
        return _sb.prepare_metadata_for_build_wheel(d, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    d = _abs(wheel_directory)
    m = _abs(metadata_directory) if metadata_directory else None
    with _copy():
        return _sb.build_wheel(d, config_settings, m)


def build_sdist(sdist_directory, config_settings=None):
    d = _abs(sdist_directory)
    with _copy():
        return _sb.build_sdist(d, config_settings)
