"""The kernels compiled when the package is built (build_backend/compile_kernels.py) and their
loader (gpulinalg/core/kernels.py).

On the CPU: the installed package holds compiled/<family>.fatbin and .json for every family,
the symbol map covers every instantiation its launcher lists (KERNEL_NAMES), every cubin
defines every symbol, the fatbin holds the expected architectures (read from its headers;
cuobjdump, where installed, agrees), and a kernel's SASS there is that of a module of the
kernel alone.  An installation without compiled kernels skips these, except under CI=true,
where it fails.  The loader's choices (fatbin or NVRTC, and the one warning) run against a
fake CuPy.  On a GPU: every kernel loads from the fatbin, with NVRTC's lowered name and static
memory, no more local memory and a block limit no lower.  Not the same SASS: nvcc and NVRTC
of one release emit different code for some kernels (docs/journal/first-contact.md).
"""

import functools
import importlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import types
from pathlib import Path

import pytest

import gpulinalg
from gpulinalg.core import kernels

SASS = ("sm_80", "sm_90", "sm_100", "sm_120")      # the build's targets, where nvcc has them
SPECIFIC = {"sgemm_wgmma": ["sm_90a"]}             # architecture-specific families
BUILD_BACKEND = Path(__file__).resolve().parents[1] / "build_backend"


@functools.lru_cache(maxsize=None)
def launchers():
    """{family: (launcher module, its names)} of the installed package: every module that
    defines KERNEL_NAMES (a tuple of its FAMILY's names, or a dict family -> names)."""
    root = Path(gpulinalg.__file__).parent
    found = {}
    for path in sorted(root.rglob("*.py")):
        if re.search(r"^KERNEL_NAMES\s*=", path.read_text(), re.MULTILINE):
            parts = ("gpulinalg",) + path.relative_to(root).with_suffix("").parts
            module = importlib.import_module(".".join(parts))
            listed = module.KERNEL_NAMES
            pairs = listed.items() if isinstance(listed, dict) else [(module.FAMILY, listed)]
            for family, names in pairs:
                found[family] = (module, tuple(names))
    return found


FAMILIES = sorted(p.stem for p in kernels.kernel_dir().glob("*.cu"))


@pytest.fixture(scope="module")
def compiled():
    """The installed package's compiled/ folder; skip (fail under CI=true) without one."""
    folder = kernels.compiled_dir()
    missing = [f"{f}{suffix}" for f in FAMILIES for suffix in (".fatbin", ".json")
               if not (folder / f"{f}{suffix}").is_file()]
    if missing:
        message = (f"{folder} lacks {', '.join(missing)}: the package was built without "
                   f"compiled kernels")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return folder


def fatbin_images(data):
    """[(kind 'elf' or 'ptx', arch 'sm_90a' / 'sm_120', payload bytes)] of a fatbin file:
    each container (magic 0xBA55ED50, header size, body size) holds entries whose header
    gives the kind (1 PTX, 2 ELF), header size, payload size, architecture and flags
    (0x100000: architecture-specific, 'a')."""
    images, pos = [], 0
    while pos + 16 <= len(data):
        magic, _, header, size = struct.unpack_from("<IHHQ", data, pos)
        assert magic == 0xBA55ED50, f"not a fatbin container at byte {pos}"
        entry, end = pos + header, pos + header + size
        while entry < end:
            kind, _, head, payload = struct.unpack_from("<HHIQ", data, entry)
            arch, = struct.unpack_from("<I", data, entry + 28)
            flags, = struct.unpack_from("<Q", data, entry + 40)
            name = f"sm_{arch}{'a' if flags & 0x100000 else ''}"
            images.append(({1: "ptx", 2: "elf"}[kind], name,
                           data[entry + head:entry + head + payload]))
            entry += head + payload
        pos = end
    return images


def elf_sections(elf):
    """{section name: contents} of a 64-bit little-endian ELF image (a cubin)."""
    offset, = struct.unpack_from("<Q", elf, 0x28)
    size, count, names = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", elf, offset + i * size) for i in range(count)]
    base = heads[names][4]
    name = lambda h: elf[base + h[0]:elf.index(b"\0", base + h[0])].decode()
    return {name(h): elf[h[4]:h[4] + h[5]] for h in heads if h[1] != 8}   # 8: no contents


