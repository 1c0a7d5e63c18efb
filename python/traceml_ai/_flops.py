"""The FLOPs of one sample, counted once, off the hot path
(docs/summary-json.md, "throughput").

The first call of each timed model's forward runs under
torch.utils.flop_counter.FlopCounterMode: the mode passes every operator
through unchanged (the same results, the same exceptions) and adds up the
FLOPs of those it has a formula for. A forward and its backward cost about
three forwards (the backward's two matrix products per forward one), so a
sample costs 3 x forward / batch; the engine multiplies that by each
step's samples (tml_set_flops). The dtype the model computes in (autocast,
16-bit parameters, TF32 matmuls) and the GPU's name pick the peak for MFU
(src/gpu/peak.c). A model compiled by torch.compile is never counted: a
dispatch mode around a compiled call would recompile it.
"""
import sys

_per_sample = 0.0     # the counted models' FLOPs per sample, summed


def counter(c, log):
    """The hook a model's forward PhaseCall calls once: counter(fn, args,
    kwargs) -> fn(*args, **kwargs)."""

    def count(fn, args, kwargs):
        kwargs = kwargs or {}
        try:
            from torch.utils.flop_counter import FlopCounterMode
            mode = FlopCounterMode(display=False)
            mode.__enter__()
        except Exception as e:
            log("FLOPs not counted: FlopCounterMode unavailable (%s)" % e)
            return fn(*args, **kwargs)
        try:
            out = fn(*args, **kwargs)
        finally:
            try:
                mode.__exit__(None, None, None)
            except Exception:
                pass
        try:
            _report(c, log, mode.get_total_flops(), args, kwargs)
        except Exception as e:
            log("FLOPs not counted: %s" % e)
        return out

    return count


def _batch(torch, args, kwargs):
    """The first dimension of the forward's lead tensor (input_ids first)."""
    values = [kwargs.get("input_ids")] + list(args) + list(kwargs.values())
    for v in values:
        if isinstance(v, (tuple, list)) and v:
            v = v[0]
        if isinstance(v, torch.Tensor) and v.dim() >= 1:
            return int(v.shape[0])
    return 0


def _how(c, torch, p):
    """TML_FLOPS_* of the dtype a model whose first parameter is p computes in."""
    dev = p.device.type if p is not None else "cpu"
    try:
        cast = torch.is_autocast_enabled(dev) and \
            torch.get_autocast_dtype(dev) in (torch.float16, torch.bfloat16)
    except Exception:
        cast = False
    if cast or (p is not None and p.dtype in (torch.float16, torch.bfloat16)):
        return c.FLOPS_COUNTED | c.FLOPS_16BIT
    if dev == "cuda" and torch.get_float32_matmul_precision() != "highest":
        return c.FLOPS_COUNTED | c.FLOPS_TF32
    return c.FLOPS_COUNTED


def _report(c, log, forward, args, kwargs):
    global _per_sample
    torch = sys.modules["torch"]
    model = args[0] if args and isinstance(args[0], torch.nn.Module) else None
    batch = _batch(torch, args[1:] if model is not None else args, kwargs)
    if forward <= 0 or batch <= 0:
        log("FLOPs not counted: %s" % ("no batch in the forward's inputs" if forward > 0
                                         else "no operator with a FLOP formula"))
        return
    p = next(model.parameters(), None) if model is not None else None
    device = torch.cuda.get_device_name(p.device) if p is not None and p.is_cuda else None
    _per_sample += 3.0 * forward / batch
    c.set_flops(_per_sample, _how(c, torch, p), device)
    log("FLOPs: %s counted %.4g per forward of %d samples (FlopCounterMode; x3 for the "
        "backward)" % (type(model).__name__, forward, batch))
