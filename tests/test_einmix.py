"""EinMix against einops' EinMix (the oracle): same parameters, outputs, gradients,
errors and repr; torch.compile without graph breaks."""

from __future__ import annotations

import einops
import einops.layers.torch as theirs
import pytest
import torch

import rearrange
from rearrange.layers.torch import EinMix

# (pattern, weight_shape, bias_shape, axes_lengths, input shape)
CASES = [
    ("t b c -> t b c_out", "c c_out", None, dict(c=5, c_out=7), (3, 4, 5)),
    ("t b c -> t b c_out", "c c_out", "c_out", dict(c=5, c_out=7), (3, 4, 5)),
    ("b h w c -> b h w c_out", "c c_out", "c_out", dict(c=3, c_out=4), (2, 5, 6, 3)),
    # MLP-Mixer token mixing (weights are flat: einops forbids "(h w)" in weight_shape)
    ("b (h w) c -> b (h2 w2) c", "h w h2 w2", None, dict(h=2, w=3, h2=3, w2=2), (2, 6, 4)),
    ("b (h w) c -> b h w c_out", "c c_out", "c_out", dict(h=2, c=3, c_out=4), (2, 6, 3)),
    ("b (h w) c -> b (w h c_out)", "c c_out", "h c_out", dict(h=2, c=3, c_out=4), (2, 6, 3)),
    ("h w c -> hout w c", "h hout", "hout", dict(h=4, hout=5), (4, 3, 2)),
    ("t b c -> t b c", "c", None, dict(c=6), (2, 3, 6)),
    ("t b (head cin) -> t b (head cout)", "head cin cout", "head cout",
     dict(head=2, cin=3, cout=4), (2, 3, 6)),
    ("b ... (a c) -> b ... (a d)", "c d", "a d", dict(a=2, c=3, d=4), (2, 5, 3, 6)),
    ("(b a) ... -> b c (...)", "b a c", None, dict(a=1, b=2, c=3), (2, 3, 4)),
]


def _pair(pattern, weight_shape, bias_shape, lengths):
    ref = theirs.EinMix(pattern, weight_shape, bias_shape, **lengths)
    ours = EinMix(pattern, weight_shape, bias_shape, **lengths)
    return ref, ours


@pytest.mark.parametrize("pattern, weight_shape, bias_shape, lengths, shape", CASES)
def test_matches_einops(pattern, weight_shape, bias_shape, lengths, shape):
    ref, ours = _pair(pattern, weight_shape, bias_shape, lengths)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: v.shape for k, v in ref.state_dict().items()}
    ours.load_state_dict(ref.state_dict())
    ref.load_state_dict(ours.state_dict())  # and back
    x = torch.randn(shape)
    x_ref = x.clone().requires_grad_(True)
    x_ours = x.clone().requires_grad_(True)
    out_ref, out_ours = ref(x_ref), ours(x_ours)
    torch.testing.assert_close(out_ours, out_ref, rtol=0, atol=0)
    grad = torch.randn(out_ref.shape)
    out_ref.backward(grad)
    out_ours.backward(grad)
    torch.testing.assert_close(x_ours.grad, x_ref.grad)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad)
    if bias_shape is not None:
        torch.testing.assert_close(ours.bias.grad, ref.bias.grad)
    assert repr(ours) == repr(ref)


def test_same_seed_same_parameters():
    torch.manual_seed(1)
    ref = theirs.EinMix("b (h w) c -> b h w d", "c d", "d", h=2, c=3, d=4)
    torch.manual_seed(1)
    ours = EinMix("b (h w) c -> b h w d", "c d", "d", h=2, c=3, d=4)
    torch.testing.assert_close(ours.weight, ref.weight, rtol=0, atol=0)
    torch.testing.assert_close(ours.bias, ref.bias, rtol=0, atol=0)