def image(compiled, family, arch):
    """The family's cubin for `arch` ('sm_90', 'sm_90a') from its fatbin."""
    images = fatbin_images((compiled / f"{family}.fatbin").read_bytes())
    return next(p for kind, a, p in images if kind == "elf" and a == arch)


def test_arch_specific_families_match_their_launchers():
    for family, (module, _) in launchers().items():
        text = Path(module.__file__).read_text()
        assert ("arch_specific=True" in text) == (family in SPECIFIC), family


def test_every_family_has_a_launcher_list():
    assert set(launchers()) == set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_symbols_cover_every_kernel_name(compiled, family):
    info = json.loads((compiled / f"{family}.json").read_text())
    names = launchers()[family][1]
    missing = [n for n in names if n not in info["symbols"]]
    assert not missing, f"{family}: no symbol for {missing}"
    symbols = [info["symbols"][n] for n in dict.fromkeys(names)]
    assert len(set(symbols)) == len(symbols), f"{family}: two names share a symbol"
    assert all(re.fullmatch(r"[A-Za-z_$][\w$]*", s) for s in symbols)
    assert info["source_sha256"] == kernels.source_hash(family)
    assert tuple(info["options"]) == kernels.NVCC_OPTIONS


@pytest.mark.parametrize("family", FAMILIES)
def test_fatbin_holds_the_expected_architectures(compiled, family):
    info = json.loads((compiled / f"{family}.json").read_text())
    images = fatbin_images((compiled / f"{family}.fatbin").read_bytes())
    elf = [arch for kind, arch, _ in images if kind == "elf"]
    ptx = [arch for kind, arch, _ in images if kind == "ptx"]
    assert sorted(elf) == sorted(info["sass"])
    if family in SPECIFIC:
        assert elf == SPECIFIC[family] and not ptx and info["ptx"] is None
    else:
        assert {"sm_80", "sm_90"} <= set(elf) <= set(SASS)
        newest = max(elf, key=kernels._arch_number)
        assert ptx == [newest] and info["ptx"] == "compute_" + newest[3:]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_cubin_defines_every_symbol(compiled, family):
    info = json.loads((compiled / f"{family}.json").read_text())
    images = fatbin_images((compiled / f"{family}.fatbin").read_bytes())
    cubins = [(arch, p) for kind, arch, p in images if kind == "elf" and p[:4] == b"\x7fELF"]
    if not cubins:
        pytest.skip("the cubins are compressed")
    for arch, payload in cubins:
        absent = [s for s in info["symbols"].values() if b"\0" + s.encode() + b"\0" not in payload]
        assert not absent, f"{family} {arch} lacks {absent[:3]}"


def _nvcc_of(info):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return nvcc if f"V{info['nvcc']}" in out else None


@pytest.mark.parametrize("family", FAMILIES)
def test_every_target_nvcc_has_is_compiled(compiled, family):
    info = json.loads((compiled / f"{family}.json").read_text())
    nvcc = _nvcc_of(info)
    if nvcc is None:
        pytest.skip(f"the nvcc {info['nvcc']} that built the package is not on PATH")
    have = set(subprocess.run([nvcc, "--list-gpu-code"], capture_output=True,
                              text=True).stdout.split())
    wanted = SPECIFIC.get(family, SASS)
    assert info["sass"] == [t for t in wanted if t.rstrip("a") in have]


@pytest.mark.skipif(shutil.which("cuobjdump") is None, reason="cuobjdump not installed")
@pytest.mark.parametrize("family", FAMILIES)
def test_cuobjdump_lists_the_same_images(compiled, family):
    path = compiled / f"{family}.fatbin"
    text = subprocess.run(["cuobjdump", "--list-elf", "--list-ptx", str(path)],
                          capture_output=True, text=True).stdout
    listed = sorted(re.findall(r"(ELF|PTX) file\s+\d+: \S+\.(sm_\w+)\.(?:cubin|ptx)", text))
    ours = sorted((kind.upper(), arch) for kind, arch, _ in fatbin_images(path.read_bytes()))
    assert listed == ours


