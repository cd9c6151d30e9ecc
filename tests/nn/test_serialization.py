"""jitgrad.save / jitgrad.load: round trips, safety against crafted files, truncation, atomic writes."""
import collections
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import serialization as S


def roundtrip(obj, tmp_path):
    path = tmp_path / "obj.jg"
    jg.save(obj, path)
    return jg.load(path)


@pytest.mark.parametrize("dtype", [jg.float32, jg.float64, jg.int32, jg.int64, jg.bool])
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4), (3, 0, 2)])
def test_tensor_roundtrip(dtype, shape, tmp_path, rng):
    data = rng.standard_normal(shape) * 100
    t = jg.tensor(data, dtype=dtype) if shape else jg.tensor(float(data), dtype=dtype)
    out = roundtrip(t, tmp_path)
    assert isinstance(out, jg.Tensor)
    assert out.dtype is dtype and out.shape == t.shape
    np.testing.assert_array_equal(out.numpy(), t.numpy())
    assert out._data.flags.writeable and out._data.flags.c_contiguous


def test_nested_state_roundtrip(tmp_path):
    w = jg.randn(4, 3)
    obj = {
        "model": collections.OrderedDict([("fc.weight", w), ("fc.bias", jg.zeros(4))]),
        "optimizer": {"state": {0: {"step": jg.tensor(3.0), "momentum_buffer": jg.ones(4, 3)}},
                      "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "nesterov": False, "params": [0, 1],
                                        "foreach": None}]},
        "epoch": 7, "best": float("inf"), "name": "mlp \u00e9\u4e2d", "none": None, "flags": [True, False],
        "nan": float("nan"), "big": 2 ** 70, "milestones": collections.Counter([2, 5, 5]),
        (1, "a"): "tuple key", 2.5: "float key", None: "none key",
    }
    out = roundtrip(obj, tmp_path)
    assert type(out["model"]) is collections.OrderedDict and list(out["model"]) == ["fc.weight", "fc.bias"]
    np.testing.assert_array_equal(out["model"]["fc.weight"].numpy(), w.numpy())
    sd = out["optimizer"]
    assert list(sd["state"]) == [0] and sd["state"][0]["step"].item() == 3.0
    assert sd["param_groups"][0]["betas"] == (0.9, 0.999) and sd["param_groups"][0]["params"] == [0, 1]
    assert sd["param_groups"][0]["foreach"] is None and sd["param_groups"][0]["nesterov"] is False
    assert out["epoch"] == 7 and type(out["epoch"]) is int and out["best"] == float("inf")
    assert out["name"] == "mlp \u00e9\u4e2d" and out["none"] is None and out["flags"] == [True, False]
    assert np.isnan(out["nan"]) and out["big"] == 2 ** 70
    assert isinstance(out["milestones"], collections.Counter) and out["milestones"] == {2: 1, 5: 2}
    assert out[(1, "a")] == "tuple key" and out[2.5] == "float key" and out[None] == "none key"


def test_requires_grad_views_and_shared_tensors(tmp_path):
    base = jg.arange(12.0).reshape(3, 4)
    view = base.t()  # non-contiguous
    p = jg.ones(2, requires_grad=True)
    out = roundtrip({"base": base, "view": view, "p": p, "again": p, "row": base[1]}, tmp_path)
    np.testing.assert_array_equal(out["view"].numpy(), base.numpy().T)
    np.testing.assert_array_equal(out["row"].numpy(), base.numpy()[1])
    assert out["p"].requires_grad and out["p"].is_leaf and not out["base"].requires_grad
    assert out["again"] is out["p"]  # one tensor saved twice loads as one tensor
    out["base"][0, 0] = 100.0  # tensors sharing storage are saved separately
    assert out["row"][0].item() == 4.0


def test_numpy_scalars_and_file_objects():
    buf = io.BytesIO()
    buf.write(b"prefix")
    jg.save({"a": np.float32(1.5), "b": np.int64(3), "c": np.bool_(True), "t": jg.ones(2)}, buf)
    buf.seek(6)
    out = jg.load(buf)
    assert out["a"] == 1.5 and out["b"] == 3 and out["c"] is True
    assert out["t"].tolist() == [1.0, 1.0]


def test_unpicklable_objects_are_refused_before_writing(tmp_path):
    # objects outside the checked tree are pickled (tests/nn/test_save_objects.py); what pickle refuses is refused
    path = tmp_path / "x.jg"
    with pytest.raises(TypeError, match=r"can't save obj\['f'\] of type function, and it can't be pickled"):
        jg.save({"f": lambda: 0}, path)
    assert os.listdir(tmp_path) == []  # nothing written, no temporary left behind