def test_init_bounds():
    # fan_in = c * h (weight axes not in the output) = 64 * 4
    layer = EinMix("b h c -> b d", "h c d", "d", h=4, c=64, d=512)
    weight_bound, bias_bound = (3 / 256) ** 0.5, (1 / 256) ** 0.5
    assert layer.weight.abs().max() <= weight_bound
    assert layer.weight.abs().max() > 0.99 * weight_bound
    assert layer.bias.abs().max() <= bias_bound
    assert layer.bias.abs().max() > 0.95 * bias_bound
    assert layer.weight.shape == (4, 64, 512) and layer.bias.shape == (1, 512)


ERRORS = [
    ("a b c d e -> e d c b a", "d a b", None, dict(d=2, a=3)),  # b has no length
    ("a b c d e -> e d c b a", "w a b", None, dict(d=2, a=3, b=1)),  # w not in the pattern
    ("(...) a -> ... a", "a", None, dict(a=1)),  # ellipsis grouped on the left
    ("... a -> a ...", "a", "a", dict(a=1)),  # bias axis before the ellipsis
    ("a b -> a c", "b c", None, dict(b=2, c=3, z=4)),  # z is not used
    ("a b -> a c d", "b c", None, dict(b=2, c=3)),  # d comes from nowhere
    ("a b -> a c", "b c ...", None, dict(b=2, c=3)),  # ellipsis in weight
    ("a ... b -> a c", "b c", None, dict(b=2, c=3)),  # ellipsis on one side
    ("a (b 2) -> a c", "b c", None, dict(b=2, c=3)),  # anonymous axis
    ("a b -> a c", "(b c)", None, dict(b=2, c=3)),  # parenthesis in weight
    ("a b -> a c", "b c", "d", dict(b=2, c=3, d=1)),  # bias axis not in the output
    ("a b -> a c", "b c", "c", dict(b=2)),  # c has no length (weight)
    ("a a -> a c", "a c", None, dict(a=2, c=3)),  # a twice
]


@pytest.mark.parametrize("pattern, weight_shape, bias_shape, lengths", ERRORS)
def test_errors_where_einops_errs(pattern, weight_shape, bias_shape, lengths):
    with pytest.raises(einops.EinopsError):
        theirs.EinMix(pattern, weight_shape, bias_shape, **lengths)
    with pytest.raises(rearrange.RearrangeError) as info:
        EinMix(pattern, weight_shape, bias_shape, **lengths)
    assert isinstance(info.value, RuntimeError)


def test_torch_compile_fullgraph():
    model = torch.nn.Sequential(
        EinMix("b (h w) c -> b (h2 w2) c", "h w h2 w2", h=2, w=2, h2=2, w2=2),
        EinMix("b n c -> b n d", "c d", "d", c=3, d=5),
    )
    x = torch.randn(2, 4, 3)
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x), model(x))


@pytest.mark.parametrize("pattern, weight_shape, bias_shape, lengths, shape", CASES)
def test_explain_follows_the_forward(pattern, weight_shape, bias_shape, lengths, shape):
    """The explanation's shapes are the ones the forward produces, step by step (the
    oracle: the layer's own rearranges and torch.einsum run on the input)."""
    layer = EinMix(pattern, weight_shape, bias_shape, **lengths)
    x = torch.randn(shape)
    explanation = layer.explain(x)
    text = str(explanation)
    mixed = x
    if layer.pre_rearrange is not None:
        mixed = layer.pre_rearrange(x)
        assert explanation.pre_rearrange.output.shape == tuple(mixed.shape)
        assert "before the einsum:" in text
    mixed = torch.einsum(layer.einsum_pattern, mixed, layer.weight)
    assert f"torch.einsum({layer.einsum_pattern!r}, x, weight)" in text
    assert explanation.weight_shape == tuple(layer.weight.shape)
    assert (explanation.bias_shape is None) == (bias_shape is None)
    if layer.post_rearrange is not None:
        assert explanation.post_rearrange.input.shape == tuple(mixed.shape)
        assert explanation.post_rearrange.dtype == "float32"
        assert explanation.post_rearrange.output.shape == tuple(layer(x).shape)
    else:
        assert explanation.post_rearrange is None and tuple(mixed.shape) == tuple(layer(x).shape)