# one cheap instantiation per family: each compiles alone in a second or two
ALONE = {"graph_io": "graph_copy<double, true>", "laswp": "laswp_fused<float,4,512>",
         "trsm": "trsm_left<float,32,false>", "transpose": "copy2d<float>",
         "sgemm": "sgemm_splitk_sum<true>", "sgemm_tc": None,
         "sgemm_wgmma": "wgmma_split<true,2>"}


@pytest.mark.parametrize("family", sorted(ALONE))
def test_family_code_is_the_code_of_a_kernel_alone(compiled, family, tmp_path):
    """A kernel's SASS in the family's fatbin is that of a module of this kernel alone, as
    the run-time compile makes one: compiling the family together changes no code."""
    info = json.loads((compiled / f"{family}.json").read_text())
    nvcc = _nvcc_of(info)
    if nvcc is None:
        pytest.skip(f"the nvcc {info['nvcc']} that built the package is not on PATH")
    name = ALONE[family] or launchers()[family][1][0]
    arch = SPECIFIC.get(family, ["sm_90"])[0]
    src = tmp_path / "one.cu"
    src.write_text(kernels.source(family) + f"\nstatic void* const one[] = {{(void*)&{name}}};\n")
    subprocess.run([nvcc, *kernels.NVCC_OPTIONS, "-cubin", f"-arch={arch}", "-o",
                    str(tmp_path / "one.cubin"), str(src)], check=True, capture_output=True)
    alone = elf_sections((tmp_path / "one.cubin").read_bytes())
    shipped = elf_sections(image(compiled, family, arch))
    text = ".text." + info["symbols"][name]
    assert alone[text] == shipped[text]


def test_covers_follows_cuda_binary_compatibility():
    info = {"sass": ["sm_80", "sm_90", "sm_100", "sm_120"], "ptx": "compute_120"}
    assert kernels.covers(info, (8, 6)) and kernels.covers(info, (8, 9))     # sm_80 SASS
    assert kernels.covers(info, (10, 3)) and kernels.covers(info, (12, 1))
    assert kernels.covers(info, (13, 0))                                      # PTX, JIT
    assert not kernels.covers(info, (7, 5)) and not kernels.covers(info, (11, 0))
    assert not kernels.covers(info, (9, 0), specific=True)
    wgmma = {"sass": ["sm_90a"], "ptx": None}
    assert kernels.covers(wgmma, (9, 0), specific=True)
    assert not kernels.covers(wgmma, (9, 0)) and not kernels.covers(wgmma, (10, 0), True)


@pytest.fixture
def fake_compiled(tmp_path, monkeypatch):
    """compiled_dir() pointing at an empty folder, the loader's caches cleared around it."""
    monkeypatch.setattr(kernels, "compiled_dir", lambda: tmp_path)
    kernels.manifest.cache_clear()
    yield tmp_path
    kernels.manifest.cache_clear()


def _fake_family(folder, family, **fields):
    info = {"sass": ["sm_80", "sm_90"], "ptx": "compute_90", "symbols": {},
            "source_sha256": kernels.source_hash(family)}
    info.update(fields)
    (folder / f"{family}.json").write_text(json.dumps(info))
    (folder / f"{family}.fatbin").write_bytes(b"")
    kernels.manifest.cache_clear()


def test_unusable_says_why(fake_compiled):
    assert "no compiled kernels" in kernels.unusable("trsm", (9, 0))
    _fake_family(fake_compiled, "trsm")
    assert kernels.unusable("trsm", (9, 0)) is None
    assert "no code for sm_75" in kernels.unusable("trsm", (7, 5))
    assert "no code for sm_90a" in kernels.unusable("trsm", (9, 0), specific=True)
    _fake_family(fake_compiled, "laswp", source_sha256="0" * 64)
    assert "kernels/laswp.cu changed" in kernels.unusable("laswp", (9, 0))


def test_fallback_is_announced_once(monkeypatch):
    monkeypatch.setattr(kernels, "_announced", [])
    with pytest.warns(RuntimeWarning, match="gpulinalg: first reason; compiling kernels with "
                                            "NVRTC") as caught:
        kernels._announce("first reason")
        kernels._announce("second reason")
    assert len(caught) == 1