def test_map_location_and_weights_only(tmp_path):
    jg.save({"w": jg.ones(2)}, tmp_path / "w.jg")
    out = jg.load(tmp_path / "w.jg", map_location="cpu", weights_only=True)
    assert out["w"].device == jg.device("cpu")


# ---------------------------------------------------------------- hostile and damaged files
class _Boom:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_pickle_files_are_never_unpickled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps(_Boom()))
    with pytest.raises(RuntimeError, match=r"evil\.pt.*is a pickle, not a jitgrad file"):
        jg.load(path)
    assert not marker.exists()


def test_zip_and_foreign_files(tmp_path):
    z = tmp_path / "model.pt"
    z.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(RuntimeError, match=r"model\.pt.*zip archive"):
        jg.load(z)
    other = tmp_path / "notes.txt"
    other.write_text("hello, not weights at all")
    with pytest.raises(RuntimeError, match=r"notes\.txt' is not a jitgrad file"):
        jg.load(other)
    empty = tmp_path / "empty.jg"
    empty.write_bytes(b"")
    with pytest.raises(RuntimeError, match=r"empty\.jg' is empty"):
        jg.load(empty)


def preamble(h, version=S.VERSION, header_len=None):
    """The writer's preamble for header bytes ``h``, with a valid header checksum."""
    pre = S._PREAMBLE.pack(S.MAGIC, version, len(h) if header_len is None else header_len)
    return pre + struct.pack("<I", zlib.crc32(h, zlib.crc32(pre[8:])))


def craft(tmp_path, header, data=b"", version=S.VERSION, header_len=None):
    """A file with a hand-written header (the writer's layout, any contents)."""
    h = json.dumps(header).encode()
    pre = preamble(h, version, header_len)
    pad = b"\0" * (S._align(len(pre) + len(h)) - len(pre) - len(h))
    path = tmp_path / "crafted.jg"
    path.write_bytes(pre + h + pad + data)
    return path


def entry(**kw):
    e = {"dtype": "float32", "shape": [2], "offset": 0, "nbytes": 8, "crc32": 0, "requires_grad": False}
    e.update(kw)
    return e


@pytest.mark.parametrize("header, data, message", [
    ({"format": "jitgrad", "tree": {"t": "tensor", "i": 0}, "tensors": [entry(offset=1 << 40)], "data_size": 64},
     b"\0" * 64, "points outside the file"),
    ({"format": "jitgrad", "tree": {"t": "tensor", "i": 0}, "tensors": [entry(nbytes=4)], "data_size": 64},
     b"\0" * 64, "does not match its shape"),
    ({"format": "jitgrad", "tree": {"t": "tensor", "i": 0}, "tensors": [entry(shape=[-2])], "data_size": 64},
     b"\0" * 64, "corrupt shape"),
    ({"format": "jitgrad", "tree": {"t": "tensor", "i": 0}, "tensors": [entry(dtype="object")], "data_size": 64},
     b"\0" * 64, "unknown dtype 'object'"),
    ({"format": "jitgrad", "tree": {"t": "tensor", "i": 5}, "tensors": [entry(crc32=0)], "data_size": 64},
     b"\0" * 64, "refers to a tensor that is not in the file"),
    ({"format": "jitgrad", "tree": {"t": "tensor", "i": 0}, "tensors": [entry(crc32=12345)], "data_size": 64},
     b"\0" * 64, "checksum mismatch"),
    ({"format": "jitgrad", "tree": {"t": "pickled", "items": []}, "tensors": [], "data_size": 0},
     b"", "unknown object tag 'pickled'"),
    ({"format": "jitgrad", "tree": {"t": "pickle", "i": 0}, "tensors": [entry()], "data_size": 64},
     b"\0" * 64, "corrupt pickle entry"),
    ({"format": "jitgrad", "tree": {"t": "pickle", "i": 3}, "tensors": [], "data_size": 0},
     b"", "corrupt pickle entry"),
    ({"format": "jitgrad", "tree": {"t": "dict", "items": [[{"t": "list", "items": []}, 1]]}, "tensors": [],
      "data_size": 0}, b"", "invalid dict key"),
    ({"format": "jitgrad", "tree": None, "tensors": [], "data_size": 64}, b"", "is truncated"),
    ({"format": "jitgrad", "tree": None, "tensors": [], "data_size": 0}, b"extra", "unexpected bytes"),
    ({"format": "other"}, b"", "corrupt header"),
])
def test_crafted_headers_raise(tmp_path, header, data, message):
    path = craft(tmp_path, header, data)
    with pytest.raises(RuntimeError, match=r"jitgrad\.load: '.*crafted\.jg' .*" + message):
        jg.load(path)


