"""llama-cpp-python's build: the Makefile adds AVX-512 only where the CPU has it (never AMX), and mmir refuses a build
that uses instructions the CPU lacks with a message instead of dying with SIGILL."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mmir.core.errors import MmirError
from mmir.llm.backends.llama_cpp import check_cpu_supports_build, missing_cpu_flags

ROOT = Path(__file__).resolve().parents[2]
AVX2 = "fpu sse4_2 avx avx2 fma f16c bmi2"
AVX512 = AVX2 + " avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni avx512_bf16 avx512vbmi amx_tile amx_int8 amx_bf16"


def _cmake_args(tmp_path, flags: str, runs: str = "yes") -> list[str]:
    """The Makefile's CMAKE_ARGS for a CPU listing ``flags`` whose AVX-512 probe printed ``runs``."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CMAKE_ARGS", "MAKEFLAGS")}
    return subprocess.run(["make", "-s", "llama-cmake-args", f"CPUINFO={cpuinfo}", f"AVX512_RUNS={runs}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True).stdout.split()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_makefile_adds_avx512_only_where_the_cpu_has_it_and_never_amx(tmp_path):
    plain = _cmake_args(tmp_path, AVX2)
    assert "-DGGML_AVX2=ON" in plain and "-DGGML_NATIVE=OFF" in plain and "-DLLAVA_BUILD=OFF" in plain
    assert not any("AVX512" in a or "AMX" in a for a in plain)
    wide = _cmake_args(tmp_path, AVX512)
    assert {"-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_BF16=ON", "-DGGML_AVX512_VBMI=ON"} <= set(wide)
    assert not any("AMX" in a for a in wide)
    # avx512f without avx512bw (Xeon Phi): no AVX-512 build; the parts follow their own flags
    assert not any("AVX512" in a for a in _cmake_args(tmp_path, AVX2 + " avx512f avx512dq avx512vl"))
    some = _cmake_args(tmp_path, AVX2 + " avx512f avx512dq avx512bw avx512vl")
    assert "-DGGML_AVX512=ON" in some and not any("VNNI" in a or "BF16" in a or "VBMI" in a for a in some)
    # listed but refused (the probe program did not run): no AVX-512
    assert not any("AVX512" in a for a in _cmake_args(tmp_path, AVX512, runs=""))


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_avx512_probe_runs_only_where_the_cpu_lists_avx512():
    out = subprocess.run(["sh", str(ROOT / "tools" / "avx512_runs.sh")], capture_output=True, text=True, check=True).stdout.strip()
    assert out in ("", "yes")
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if out == "yes":
        assert all(f" {flag}" in flags for flag in ("avx512f", "avx512bw", "avx512vl", "avx512dq"))


def test_missing_cpu_flags_names_what_the_build_uses_and_the_cpu_lacks():
    info = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | AVX512_VNNI = 1 | LLAMAFILE = 1 | OPENMP = 1 |"
    assert missing_cpu_flags(info, set(AVX512.split())) == []
    assert missing_cpu_flags(info, set(AVX2.split())) == ["avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"]
    assert missing_cpu_flags("CPU : AVX2 = 1 | AVX512 = 0 |", set(AVX2.split())) == []


def test_the_installed_build_runs_here_and_a_cpu_without_its_flags_is_refused(tmp_path):
    llama_cpp = pytest.importorskip("llama_cpp")
    check_cpu_supports_build(llama_cpp)  # this machine built it (make setup)
    check_cpu_supports_build(llama_cpp, tmp_path / "absent")  # no cpuinfo (not Linux): no check
    bare = tmp_path / "cpuinfo"
    bare.write_text("processor\t: 0\nflags\t\t: fpu sse2\n")
    with pytest.raises(MmirError, match=r"built for CPU instructions this machine lacks \(avx.*rebuild it here"):
        check_cpu_supports_build(llama_cpp, bare)