class _FakeModule:
    """cupy.RawModule as the loader uses it, recorded by the FakeCupy that made it."""

    def __init__(self, fake, *, code=None, path=None, options=(), name_expressions=None,
                 enable_cooperative_groups=False):
        self.fake, self.code, self.path, self.options = fake, code, path, options
        self.names, self.cooperative = name_expressions, enable_cooperative_groups
        fake.modules.append(self)

    def compile(self):
        if self.path and self.fake.load_error:
            raise RuntimeError(self.fake.load_error)

    def get_function(self, name):
        return types.SimpleNamespace(name=name, module=self,
                                     max_dynamic_shared_size_bytes=48 * 1024)


class _FakeDevice:
    def __init__(self, cc):
        self.compute_capability = cc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeCupy:
    """The part of CuPy the loader uses: device 0 of compute capability `cc` under a CUDA 12.8
    driver; loading a fatbin raises `load_error` when one is given."""

    def __init__(self, cc, load_error=None):
        self.load_error, self.modules = load_error, []
        self.RawModule = functools.partial(_FakeModule, self)
        self.cuda = types.SimpleNamespace(
            Device=lambda device_id=None: _FakeDevice(cc),
            runtime=types.SimpleNamespace(getDevice=lambda: 0, driverGetVersion=lambda: 12080))


def _clear_loader_caches():
    for cached in (kernels.manifest, kernels._shipped_module, kernels._nvrtc_module,
                   kernels._function, kernels._function_smem):
        cached.cache_clear()


@pytest.fixture
def fake_device(fake_compiled, monkeypatch):
    """make(cc, load_error=None): the loader on a fake CuPy device of capability cc, with
    compiled/trsm (SASS sm_80, sm_90, PTX compute_90; symbols of trsm_llnu<32> and <64>) and
    compiled/sgemm_wgmma (sm_90a) in a fake compiled folder; the once-only warning reset."""
    from gpulinalg.core import device
    _fake_family(fake_compiled, "trsm", symbols={"trsm_llnu<32>": "_Z32", "trsm_llnu<64>": "_Z64"})
    _fake_family(fake_compiled, "sgemm_wgmma", sass=["sm_90a"], ptx=None,
                 symbols={"wgmma_split<true,2>": "_Zw"})
    monkeypatch.setattr(kernels, "_announced", [])

    def make(cc, load_error=None):
        fake = FakeCupy(cc, load_error)
        monkeypatch.setattr(kernels, "cupy", lambda: fake)
        monkeypatch.setattr(device, "capability", lambda device_id=None: divmod(int(cc), 10))
        _clear_loader_caches()
        return fake

    yield make
    _clear_loader_caches()


def test_loader_uses_the_fatbin_on_a_covered_device(fake_device, recwarn):
    fake = fake_device("90")
    kernel = kernels.get_kernel("trsm", "trsm_llnu<64>", dynamic_smem=100_000)
    assert kernel.name == "_Z64" and kernel.module.path.endswith("trsm.fatbin")
    assert kernel.max_dynamic_shared_size_bytes == 100_000
    kernels.get_kernel("trsm", "trsm_llnu<32>")
    assert len(fake.modules) == 1                 # one module per device and family
    assert not [w for w in recwarn if "gpulinalg" in str(w.message)]
    assert kernels.get_kernel("sgemm_wgmma", "wgmma_split<true,2>", arch_specific=True).name == "_Zw"


def test_loader_falls_back_to_nvrtc_on_another_architecture(fake_device):
    fake = fake_device("75")
    with pytest.warns(RuntimeWarning, match="no code for sm_75"):
        kernel = kernels.get_kernel("trsm", "trsm_llnu<32>", cooperative=True)
    module = kernel.module
    assert module.path is None and module.code == kernels.source("trsm")
    assert module.options == (kernels.STD, "--gpu-architecture=sm_75")
    assert module.names == ("trsm_llnu<32>",) and module.cooperative
    kernels.get_kernel("trsm", "trsm_llnu<64>")   # no second warning
    assert [m.path for m in fake.modules] == [None, None]


