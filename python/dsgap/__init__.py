"""dsgap: capture the attention Q/K/V of PyTorch and diffusers diffusion transformers into dsgap
traces (docs/spec.md §6 of the dsgap repository), for `dsgap replay`.

    import dsgap
    with dsgap.capture(pipe.transformer, "trace.h5", steps=[0, 10], layers=[0, 5], heads=[0, 1]):
        pipe(prompt, num_inference_steps=50)
"""
from .capture import CaptureError, capture
from .describe import Description, describe
from . import torch  # dsgap.torch.attention: policies inside the model (libdsgap, torch_abi.py)
from .families import FAMILIES
from .trace import TraceError, TraceWriter, bf16_to_f32, f32_to_bf16, read_trace, write_trace

__version__ = "0.1.0"
__all__ = ["capture", "CaptureError", "describe", "Description", "TraceError", "TraceWriter", "write_trace", "read_trace",
           "f32_to_bf16", "bf16_to_f32", "FAMILIES"]