def test_header_length_and_version(tmp_path):
    header = {"format": "jitgrad", "tree": None, "tensors": [], "data_size": 0}
    with pytest.raises(RuntimeError, match="header runs past the end of the file"):
        jg.load(craft(tmp_path, header, header_len=1 << 50))
    with pytest.raises(RuntimeError, match="format version 99"):
        jg.load(craft(tmp_path, header, version=99))
    h = b"{not json"
    path = tmp_path / "crafted.jg"
    path.write_bytes(preamble(h) + h)
    with pytest.raises(RuntimeError, match="corrupt header"):
        jg.load(path)


def test_invalid_bool_bytes(tmp_path):
    data = b"\x02" + b"\0" * 63
    e = entry(dtype="bool", shape=[1], nbytes=1, crc32=zlib.crc32(b"\x02"))
    path = craft(tmp_path, {"format": "jitgrad", "tree": {"t": "tensor", "i": 0}, "tensors": [e], "data_size": 64},
                 data)
    with pytest.raises(RuntimeError, match="invalid boolean values"):
        jg.load(path)


def test_deeply_nested_header(tmp_path):
    header = '{"format":"jitgrad","tensors":[],"data_size":0,"tree":' + '{"t":"list","items":[' * 100_000 + \
        "null" + "]}" * 100_000 + "}"
    h = header.encode()
    path = tmp_path / "deep.jg"
    pre = preamble(h)
    path.write_bytes(pre + h + b"\0" * (S._align(len(pre) + len(h)) - len(pre) - len(h)))
    with pytest.raises(RuntimeError, match="deep.jg.*corrupt header"):
        jg.load(path)


def test_every_truncation_is_detected(tmp_path):
    path = tmp_path / "w.jg"
    jg.save({"w": jg.randn(3, 5), "b": jg.arange(4)}, path)
    raw = path.read_bytes()
    cut = tmp_path / "cut.jg"
    for n in list(range(0, 40)) + list(range(40, len(raw), 7)) + [len(raw) - 1]:
        cut.write_bytes(raw[:n])
        with pytest.raises(RuntimeError, match=r"jitgrad\.load: '.*cut\.jg' "):
            jg.load(cut)


def test_flipped_byte_in_data_is_detected(tmp_path):
    path = tmp_path / "w.jg"
    jg.save({"w": jg.randn(16)}, path)
    raw = bytearray(path.read_bytes())
    raw[-10] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(RuntimeError, match="checksum mismatch"):
        jg.load(path)


