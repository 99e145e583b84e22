"""What every benchmark shares: the machine, interleaved timing with min/median/max, tables, results.

Timings are trustworthy only as ratios between sides measured in the same process and the same
loop: every benchmark runs its sides (fmmlearn, the peer library, the bare forward bound)
interleaved, rotating their order from one repetition to the next, so that a change of load
hits every side alike, and reports min / median / max over the repetitions.  Ratios use the
minimum (the least disturbed run).  Results go to ``benchmarks/results/<cpu kind>/``, one folder
per kind of CPU (``avx2``, ``avx512-bf16``, ``amx``, ...), because bf16 speed depends on it.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Idle OpenMP threads sleep instead of spinning: with busy cores, spinning makes 2-thread runs many
# times slower for every side alike (set before torch is imported).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

RESULTS = Path(__file__).resolve().parent / "results"


def machine(threads: int | None = None) -> dict:
    """CPU model and flags, torch version and threads, load average: the header of every result."""
    import torch

    from fmmlearn.modeling import cpu_info

    if threads is not None:
        torch.set_num_threads(threads)
    info = cpu_info()
    return {**info, "torch": torch.__version__, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset)"),
            "load_average": os.getloadavg()[0], "python": sys.version.split()[0]}


def machine_line(info: dict, precision: str) -> str:
    flags = ", ".join(f"{name} {'yes' if on else 'no'}" for name, on in info["flags"].items())
    return (f"CPU: {info['model']} (kind **{info['kind']}**: {flags}; torch kernels {info['capability']}); "
            f"torch {info['torch']}, {info['torch_threads']} threads on {info['cores']} cores "
            f"(OMP_WAIT_POLICY={info['omp_wait_policy']}); load average {info['load_average']:.1f} at the start; "
            f"precision: {precision}.")


def command(argv=None) -> str:
    """The exact command line that produced a result."""
    args = sys.argv[1:] if argv is None else argv
    return "python " + shlex.join([os.path.relpath(sys.argv[0]), *args])


def stats(times) -> dict:
    times = list(times)
    return {"min": min(times), "median": statistics.median(times), "max": max(times), "n": len(times)}


def fmt_stats(s: dict) -> str:
    return f"{s['min']:.3g} / {s['median']:.3g} / {s['max']:.3g}"


def ratio(a: dict, b: dict) -> float:
    """``a / b`` of the fastest runs (the least disturbed by other load)."""
    return a["min"] / b["min"]


def interleaved(sides: dict, repeats: int, *, warm_up: bool = False) -> dict:
    """Run every side ``repeats`` times, interleaved, the order rotating from one repetition to the next.

    Parameters
    ----------
    sides : dict of name -> callable
        Each returns its result (the last run's is kept).
    repeats : int
    warm_up : bool, default=False
        Run every side once, untimed, first (first calls pay for kernel selection and probes).

    Returns
    -------
    dict of name -> {"times": [...], "stats": {...}, "peak_mib": [...], "result": ...}
        ``peak_mib``: growth of the resident set during each run (Linux; NaN elsewhere).
    """
    names = list(sides)
    out = {name: {"times": [], "peak_mib": [], "result": None} for name in names}
    if warm_up:
        for name in names:
            sides[name]()
    for r in range(repeats):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            start_rss = reset_peak()
            start = time.perf_counter()
            out[name]["result"] = sides[name]()
            out[name]["times"].append(time.perf_counter() - start)
            out[name]["peak_mib"].append(peak_growth_mib(start_rss))
    for name in names:
        out[name]["stats"] = stats(out[name]["times"])
    return out


# --------------------------------------------------------------------------- peak memory (Linux)


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    raise KeyError(key)


def reset_peak() -> int:
    """Reset the peak resident set to the current one; return the current one (KiB, 0 where unsupported)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # give freed heap back so the peak starts from live memory
        Path("/proc/self/clear_refs").write_text("5")
        return _status_kib("VmRSS")
    except (OSError, KeyError):
        return 0


def peak_growth_mib(start_kib: int) -> float:
    try:
        return (_status_kib("VmHWM") - start_kib) / 1024 if start_kib else float("nan")
    except (OSError, KeyError):
        return float("nan")


# --------------------------------------------------------------------------- tables and files


def fmt(value, digits: int = 2) -> str:
    if isinstance(value, float):
        if value != value:
            return "-"
        if value != 0 and (abs(value) < 1e-2 or abs(value) >= 1e5):
            return f"{value:.1e}"
        return f"{value:.{digits}f}"
    return str(value)


def table(header: list, rows: list) -> list:
    """Markdown table lines."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]


def md_table(header, rows) -> str:
    """A markdown table of already formatted cells (``str`` of each)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_results(name: str, info: dict, report: dict, markdown: str, *, quick: bool) -> Path | None:
    """Write ``<name>.json`` and ``<name>.md`` under ``results/<cpu kind>/`` (not for ``--quick`` runs)."""
    print(markdown)
    if quick:
        print("(--quick: nothing written; run without --quick for results)")
        return None
    folder = RESULTS / info["kind"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(report, indent=2, default=str))
    (folder / f"{name}.md").write_text(markdown)
    print(f"wrote {folder / name}.md and .json")
    return folder