def test_loader_falls_back_when_the_fatbin_does_not_load(fake_device):
    fake_device("90", load_error="CUDA_ERROR_UNSUPPORTED_PTX_VERSION: unsupported toolchain")
    with pytest.warns(RuntimeWarning, match=r"do not load \(CUDA_ERROR_UNSUPPORTED_PTX_VERSION.*"
                                            r"driver: CUDA 12.8"):
        kernel = kernels.get_kernel("trsm", "trsm_llnu<32>")
    assert kernel.module.code is not None


def test_loader_compiles_a_name_missing_from_the_map(fake_device):
    fake_device("90")
    with pytest.warns(RuntimeWarning, match=r"trsm_llnu<16> is not among"):
        assert kernels.get_kernel("trsm", "trsm_llnu<16>").module.code is not None
    assert kernels.get_kernel("trsm", "trsm_llnu<32>").module.path is not None


def test_loader_compiles_arch_specific_code_for_sm_90a_only(fake_device):
    fake_device("100")
    with pytest.warns(RuntimeWarning, match="no code for sm_100a"):
        kernel = kernels.get_kernel("sgemm_wgmma", "wgmma_split<true,2>", arch_specific=True)
    assert kernel.module.options == (kernels.STD, "--gpu-architecture=sm_100a")


def _build_module(name):
    """build_backend/<name>.py of the source tree, imported."""
    sys.path.insert(0, str(BUILD_BACKEND))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BUILD_BACKEND))


source_tree = pytest.mark.skipif(not BUILD_BACKEND.is_dir(), reason="not run from a source tree")


@source_tree
def test_build_compiles_a_family(tmp_path, monkeypatch):
    """The build's pipeline on two small families for the architectures
    GPULINALG_CUDA_ARCH_LIST names: symbols from the marked PTX, a fatbin with those targets,
    ptxas's resource report, a record the loader accepts."""
    ck = _build_module("compile_kernels")
    nvcc = ck.find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not installed")
    monkeypatch.setenv(ck.ARCH_LIST, "9.0")
    described = ck.describe()
    described["families"] = {f: described["families"][f] for f in ("graph_io", "trsm")}
    ck._run_jobs(nvcc, described["options"], list(ck._jobs(nvcc, described, tmp_path)),
                 tmp_path)
    info = json.loads((tmp_path / "graph_io.json").read_text())
    assert info["symbols"] == {
        "graph_io_set": "graph_io_set",
        "graph_copy<float, true>": "_Z10graph_copyIfLb1EEvPKyPT_iixxxPi",
        "graph_copy<float, false>": "_Z10graph_copyIfLb0EEvPKyPT_iixxxPi",
        "graph_copy<double, true>": "_Z10graph_copyIdLb1EEvPKyPT_iixxxPi",
        "graph_copy<double, false>": "_Z10graph_copyIdLb0EEvPKyPT_iixxxPi"}
    assert set(info["resources"]["sm_90"]) == set(info["symbols"].values())
    trsm = json.loads((tmp_path / "trsm.json").read_text())
    assert set(trsm["symbols"]) == set(launchers()["trsm"][1])
    images = fatbin_images((tmp_path / "trsm.fatbin").read_bytes())
    assert [a for k, a, _ in images if k == "elf"] == trsm["sass"] == ["sm_90"]
    assert kernels.covers(trsm, (9, 0)) and trsm["source_sha256"] == kernels.source_hash("trsm")
    assert not list(ck._jobs(nvcc, described, tmp_path))          # now up to date


@source_tree
def test_build_without_nvcc_ships_no_kernels(tmp_path, monkeypatch, capsys):
    ck = _build_module("compile_kernels")
    monkeypatch.setattr(ck, "find_nvcc", lambda: None)
    ck.compile_all(tmp_path / "out")
    assert "no nvcc found" in capsys.readouterr().out and not (tmp_path / "out").exists()