# ---------------------------------------------------------------- atomic writes
def test_failed_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.jg"
    jg.save({"w": jg.ones(3)}, path)
    old = path.read_bytes()

    def fail_midway(f, header, arrays, entries):
        f.write(header[:10])
        raise OSError("disk full")
    monkeypatch.setattr(S, "_write", fail_midway)
    with pytest.raises(OSError, match="disk full"):
        jg.save({"w": jg.zeros(3)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == old
    assert sorted(os.listdir(tmp_path)) == ["ckpt.jg"]  # the temporary file was removed
    assert jg.load(path)["w"].tolist() == [1.0, 1.0, 1.0]


def test_interrupted_rename_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.jg"
    jg.save([1, 2], path)

    def interrupted(src, dst):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        jg.save([3, 4], path)
    monkeypatch.undo()
    assert jg.load(path) == [1, 2] and os.listdir(tmp_path) == ["ckpt.jg"]


def test_save_keeps_permissions_and_replaces(tmp_path):
    path = tmp_path / "ckpt.jg"
    jg.save({"a": 1}, str(path))
    os.chmod(path, 0o640)
    jg.save({"a": 2}, path)
    assert jg.load(str(path)) == {"a": 2}
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_layout_is_documented(tmp_path):
    path = tmp_path / "w.jg"
    jg.save({"w": jg.tensor([1.0, 2.0])}, path)
    raw = path.read_bytes()
    magic, version, hlen, crc = struct.unpack_from("<8sIQI", raw)
    assert magic == b"\x93JITGRAD" and version == 2
    assert crc == zlib.crc32(raw[24:24 + hlen], zlib.crc32(raw[8:20]))
    header = json.loads(raw[24:24 + hlen])
    t = header["tensors"][0]
    start = -(-(24 + hlen) // 64) * 64 + t["offset"]
    assert np.frombuffer(raw[start:start + t["nbytes"]], "<f4").tolist() == [1.0, 2.0]


def test_module_state_dict_and_parameters(tmp_path):
    nn = pytest.importorskip("jitgrad.nn")
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    out = roundtrip({"model": model.state_dict(), "p": model[0].weight}, tmp_path)
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    fresh.load_state_dict(out["model"])
    x = jg.randn(5, 3)
    with jg.no_grad():
        np.testing.assert_array_equal(fresh(x).numpy(), model(x).numpy())
    assert isinstance(out["p"], nn.Parameter) and out["p"].requires_grad
    assert not out["model"]["0.weight"].requires_grad


def test_version_1_files_are_still_read(tmp_path):
    h = json.dumps({"format": "jitgrad", "tree": {"t": "list", "items": [1, "a"]}, "tensors": [],
                    "data_size": 0}).encode()
    pre = S._PREAMBLE.pack(S.MAGIC, 1, len(h))
    path = tmp_path / "old.jg"
    path.write_bytes(pre + h + b"\0" * (S._align(len(pre) + len(h)) - len(pre) - len(h)))
    assert jg.load(path) == [1, "a"]


def test_every_flipped_byte_is_detected_or_harmless(tmp_path):
    """One flipped byte in the header renames nothing silently: it is an error, or lands in padding."""
    path = tmp_path / "w.jg"
    obj = {"weight": jg.tensor([1.0, 2.0]), "bias": jg.tensor([3], dtype=jg.int64), "step": 7}
    jg.save(obj, path)
    raw = path.read_bytes()
    flipped = tmp_path / "flipped.jg"
    detected = 0
    for i in range(len(raw)):
        for bit in (0x01, 0x20):
            bad = bytearray(raw)
            bad[i] ^= bit
            flipped.write_bytes(bytes(bad))
            try:
                out = jg.load(flipped)
            except RuntimeError as e:
                assert "flipped.jg" in str(e)
                detected += 1
                continue
            assert sorted(out) == ["bias", "step", "weight"] and out["step"] == 7, i
            assert out["weight"].tolist() == [1.0, 2.0] and out["bias"].tolist() == [3], i
    assert detected > len(raw)  # every byte but the padding's


def test_flipped_key_byte_is_detected(tmp_path):
    path = tmp_path / "w.jg"
    jg.save({"weight": jg.ones(2)}, path)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b'"weight"', b'"weighT"'))
    with pytest.raises(RuntimeError, match=r"w\.jg' is corrupt \(header checksum mismatch\)"):
        jg.load(path)


@pytest.mark.parametrize("shape, message", [
    ([2 ** 70, 0], "impossible shape"),
    ([2 ** 62, 4, 0], "cannot be created"),
    ([1] * 65, "65 dimensions"),
])
def test_crafted_shapes_raise_runtime_error_naming_the_file(tmp_path, shape, message):
    header = {"format": "jitgrad", "tree": {"t": "tensor", "i": 0},
              "tensors": [entry(shape=shape, nbytes=0 if 0 in shape else 4)], "data_size": 64}
    with pytest.raises(RuntimeError, match=r"crafted\.jg' .*" + message):
        jg.load(craft(tmp_path, header, b"\0" * 64))


KILLED_WRITER = """
import os, sys, jitgrad as jg
from jitgrad import serialization as S
real = S._write
def write_then_die(f, *args):
    f.write(b"x" * 1000)
    f.flush()
    os._exit(9)  # killed mid-save: no cleanup runs
S._write = write_then_die
jg.save({"w": jg.ones(1000)}, sys.argv[1])
"""


def test_temporary_of_a_killed_writer_is_removed_by_the_next_save(tmp_path):
    path = tmp_path / "ckpt.jg"
    jg.save({"w": jg.zeros(3)}, path)
    r = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], timeout=120)
    assert r.returncode == 9
    left = [n for n in os.listdir(tmp_path) if n != "ckpt.jg"]
    assert len(left) == 1 and left[0].startswith(".ckpt.jg.") and left[0].endswith(".jgtmp")
    dead_pid = int(left[0].split(".")[3])
    other = tmp_path / (".other.jg.%d.x.jgtmp" % dead_pid)  # another path's temporary is not ours to remove
    other.write_bytes(b"")
    jg.save({"w": jg.ones(3)}, path)
    assert sorted(os.listdir(tmp_path)) == [other.name, "ckpt.jg"]
    assert jg.load(path)["w"].tolist() == [1.0, 1.0, 1.0]


def test_temporary_of_a_live_writer_is_kept(tmp_path):
    path = tmp_path / "ckpt.jg"
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as live:
        try:
            busy = tmp_path / (".ckpt.jg.%d.abc.jgtmp" % live.pid)
            busy.write_bytes(b"")
            jg.save([1], path)
            assert busy.exists()
        finally:
            live.kill()
