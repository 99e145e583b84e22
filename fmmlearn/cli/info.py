"""``fmmlearn info``: this machine's CPU kind, devices and the precision ``precision="auto"`` picks, measured.
"""

from __future__ import annotations

from ._options import add_command, add_common_options, say

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    parser = add_command(
        sub, "info", help="this machine, and the precision precision='auto' picks per measure family",
        description="The machine as PyTorch sees it (torch version, threads, CPU model and the instruction sets "
                    "that decide bf16 speed: AVX2, AVX512-BF16, AMX) and, for a model, the forward rates a short "
                    "fp32-vs-bf16 probe measured and the precision precision='auto' therefore uses for predictions, "
                    "gradient measures and leave-one-out / beam search (docs/explain.md, \"Precision\").",
        examples="""
            fmmlearn info
            fmmlearn info --model path/to/hf-model --threads 4 --json
        """)
    parser.add_argument("--model", default="minilm", metavar="MODEL",
                        help="model to probe: 'minilm' (bundled), a local directory or a hub name")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="torch threads for the probe (default: torch's own choice)")
    add_common_options(parser)
    parser.set_defaults(func=run)


def run(args) -> dict:
    """``fmmlearn info``: the machine, the measured forward rates and the precision per measure family."""
    import torch

    from .._version import __version__
    from ..modeling import (
        MIN_SPEEDUP,
        load_pretrained,
        precision_report,
        resolve_device,
    )

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be a positive integer, got {args.threads}.")
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    _, net = load_pretrained(args.model, num_labels=2, id2label={0: "0", 1: "1"}, label2id={"0": 0, "1": 1})
    report = precision_report(net.to(device).eval(), device)
    cpu, rates, families = report["cpu"], report["rates"], report["families"]
    flags = ", ".join(f"{name} {'yes' if on else 'no'}" for name, on in cpu["flags"].items())
    probe = f"fp32 {rates['fp32_tokens_per_s']:,.0f} tokens/s"
    if rates["reduced_dtype"] is None:
        probe += " (no native half precision on this device: not probed)"
    else:
        probe += (f", {rates['reduced_dtype']} {rates['reduced_tokens_per_s']:,.0f} tokens/s "
                  f"({rates['speedup']:.2f}x; 'auto' needs >= {MIN_SPEEDUP:.2f}x)")
    rows, width = rates["shape"]
    say(args,
        f"fmmlearn {__version__}, torch {report['torch']}, {cpu['torch_threads']} torch threads on {cpu['cores']} cores",
        f"CPU: {cpu['model']} ({cpu['kind']}; {flags}; torch kernels {cpu['capability']})",
        f"device: {report['device']}",
        f"forward probe of {args.model!r} ({rows} x {width} tokens, {rates['probe_seconds']:.2f} s): {probe}",
        "precision='auto' per measure family:",
        f"  predictions and masked-set scoring        {families['predict']}",
        f"  gradient measures (with precision='auto') {families['gradient']}",
        f"  leave-one-out, beam search                {families['forward']} (always: rankings from logit differences)")
    return {"command": "info", "fmmlearn": __version__, "model": str(args.model), **report}
