#!/usr/bin/env python3
"""Warp-stall samples of one ep-cuda kernel by source function (or line), from Nsight Compute.

On the GPU host (kernels compiled with line info; --clock-control none leaves the clocks alone):
  EP_CUDA_LINEINFO=1 ncu --clock-control none --section WarpStateStats --section SourceCounters \
      --warp-sampling-interval 0 -k regex:ep_dispatch_single --launch-skip 30 --launch-count 1 \
      -o d ep-gpu bench --backend cuda --ranks 1 --tokens 128 --format fp8 --passes 1 --rounds 40
  ncu -i d.ncu-rep --page source --csv --print-source sass > d-sass.csv
Here (NVRTC from the nvidia-cuda-nvrtc wheel, as CI has it):
  scripts/ncu_stalls.py d-sass.csv ep_dispatch_single_fp8 dispatch [line]
The third argument is the kernel's program: a file of src/kernels (swiglu.cu) or the name of one
kernels.rs joins from a folder's files (dispatch, combine: kernels/NAME/*.cu, each after a #line).
The kernel is compiled again here, to the same machine code as the host's driver makes of it (its
instruction count is checked against the CSV's), for the line of each instruction: the CSV has
addresses and SASS only.
"""
import collections, csv, ctypes, os, re, subprocess, sys

KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "ep-cuda", "src", "kernels")
REASONS = ["barrier", "no_inst", "long_sb", "short_sb", "wait", "membar", "sleep", "branch_resolving"]


def program_files(body):
    """[(name, text)] of program `body` in the order kernels.rs compiles them: the file itself, or the
    parts of the program kernels.rs joins (`pub const DISPATCH: &str = joined!("dispatch": "wire.cu", ...)`)."""
    if body.endswith((".cu", ".cuh")):
        return [(body, open(os.path.join(KERNELS, body)).read())]
    rs = open(os.path.join(KERNELS, "..", "kernels.rs")).read()
    folder, files = re.search(r'pub const %s: &str =\s*joined!\("([^"]+)":(.*?)\);' % body.upper(), rs, re.S).groups()
    return [(f"{folder}/{f}", open(os.path.join(KERNELS, folder, f)).read()) for f in re.findall(r'"([^"]+)"', files)]


def program_body(body):
    """The program's text after common.cuh, as kernels.rs joins it (each part of a joined one after a #line)."""
    parts = program_files(body)
    if len(parts) == 1:
        return parts[0][1]
    return "".join(f'#line 1 "{name}"\n{text}' for name, text in parts)


def sass_lines(body, kernel):
    """{offset: (file, line)} for `kernel`, compiled as kernels.rs does (prelude, common, body): the
    file a #line names, or the program's own ("k.cu") with its line."""
    import nvidia.cu13
    base = list(nvidia.cu13.__path__)[0]
    lib = ctypes.CDLL(os.path.join(base, "lib", "libnvrtc.so.13"))
    src = "#define EP_LL_MAX_TOKENS 8\n" + open(os.path.join(KERNELS, "common.cuh")).read() + "\n"
    src += program_body(body)
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None) == 0
    opts = [b"-lineinfo", b"-arch=sm_90", b"--ftz=false", b"--prec-div=true", b"--prec-sqrt=true", b"--fmad=false"]
    assert lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) == 0, "NVRTC failed"
    n = ctypes.c_size_t()
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    cubin = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetCUBIN(prog, cubin)
    path = "/tmp/ncu_stalls.cubin"
    open(path, "wb").write(cubin.raw)
    out = subprocess.run([os.path.join(base, "bin", "nvdisasm"), "-g", path], capture_output=True, text=True).stdout
    lines, cur, inside = {}, None, False
    for l in out.split("\n"):
        if l.strip() == f".text.{kernel}:":
            inside = True
        elif inside and l.startswith("//----"):
            break
        elif inside:
            m = re.search(r'//## File "([^"]*)", line (\d+)', l)
            if m:
                f = m.group(1)
                cur = ("k.cu" if os.path.basename(f) == "k.cu" else f, int(m.group(2)))
            m = re.match(r"\s+/\*([0-9a-f]{4,})\*/", l)
            if m:
                lines[int(m.group(1), 16)] = cur
    return lines


def main():
    csv_path, kernel, body = sys.argv[1:4]
    by_line = len(sys.argv) > 4 and sys.argv[4] == "line"
    files = {"common.cuh": open(os.path.join(KERNELS, "common.cuh")).read().split("\n")}
    for name, text in program_files(body):
        files[name] = text.split("\n")
    n_common = len(files["common.cuh"])  # common.cuh ends with a newline: one line more than it has

    def where(at):  # (file, line) -> (file, line): k.cu's line 1 is the prelude, then common.cuh, "\n", body
        if at is None:
            return ("?", 0)
        f, line = at
        if f != "k.cu":  # a part of a joined program, by its #line (NVRTC puts its directory first)
            return ([k for k in files if f == k or f.endswith("/" + k)] or [f])[0], line
        if line == 1:
            return ("?", 0)
        return ("common.cuh", line - 1) if line - 1 < n_common else (body, line - n_common - 1)

    funcs = {f: [(i + 1, m.group(1)) for i, l in enumerate(t)
                 if (m := re.match(r'^(?:template <[^>]*>\s*)?(?:extern "C" )?__(?:device|global)__.*?\b(\w+)\s*\(', l))]
             for f, t in files.items()}

    def func(f, ln):
        return ([n for s, n in funcs.get(f, []) if s <= ln] or ["?"])[-1]

    rows = list(csv.reader(open(csv_path)))
    head = [i for i, r in enumerate(rows) if r and r[0] == "Address"][0]
    h = rows[head]
    data = [r for r in rows[head + 1:] if len(r) >= len(h)]
    lines = sass_lines(body, kernel)
    if len(lines) != len(data):
        sys.exit(f"{kernel}: {len(lines)} instructions here, {len(data)} in {csv_path}: not the same code")
    col = {k: h.index(f"stall_{k}") for k in REASONS}
    total_col = h.index("Warp Stall Sampling (All Samples)")
    base = int(data[0][0], 16)
    agg, total = collections.defaultdict(collections.Counter), 0.0
    for r in data:
        f, ln = where(lines.get(int(r[0], 16) - base))
        key = f"{f}:{ln} {func(f, ln)}" if by_line else f"{f}:{func(f, ln)}"
        agg[key]["all"] += float(r[total_col] or 0)
        total += float(r[total_col] or 0)
        for k in REASONS:
            agg[key][k] += float(r[col[k]] or 0)
    print(f"{kernel}: {total:.0f} samples; all, share, then " + ", ".join(REASONS))
    for k, c in sorted(agg.items(), key=lambda x: -x[1]["all"]):
        if c["all"] >= 0.01 * total:
            print(f"{c['all']:6.0f} {100 * c['all'] / total:5.1f}% " + " ".join(f"{c[r]:5.0f}" for r in REASONS) + f"  {k}")


if __name__ == "__main__":
    main()
