"""Hugging Face `generate()` calls as requests, with time to first token and per-token times.

Installed when the target imports `transformers.generation.utils`:
`GenerationMixin.generate` is wrapped at the class (a model that overrides
`generate` is seen when it calls `super().generate()`; a generate nested in
another, an assistant model's, is part of the outer one).
No streamer: generate's decoding loop asks `_has_unfinished_sequences`
before its first forward and after each new token, and that question waits
for the token on the host (it reads a device flag): token k is ready when
call k+1 returns. Where those calls do not match the forwards one for one
(another transformers version, assisted or beam decoding), a forward
pre-hook's times stand in: every forward after the prefill starts only once
the previous token is known, so token k is ready when forward k+1 starts
(later by the Python between them: ~0.4 ms on a batch-1 H200 decode, 6% of
its time to first token), and the last one when generate returns.
Each forward is a step already (hooks/torch.py); this adds one `requests`
row (source `generate`) per call: `ttft_ns`, `token_ns` (the time of each
later token), `prefill_ns`, `tokens_in`, `tokens_out`, `forwards`.
Not separated: a chunked prefill (several prefill forwards) or assisted
decoding (several forwards per token) count their extra forwards as tokens.
"""

from __future__ import annotations

import contextvars
import functools
import time
from typing import Any

from ..request_context import CURRENT_REQUEST, Request

_time_ns = time.time_ns
# When each call of generate's `_has_unfinished_sequences` returned, in the generate() running now.
_READY: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("diag_generate_ready", default=None)


def _shape(value: Any) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in value.shape)
    except Exception:  # noqa: BLE001 - not a tensor
        return ()


def _input_shape(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[int, ...], bool]:
    """(shape of the prompt, whether it came as token ids rather than embeddings)."""
    for value in (args[0] if args else None, kwargs.get("inputs"), kwargs.get("input_ids")):
        shape = _shape(value)
        if shape:
            return shape, True
    return _shape(kwargs.get("inputs_embeds")), False


def _new_tokens(model: Any, out: Any, prompt_len: int, from_ids: bool) -> int:
    sequences = out if _shape(out) else getattr(out, "sequences", None)
    shape = _shape(sequences)
    if not shape:
        return -1
    if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        return shape[-1] - 1  # the decoder's output starts with its start token
    # A decoder-only model returns the prompt and the new tokens, but only the new ones
    # when it was given embeddings.
    return shape[-1] - prompt_len if from_ids and prompt_len >= 0 else shape[-1]


def run_generate(rec: Any, generate: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call `generate(model, *args, **kwargs)` and write its `requests` row."""
    starts: list[int] = []
    ends: list[int] = []
    marks: list[int] = []
    handles = []
    try:
        req = Request("generate", "transformers", rec.tid())
        req.method = "generate"
        req.model = req.route = type(model).__name__
        shape, from_ids = _input_shape(args, kwargs)
        if shape:
            req.batch = shape[0]
            req.tokens_in = shape[1] if len(shape) > 1 else -1
        if hasattr(model, "register_forward_pre_hook"):
            handles.append(model.register_forward_pre_hook(lambda m, a: starts.append(_time_ns())))
            handles.append(model.register_forward_hook(lambda m, a, o: ends.append(_time_ns())))
        token = CURRENT_REQUEST.set(req)
        ready_token = _READY.set(marks)
    except Exception as exc:  # noqa: BLE001 - never hurt the target: call it unrecorded
        rec.note("hooks.generate", f"generate() not recorded: {exc!r}")
        return generate(model, *args, **kwargs)
    out = None
    try:
        out = generate(model, *args, **kwargs)
        return out
    except BaseException as exc:
        req.error = type(exc).__name__
        raise
    finally:
        end = _time_ns()
        CURRENT_REQUEST.reset(token)
        _READY.reset(ready_token)
        for handle in handles:
            try:
                handle.remove()
            except Exception:  # noqa: BLE001
                pass
        try:
            req.handler_end_ns = end
            if handles:
                req.forwards = len(starts)
                if len(marks) == len(starts) + 1 >= 2:  # one check before the prefill, one after each token
                    ready = marks[1:]
                else:  # token k is known when forward k+1 starts
                    ready = [*starts[1:], end]
                if starts:
                    req.ttft_ns = ready[0] - req.start_ns
                    req.token_ns = [b - a for a, b in zip(ready, ready[1:], strict=False)]
                if starts and ends:
                    req.prefill_ns = ends[0] - starts[0]
            if out is not None:
                req.tokens_out = _new_tokens(model, out, req.tokens_in, from_ids)
        except Exception:  # noqa: BLE001
            pass
        req.finish(rec, end)


def install(rec: Any, module: Any) -> None:
    """Wrap `GenerationMixin.generate` of an imported `transformers.generation.utils`."""
    cls = module.GenerationMixin
    orig = cls.generate

    @functools.wraps(orig)
    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        req = CURRENT_REQUEST.get()
        if req is not None and req.source == "generate":  # a subclass's generate calling ours
            return orig(self, *args, **kwargs)
        return run_generate(rec, orig, self, args, kwargs)

    cls.generate = generate
    check = getattr(cls, "_has_unfinished_sequences", None)
    if check is not None:

        @functools.wraps(check)
        def has_unfinished(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = check(self, *args, **kwargs)
            marks = _READY.get()
            if marks is not None:
                marks.append(_time_ns())
            return out

        cls._has_unfinished_sequences = has_unfinished
