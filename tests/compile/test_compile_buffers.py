"""Buffer planning of generated plans: fused-group outputs written into dead plan-owned buffers (and in
place over inputs that die at their group) give eager's values and gradients, never write over a value
that is still read, returned, saved for backward or aliased by a view, and show in the source."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.compiler import codegen


@pytest.fixture(autouse=True)
def _loops(monkeypatch):
    monkeypatch.setattr(jg.compiler.tape, "SMALL", 0)  # small sizes, but codegen's loops (not a tape)


def _leaves(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [jg.tensor(rng.standard_normal(s) * 0.5, requires_grad=True) for s in shapes]


def _variant(cf):
    return next(iter(cf._jitgrad_compiled.variants.values()))


def _check(fn, xs, grad=True, calls=2):
    """fn compiled equals fn eager (values, gradients) on ``calls`` calls; returns the compiled function."""
    cf = jg.compile(fn)
    for _ in range(calls):
        for x in xs:
            x.grad = None
        if grad:
            got = cf(*xs)
            got = got if isinstance(got, tuple) else (got,)
            got[0].backward()
            cgrads = [x.grad.numpy().copy() for x in xs]
            for x in xs:
                x.grad = None
            want = fn(*xs)
            want = want if isinstance(want, tuple) else (want,)
            want[0].backward()
            for c, e in zip(cgrads, [x.grad.numpy() for x in xs]):
                np.testing.assert_allclose(c, e, rtol=1e-11, atol=1e-12)
        else:
            with jg.no_grad():
                got = cf(*xs)
                want = fn(*xs)
            got = got if isinstance(got, tuple) else (got,)
            want = want if isinstance(want, tuple) else (want,)
        for c, e in zip(got, want):
            np.testing.assert_allclose(c.detach().numpy(), e.detach().numpy(), rtol=1e-11, atol=1e-12)
    return cf


def _chain(x, w):
    a = (x * 2 + 1).tanh() * x  # groups split by a matmul, row and column sums, and a full sum
    b = a @ w
    c = (b.sigmoid() * 3 - b).exp() * 0.1
    d = c.sum(1, keepdim=True)
    e = (c * d + c).relu() * 2 + 1
    f = e.sum(0, keepdim=True)
    return ((e * f * 0.01).tanh() * e).sum()


@pytest.mark.parametrize("grad", [True, False])
def test_chains_split_by_matmul_and_reductions_reuse_buffers(grad):
    xs = _leaves((24, 24), (24, 24))
    cf = _check(_chain, xs, grad)
    var = _variant(cf)
    src = var.bplan.source if grad else var.plan.source
    assert "buffer" in src, src
    if grad:  # the backward's later groups write over gradients that die at them
        assert "# in place: writes over v" in src


def test_no_grad_plan_takes_a_dead_buffer_of_another_shape():
    """A buffer freed before a group of another shape with as many elements is taken, reshaped."""
    def fn(x, w, u):
        a = (x * 2).exp() + 1  # (6, 8)
        k = ((a @ w) * 2).tanh() + 1  # a (and the matmul that may alias it) die at this group
        b = (x.reshape(8, 6) * 3).tanh() - 1  # (8, 6): a's buffer
        return (b @ u).sum() + k.sum()
    xs = _leaves((6, 8), (8, 5), (6, 3))
    cf = _check(fn, xs, grad=False)
    src = _variant(cf).plan.source
    assert ".reshape((8, 6))  # reuses v" in src, src


def _view_fns():
    # a is read after b's group only through a view: b (written out for its row sum) must not take a's buffer
    def transpose(x, y):
        a = (x * 2).exp() - 1
        t = a.t()
        b = (y * 3).tanh() + 1
        return (t * b.sum(1, keepdim=True) + b).sum()

    def reshape(x, y):
        a = (x * 2).exp() - 1
        t = a.reshape(-1)
        b = (y * 3).tanh() + 1
        return (t.reshape(12, 16) * b.sum(1, keepdim=True) + b).sum()

    def expand(x, y):
        a = (x[:1] * 2).exp() - 1  # (1, 16)
        t = a.expand(12, 16)
        b = (y[:1] * 3).tanh() + 1  # (1, 16)
        return (t * b.sum() + (b * 2).sin()).sum() + t.sum()
    return [transpose, reshape, expand]


@pytest.mark.parametrize("fn", _view_fns(), ids=lambda f: f.__name__)
@pytest.mark.parametrize("grad", [True, False])
def test_views_keep_a_buffer_alive(fn, grad):
    _check(fn, _leaves((12, 16), (16, 12) if fn.__name__ == "transpose" else (12, 16)), grad)


def test_returned_and_saved_values_are_never_written_over():
    def fn(x, w):
        a = (x * 2 + 1).tanh()
        b = (a @ w).exp() * 0.5
        c = (b * 3).sigmoid() + b
        r = a.reshape(-1)
        d = (c.sum() * (c - 1)).square() + 2
        return (d.sum(), a, b, c, r, d * 1, d)
    xs = _leaves((16, 16), (16, 16))
    for grad in (True, False):
        cf = _check(fn, xs, grad)
        with jg.no_grad() if not grad else _nothing():
            first = [t.detach().numpy() for t in cf(*xs)]
            keep = [a.copy() for a in first]
            second = [t.detach().numpy() for t in cf(*xs)]
        for a, k in zip(first, keep):  # a second call leaves the first call's results alone
            np.testing.assert_array_equal(a, k)
        for i, a in enumerate(second):
            for j, b in enumerate(second[:i]):
                if {i, j} != {1, 4}:  # r is a's reshape, as in eager
                    assert not np.shares_memory(a, b), (i, j)
            for b in first:
                assert not np.shares_memory(a, b)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_no_in_place_over_an_input_read_through_a_view_too():
    """A group reading a buffer directly and through a view of it never writes over that buffer."""
    def fn(x):
        a = (x * 2).exp() - 1
        t = a.t()
        return ((a * t + a).tanh() * 2).sum()
    xs = _leaves((16, 16))
    cf = _check(fn, xs, grad=False)
    graph = _variant(cf).graph
    a = next(n.outs[0] for n in graph.nodes if n.op.name == "sub")
    assert "writes over v%d'" % a not in _variant(cf).plan.source


@pytest.mark.parametrize("grad", [True, False])
def test_parallel_loops_write_in_place(grad):
    """Groups of 2**16 elements run prange loops: reuse and in place stay exact there."""
    def fn(x, w):
        a = (x * 0.5).tanh() * x + 1
        s = a.sum(0, keepdim=True)
        b = (a * s * 0.01).sin() + a
        m = b.mean(1, keepdim=True)
        c = (b - m).square() * 0.5 + b  # a's buffer
        v = c.sum(0, keepdim=True)
        return (c * v * 0.01).cos().sum() * w.sum()
    cf = _check(fn, _leaves((256, 256), (1,)), grad)
    plan = _variant(cf).bplan if grad else _variant(cf).plan
    assert "# in place: writes over v" in plan.source or "# reuses v" in plan.source, plan.source
    assert "prange" in "".join(plan.kernel_sources)


def test_plan_buffers_never_hands_out_an_escaping_or_live_buffer():
    """plan_buffers on the graphs above: every buffer it hands out is dead and never returned."""
    for fn, shapes in [(_chain, [(24, 24), (24, 24)])] + [(f, [(12, 16), (16, 12) if f.__name__ == "transpose"
                                                               else (12, 16)]) for f in _view_fns()]:
        cf = jg.compile(fn)
        with jg.no_grad():
            cf(*_leaves(*shapes))
        var = _variant(cf)
        g, outs = var.plan.graph, var.plan.outputs
        groups = var.plan.groups
        owner = {i: gr for gr in groups for i in gr.indices()}
        emit_at = {max(gr.indices()): gr for gr in groups}
        reuse = codegen.plan_buffers(g, outs, owner, emit_at)
        pos = {o: p for p, gr in emit_at.items() for o in gr.outputs}
        for o, (u, in_place) in reuse.items():
            assert u not in outs and o != u
            # nothing reads u, or a value made from it, after o's group (in place: after it either)
            derived, frontier = {u}, [u]
            while frontier:
                v = frontier.pop()
                for i, n in enumerate(g.nodes):
                    if i not in owner and v in n.refs():
                        for r in n.outs:
                            if r not in derived:
                                derived.add(r)
                                frontier.append(r)
            assert not derived & set(outs)
            for i, n in enumerate(g.nodes):
                at = max(owner[i].indices()) if i in owner else i
                if derived & set(n.refs()):
                    assert at < pos[o] or (in_place and at == pos[o]), (fn.__name__, o, u, i)


def test_a_reshape_to_its_own_shape_is_its_input_inside_a_plan_but_a_new_array_when_returned():
    x, w = _leaves((4, 3), (4, 3))

    def f(x, w):
        h = (x * w).exp().reshape(4, 3)  # its own shape: the plan goes on with the same array
        return (h + 1).sum(), x.reshape(4, 3), (x * 2).reshape(4, 3)
    cf = _check(f, [x, w])
    src = _variant(cf).plan.source
    assert src.count("# reshape") == 2, src  # the two returned; h's is gone, and its sum joined the loop
    assert "exp add" in src and "sum_all" in src, src
    out = cf(x, w)
    xs = x.detach().numpy()
    assert out[1].detach().numpy() is not xs and np.shares_memory(out[1].detach().numpy(), xs)  # a view, as eager
    np.testing.assert_allclose(out[2].detach().numpy(), 2 * xs)
    np.testing.assert_allclose(out[0].item(), (np.exp(xs * w.detach().numpy()) + 1).sum())


def _linear_relu(x, w, b, w2):
    h = jg.nn.functional.linear(x, w, b).relu()
    return (h @ w2).tanh().sum(), h


def _linear_read_twice(x, w, b, w2):
    y = jg.nn.functional.linear(x, w, b)  # read by a loop and by a GEMM: the loop writes it out
    return ((y.sigmoid() * y) @ w2 + y @ w2).sum(), y


@pytest.mark.parametrize("fn", [_linear_relu, _linear_read_twice])
@pytest.mark.parametrize("grad", [False, True])
def test_a_linear_bias_joins_the_loop_of_the_elementwise_ops_that_read_its_result(fn, grad):
    xs = _leaves((6, 5), (4, 5), (4,), (4, 3))
    cf = _check(fn, xs, grad)
    src = _variant(cf).plan.source
    # the GEMM alone, then its bias in the loop that reads the result, over the GEMM's own buffer
    assert "# linear_mm" in src and "# linear\n" not in src, src
    assert "fused: add " in src, src
    gemm = next(ln for ln in src.splitlines() if "# linear_mm" in ln).split(" = ")[0].split()[-1]  # the GEMM's result
    assert "writes over %s's buffer" % gemm in src or fn is _linear_read_twice, src


def test_a_linear_whose_result_no_loop_reads_keeps_its_bias_in_the_gemm_call():
    xs = _leaves((6, 5), (4, 5), (4,))
    cf = _check(lambda x, w, b: jg.nn.functional.linear(x, w, b).log_softmax(1).sum(), xs)
    assert "# linear\n" in _variant(cf).plan.source


def _bias_grads(x, w, b, w2, b2):
    h = jg.nn.functional.linear(x, w, b).relu()
    return jg.nn.functional.linear(h, w2, b2).tanh().sum()


@pytest.mark.parametrize("rows", [6, 256])  # serial and parallel (prange over column tiles) loops
def test_bias_gradients_are_column_sums_in_the_loops_that_make_the_gradients(rows):
    """In the backward, each bias's gradient (the column sums of its layer's output gradient, after a
    reshape to its own shape and the GEMMs that read the same gradient) is summed in the loop that makes
    that gradient."""
    xs = _leaves((rows, 24), (256, 24), (256,), (5, 256), (5,))
    cf = _check(_bias_grads, xs)
    var = _variant(cf)
    src = var.bplan.source
    assert "# sum\n" not in src and src.count(" sum\n") == 2, src  # relu's where, and tanh's VJP
    if rows == 256:
        assert "prange" in "".join(var.bplan.kernel_sources)


@pytest.mark.parametrize("dims,keepdim", [((0,), False), ((0, 1), True), ((0,), True)])
def test_sums_and_means_over_leading_dims_join_the_loop(dims, keepdim):
    xs = _leaves((5, 4, 3), (3,))

    def f(x, b):
        y = (x * b).exp() + 1
        return y.sum(dims, keepdim=keepdim), (y * 2).mean(dims, keepdim=keepdim), y.sum(-1)
    cf = _check(f, xs, grad=False)
    src = _variant(cf).plan.source
    assert "fused: mul exp add mul sum mean" in src, src
    assert src.count("# sum") == 1, src  # the sum over the last dim keeps its kernel


def test_column_sums_of_float32_equal_eager_within_rounding():
    rng = np.random.default_rng(3)
    x = jg.tensor(rng.standard_normal((300, 40)).astype(np.float32), requires_grad=True)
    b = jg.tensor(rng.standard_normal(40).astype(np.float32), requires_grad=True)

    def f(x, b):
        return (x * b).sigmoid().sum(0), (x - b).relu().mean(0)
    got, want = jg.compile(f)(x, b), f(x, b)
    for g, e in zip(got, want):
        assert g.dtype == jg.float32
        np.testing.assert_allclose(g.detach().numpy(), e.detach().numpy(), rtol=2e-6)
