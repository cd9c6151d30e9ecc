"""The CUDA twins of the recurrent cell steps, recurrent layers and attention kernels against their
CPU twins, under numba's CUDA simulator (a child pytest process with NUMBA_ENABLE_CUDASIM=1, as in
test_cuda_kernels.py; JITGRAD_CUDA_TESTS=gpu runs them on a real GPU)."""
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout

IN_CHILD = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("JITGRAD_CUDA_TESTS") == "gpu"
pytestmark = [pytest.mark.cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

if not IN_CHILD:
    def test_rnn_and_attention_kernels_under_the_simulator():
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        proc = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider"],
                              env=env, capture_output=True, text=True, timeout=1800, cwd=ROOT)
        assert proc.returncode == 0, "CUDA simulator tests failed:\n" + proc.stdout[-8000:] + proc.stderr[-4000:]

else:
    from numba import cuda

    from jitgrad.kernels import attention as CA
    from jitgrad.kernels import rnn as CR
    from jitgrad.kernels.cuda import attention as GA
    from jitgrad.kernels.cuda import rnn as GR

    def dev(a):
        return None if a is None else cuda.to_device(np.array(a, order="C"))

    def host(d):
        return None if d is None else d.copy_to_host()

    def close(got, ref):
        if ref is None:
            assert got is None
            return
        got = host(got)
        assert got.shape == ref.shape and got.dtype == ref.dtype
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)

    def A(rng, *shape):
        return rng.uniform(-1, 1, shape)

    @pytest.mark.parametrize("bias", [True, False])
    def test_cell_steps_and_vjps_match_cpu(bias, rng):
        B, H = 3, 4
        b4, b3, b1 = (A(rng, k * H) if bias else None for k in (4, 3, 1))
        ig4, hg4, cx = A(rng, B, 4 * H), A(rng, B, 4 * H), A(rng, B, H)
        ref = CR.lstm_cell(ig4, hg4, b4, cx)
        for got, r in zip(GR.lstm_cell(dev(ig4), dev(hg4), dev(b4), dev(cx)), ref):
            close(got, r)
        g1, g2 = A(rng, B, H), A(rng, B, H)
        ref_vjp = CR.lstm_cell_vjp(ref[0], cx, g1, g2)
        for got, r in zip(GR.lstm_cell_vjp(dev(ref[0]), dev(cx), dev(g1), dev(g2)), ref_vjp):
            close(got, r)
        ig3, hg3, hx = A(rng, B, 3 * H), A(rng, B, 3 * H), A(rng, B, H)
        ref = CR.gru_cell(ig3, hg3, b3, hx)
        for got, r in zip(GR.gru_cell(dev(ig3), dev(hg3), dev(b3), dev(hx)), ref):
            close(got, r)
        for got, r in zip(GR.gru_cell_vjp(dev(ref[0]), dev(hx), dev(g1)), CR.gru_cell_vjp(ref[0], hx, g1)):
            close(got, r)
        for relu in (False, True):
            ig, hg = A(rng, B, H), A(rng, B, H)
            hy = CR.rnn_cell(ig, hg, b1, relu)
            close(GR.rnn_cell(dev(ig), dev(hg), dev(b1), relu), hy)
            close(GR.rnn_cell_vjp(dev(hy), dev(g1), relu), CR.rnn_cell_vjp(hy, g1, relu))

    @pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"])
    @pytest.mark.parametrize("sizes,reverse", [((2, 2, 2), False), ((3, 2, 1), True)])
    def test_layers_match_cpu(mode, sizes, reverse, rng):
        G = {"LSTM": 4, "GRU": 3}.get(mode, 1)
        proj = mode == "LSTM" and reverse
        H, P, B, N = 3, 2 if proj else 3, sizes[0], sum(sizes)
        ig, h0, w, b = A(rng, N, G * H), A(rng, B, P), A(rng, G * H, P), A(rng, G * H)
        c0 = A(rng, B, H) if mode == "LSTM" else None
        whr = A(rng, P, H) if proj else None
        ref = CR.rnn_layer(mode, ig, h0, c0, w, b, whr, sizes, reverse)
        got = GR.rnn_layer(mode, dev(ig), dev(h0), dev(c0), dev(w), dev(b), dev(whr), sizes, reverse)
        for g, r in zip(got, ref):
            close(g, r)
        g_out, g_hn = A(rng, N, P), A(rng, B, P)
        g_cn = A(rng, B, H) if mode == "LSTM" else None
        ref_grads = CR.rnn_layer_vjp(mode, ref[0], w, whr, g_out, g_hn, g_cn, sizes, reverse, True)
        got_grads = GR.rnn_layer_vjp(mode, got[0], dev(w), dev(whr), dev(g_out), dev(g_hn), dev(g_cn), sizes, reverse,
                                     True)
        for g, r in zip(got_grads, ref_grads):
            close(g, r)

    @pytest.mark.parametrize("mask", [None, "row", "full", "broadcast"])
    @pytest.mark.parametrize("causal", [False, True])
    def test_attention_softmax_and_vjp_match_cpu(mask, causal, rng):
        s = A(rng, 2, 3, 4, 5)
        m = {None: None, "row": A(rng, 4, 5), "full": A(rng, 2, 3, 4, 5), "broadcast": A(rng, 2, 1, 1, 5)}[mask]
        if m is not None:
            m[..., 1] = -np.inf  # a masked key
        p = CA.attention_softmax(s, m, 0.5, causal)
        close(GA.attention_softmax(dev(s), dev(m), 0.5, causal), p)
        dp = A(rng, 2, 3, 4, 5)
        close(GA.attention_softmax_vjp(dev(dp), dev(p), 0.5), CA.attention_softmax_vjp(dp, p, 0.5))

    def test_attention_fully_masked_row_gives_zeros(rng):
        s, m = A(rng, 1, 2, 3), np.zeros((1, 2, 3))
        m[0, 1] = -np.inf
        p = host(GA.attention_softmax(dev(s), dev(m), 1.0, False))
        assert not p[0, 1].any() and np.isclose(p[0, 0].sum(), 1.0)