@source_tree
def test_build_leaves_out_a_family_nvcc_fails_on(tmp_path, capsys):
    ck = _build_module("compile_kernels")
    nvcc = tmp_path / "nvcc"
    nvcc.write_text('#!/bin/sh\ncase "$1" in\n'
                    '  --version) echo "Cuda compilation tools, release 13.0, V13.0.88";;\n'
                    '  --list-gpu-code) echo "sm_80 sm_90";;\n'
                    '  *) echo "x.cu(1): error: no luck" >&2; exit 1;;\nesac\n')
    nvcc.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    (out / "graph_io.json").write_text("{}")                       # a stale record
    described = ck.describe()
    described["families"] = {"graph_io": described["families"]["graph_io"]}
    ck._run_jobs(str(nvcc), described["options"], list(ck._jobs(str(nvcc), described, out)), out)
    assert "graph_io: not compiled (x.cu(1): error: no luck)" in capsys.readouterr().out
    assert not list(out.iterdir())


@source_tree
def test_nvcc_is_a_build_requirement_only_without_one(monkeypatch):
    backend = _build_module("gpulinalg_backend")
    monkeypatch.setattr(backend, "_platform", lambda: ("linux", "x86_64"))
    monkeypatch.setattr(backend.compile_kernels, "find_nvcc", lambda: "/usr/local/cuda/bin/nvcc")
    assert backend._nvcc_requirement() == []
    monkeypatch.setattr(backend.compile_kernels, "find_nvcc", lambda: None)
    assert backend._nvcc_requirement() == ["nvidia-cuda-nvcc"]
    monkeypatch.setattr(backend, "_platform", lambda: ("darwin", "arm64"))
    assert backend._nvcc_requirement() == []


# --- on a GPU -------------------------------------------------------------------------------

def _flags(family):
    """(cooperative, arch_specific) as the family's launcher asks for its kernels."""
    return family.startswith("getrf_leaf"), family in SPECIFIC


def _device_families():
    from gpulinalg.core import device
    return [f for f in FAMILIES if f not in SPECIFIC or device.has_wgmma()]


@pytest.mark.gpu
def test_every_kernel_loads_from_the_fatbin(compiled):
    """No NVRTC on a device the package was compiled for: each kernel comes from the fatbin."""
    from gpulinalg.core import device
    cap = device.capability()
    for family in _device_families():
        cooperative, specific = _flags(family)
        assert kernels.unusable(family, cap, specific) is None, family
        for name in launchers()[family][1]:
            kernel = kernels.get_kernel(family, name, cooperative=cooperative,
                                        arch_specific=specific)
            assert kernel.file_path and kernel.file_path.endswith(f"{family}.fatbin"), name
            assert kernel.kernel.ptr and kernel.enable_cooperative_groups == cooperative
            assert kernel.name == kernels.manifest(family)["symbols"][name]


# Attributes the source fixes, whichever compiler builds it.  Registers and local memory are
# the compiler's own choice: nvcc and NVRTC of one CUDA release allocate them differently (ptxas' limits for nvcc's code: tests/test_kernels_compile.py).
_SAME = ("shared_size_bytes", "const_size_bytes", "binary_version")


def _same_as_nvrtc(family, names):
    """Each shipped kernel has NVRTC's lowered name, static memory and binary version, a
    block limit no lower than NVRTC's and no more local memory."""
    cupy = pytest.importorskip("cupy")
    dev = cupy.cuda.runtime.getDevice()
    cooperative, specific = _flags(family)
    versions = (f"nvcc {kernels.manifest(family)['nvcc']}, "
                f"NVRTC {'.'.join(map(str, cupy.cuda.nvrtc.getVersion()))}")
    for name in names:
        shipped = kernels.get_kernel(family, name, cooperative=cooperative,
                                     arch_specific=specific)
        reference = kernels.nvrtc_function(dev, family, name, cooperative, specific)
        assert shipped.name == reference.name, name
        for attr in _SAME:
            assert getattr(shipped, attr) == getattr(reference, attr), (name, attr, versions)
        assert shipped.max_threads_per_block >= reference.max_threads_per_block, (name, versions)
        assert shipped.local_size_bytes <= reference.local_size_bytes, (name, versions)


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["graph_io", "laswp", "trsm", "transpose",
                                    "getrf_leaf_tile"])
def test_shipped_code_is_the_nvrtc_code(compiled, family):
    _same_as_nvrtc(family, launchers()[family][1])


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_shipped_code_is_the_nvrtc_code_everywhere(compiled, family):
    if family not in _device_families():
        pytest.skip("no wgmma on this device")
    _same_as_nvrtc(family, launchers()[family][1])
