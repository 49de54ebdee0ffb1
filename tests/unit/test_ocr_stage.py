"""The OCR stage (issue 20): shards that cover every image once, a process pool whose output equals the serial one
byte for byte, a cache key with every part that changes the text, the Tesseract engine on a rendered image, corrupt
images counted instead of stopping the shard."""

from __future__ import annotations

import io
import multiprocessing
import shutil
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import pandas as pd
import pytest
from conftest import write_domain
from PIL import Image, ImageDraw, ImageFont

import mmir.encoders.ocr as ocr_mod
import mmir.encoders.ocr_engines as engines
from mmir.core import paths
from mmir.encoders.ocr import OcrCaptioner
from mmir.encoders.ocr_pool import OcrPool
from mmir.workflow import ocr_steps
from mmir.workflow.rules import RULES
from mmir.workflow.shards import n_ocr_shards, shard_range
from mmir.workflow.validate import validate_config

needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None,
                                     reason="the tesseract binary is absent (Debian: apt-get install tesseract-ocr)")


def _png(words: str = "", size=(420, 110)) -> bytes:
    img = Image.new("RGB", size, "white")
    if words:
        ImageDraw.Draw(img).text((20, 20), words, fill="black", font=ImageFont.load_default(size=48))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _images_parquet(path, rows) -> None:
    pd.DataFrame(rows, columns=["path", "bytes", "ok"]).to_parquet(path)


# ------------------------------------------------------------------------------------------------ shard plan
def _config(tmp_path, n_images: int, shard_size: int, engine: str = "rapidocr") -> dict:
    root = write_domain(tmp_path / "raw")
    (root / "document_images").mkdir()
    _images_parquet(root / "document_images" / "d.parquet", [[f"d/i{i}.png", b"", True] for i in range(n_images)])
    return validate_config({"datasets": {"x": {"source": "local", "root": str(root), "domains": ["d"]}},
                            "systems": {"bm25": {"kind": "bm25"}},
                            "captioners": {"ocr": {"kind": "ocr", "shard_size": shard_size, "engine": engine}}})


@pytest.mark.parametrize("planned, size, prepared", [(10, 3, 10), (10, 3, 7), (10, 3, 14), (3, 5, 3), (0, 4, 2), (12, 4, 12)])
def test_shards_cover_every_image_exactly_once(tmp_path, planned, size, prepared):
    cfg = _config(tmp_path, planned, size)
    shards = n_ocr_shards(cfg, "x", "d", "ocr", "images")
    assert shards == max(1, -(-planned // size))  # ceil, at least one
    covered = [i for s in range(shards) for i in range(*shard_range(prepared, s, shards, size))]
    assert covered == list(range(prepared))
    assert n_ocr_shards(cfg, "x", "d", "ocr", "query_images") == 1
    # the caption job of the domain reads exactly these shards: corpus shards in order, then the query images
    w = {"dataset": "x", "domain": "d", "captioner": "ocr"}
    job = RULES["caption"].job(cfg, w)
    want = [paths.OCR_SHARD.format(kind="images", shard=f"{s:05d}", **w) for s in range(shards)]
    assert job.input["ocr_shards"] == want + [paths.OCR_SHARD.format(kind="query_images", shard="00000", **w)]
    assert len(job.input["ocr_stats"]) == shards + 1
    ocr_job = RULES["ocr"].job(cfg, {**w, "kind": "images", "shard": "00000"})
    assert ocr_job.params["shards"] == shards and ocr_job.input["images"].endswith("images.parquet")


@needs_tesseract
def test_shard_jobs_then_gather_give_each_image_once_and_count_corrupt_ones(tmp_path):
    pytest.importorskip("pytesseract")
    cfg = _config(tmp_path, 5, 2, engine="tesseract")
    cap = cfg["captioners"]["ocr"]
    rows = [[f"d/i{i}.png", _png(w), True] for i, w in enumerate(["ALPHA", "", "GAMMA", "", "EPSILON"])]
    rows[1] = ["d/broken.png", b"\x89PNG not really", True]  # passed prepare's flag but does not decode
    rows[3] = ["d/flagged.png", b"", False]  # prepare marked it
    _images_parquet(tmp_path / "images.parquet", rows)
    shards = n_ocr_shards(cfg, "x", "d", "ocr", "images")
    assert shards == 3
    outs, stats = [], []
    for s in range(shards):
        outs.append(tmp_path / f"s{s}.parquet")
        stats.append(tmp_path / f"s{s}.stats.json")
        ocr_steps.ocr_shard(tmp_path / "images.parquet", "images", cap, tmp_path / "cache.sqlite", s, shards, 1, outs[-1], stats[-1])
    _images_parquet(tmp_path / "query_images.parquet", [["d/query_q/image_1.png", _png("QUERY"), True]])
    outs.append(tmp_path / "q.parquet")
    stats.append(tmp_path / "q.stats.json")
    ocr_steps.ocr_shard(tmp_path / "query_images.parquet", "query_images", cap, tmp_path / "cache.sqlite", 0, 1, 1, outs[-1], stats[-1])
    n = ocr_steps.gather_captions(outs, stats, tmp_path / "ocr.parquet", tmp_path / "ocr.stats.json")
    df = pd.read_parquet(tmp_path / "ocr.parquet")
    assert df["path"].tolist() == [r[0] for r in rows] + ["d/query_q/image_1.png"]
    assert df["role"].tolist() == ["corpus"] * 5 + ["query"]
    text = dict(zip(df["path"], df["text"]))
    assert "ALPHA" in text["d/i0.png"] and "EPSILON" in text["d/i4.png"] and "QUERY" in text["d/query_q/image_1.png"]
    assert text["d/broken.png"] == "" and text["d/flagged.png"] == ""
    assert n["images"] == 6 and n["skipped_corrupt"] == 2 and n["failed"] == 0 and n["engine_calls"] == 4


# ------------------------------------------------------------------------------------------- parallel = serial
@pytest.mark.parametrize("engine", ["rapidocr", "rapidocr/openvino", pytest.param("tesseract", marks=needs_tesseract)])
def test_parallel_output_equals_serial_byte_for_byte(tmp_path, engine):
    pytest.importorskip({"rapidocr": "rapidocr_onnxruntime", "rapidocr/openvino": "openvino"}.get(engine, "pytesseract"))
    # near-square images: RapidOCR scales the short side up to 736 pixels, so a wide strip costs several times more
    rows = [[f"d/i{i}.png", _png(w, size=(240, 160)), True] for i, w in enumerate(["ONE", "TWO", "", "FOUR"])]
    rows.append(["d/bad.png", b"GIF89a broken", True])
    _images_parquet(tmp_path / "images.parquet", rows)
    engine, _, runtime = engine.partition("/")
    cap = {"kind": "ocr", "engine": engine, "runtime": runtime or "onnxruntime"}
    for threads in (1, 2):
        n = ocr_steps.ocr_shard(tmp_path / "images.parquet", "images", cap, tmp_path / f"cache{threads}.sqlite", 0, 1, threads,
                                tmp_path / f"out{threads}.parquet", tmp_path / f"out{threads}.stats.json")
        assert n["workers"] == threads and n["engine_calls"] == 4 and n["skipped_corrupt"] == 1
    assert (tmp_path / "out1.parquet").read_bytes() == (tmp_path / "out2.parquet").read_bytes()
    texts = pd.read_parquet(tmp_path / "out2.parquet")["text"].tolist()
    assert "FOUR" in texts[3].upper() and texts[2] == "" and texts[4] == ""


# ------------------------------------------------------------------------------------------------ cache key
def test_cache_hits_only_when_every_key_part_is_the_same(tmp_path, monkeypatch):
    pytest.importorskip("rapidocr_onnxruntime")
    db = tmp_path / "cache.sqlite"
    data = _png("KEY")
    with OcrCaptioner(db, device="cpu") as first:
        text = first.read_many([data])[0].text
        assert "KEY" in text
    with OcrCaptioner(db, device="cpu") as same:
        assert same.cached([data]) == [text]  # hit
        assert same.read_many([data])[0].status == "cached" and same.calls == 0
        assert same.cached([_png("KEY", size=(421, 110))]) == [None]  # other image bytes: miss

    def misses(**kw) -> bool:
        with OcrCaptioner(db, **kw) as other:
            return other.cached([data]) == [None]

    assert misses(device="cpu", min_score=0.6)  # a setting
    monkeypatch.setattr(engines, "cuda_available", lambda: True)
    assert misses(device=None)  # the provider (cuda when onnxruntime offers it)
    monkeypatch.undo()
    monkeypatch.setattr(engines, "_dist_version", lambda name: "0.0.1")
    assert misses(device="cpu")  # the engine's version
    monkeypatch.undo()
    onnxruntime = OcrCaptioner(None, device="cpu", runtime="onnxruntime").key(data)
    monkeypatch.setattr(engines, "_onnxruntime_version", lambda: "0.0.1")
    assert OcrCaptioner(None, device="cpu", runtime="onnxruntime").key(data) != onnxruntime  # onnxruntime's version
    monkeypatch.undo()
    monkeypatch.setattr(ocr_mod, "LAYOUT_VERSION", "rows-v0")
    assert misses(device="cpu")  # the layout rule
    monkeypatch.undo()
    assert misses(device="cpu", runtime="onnxruntime")  # the runtime (the default is openvino)
    assert not misses(device="cpu")  # everything back: a hit again


def test_openvino_key_names_its_version_and_a_gpu_runs_onnxruntime(monkeypatch):
    pytest.importorskip("openvino")
    ov = OcrCaptioner(None, device="cpu")  # the default runtime
    assert ov.spec.runtime == "openvino" and ";openvino==" in ov.engine_version and "precision=f32" in ov.engine_version
    real = engines._dist_version
    monkeypatch.setattr(engines, "_dist_version", lambda name: "0.0.1" if name == "openvino" else real(name))
    assert ov.key(b"x") != OcrCaptioner(None, device="cpu", runtime="openvino").key(b"x")  # openvino's version
    monkeypatch.undo()
    assert ov.key(b"x") == OcrCaptioner(None, device="cpu", runtime="openvino").key(b"x")
    monkeypatch.setattr(engines, "cuda_available", lambda: True)
    gpu = OcrCaptioner(None, runtime="openvino")  # device null with CUDA offered: onnxruntime's CUDA provider
    assert gpu.spec.device == "cuda" and gpu.spec.runtime == "onnxruntime" and "provider=cuda" in gpu.engine_version
    with pytest.raises(ValueError, match="openvino runs rapidocr on cpu"):
        engines.EngineSpec("rapidocr", "cuda", runtime="openvino")
    with pytest.raises(ValueError, match="OCR runtime 'tvm'"):
        engines.EngineSpec("rapidocr", "cpu", runtime="tvm")


@needs_tesseract
def test_tesseract_key_parts(tmp_path, monkeypatch):
    pytest.importorskip("pytesseract")
    base = OcrCaptioner(None, engine="tesseract")
    assert base.engine_version.startswith("tesseract==") and "psm=11" in base.engine_version
    assert base.key(b"x") != OcrCaptioner(None).key(b"x")  # the engine
    assert base.key(b"x") != OcrCaptioner(None, engine="tesseract", lang="eng+osd").key(b"x")  # the language models
    monkeypatch.setattr(engines, "tesseract_version", lambda: "0.0.1")
    assert base.key(b"x") != OcrCaptioner(None, engine="tesseract").key(b"x")  # the binary's version
    monkeypatch.undo()
    monkeypatch.setattr(engines, "_dist_version", lambda name: "0.0.1")
    assert base.key(b"x") != OcrCaptioner(None, engine="tesseract").key(b"x")  # pytesseract's version
    monkeypatch.undo()
    assert base.key(b"x") == OcrCaptioner(None, engine="tesseract").key(b"x")


# ------------------------------------------------------------------------------------------------ tesseract
@needs_tesseract
def test_tesseract_reads_a_rendered_word():
    pytest.importorskip("pytesseract")
    with OcrCaptioner(None, engine="tesseract") as ocr:
        text = ocr.caption(_png("RETRIEVAL"), source="rendered.png")
    assert "RETRIEVAL" in text.upper().split()
    with OcrCaptioner(None, engine="tesseract") as ocr:
        assert ocr.caption(_png(""), source="blank.png") == ""


def test_tesseract_missing_language_model_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(engines, "tessdata_dir", lambda: tmp_path)
    engines.traineddata_hash.cache_clear()
    try:
        with pytest.raises(engines.MmirError, match="tesseract-ocr-xyz"):
            engines.traineddata_hash("xyz")
    finally:
        engines.traineddata_hash.cache_clear()


def test_cuda_asked_without_it_falls_back_to_cpu_with_a_message(monkeypatch, caplog):
    pytest.importorskip("onnxruntime")
    monkeypatch.setattr(engines, "cuda_available", lambda: False)
    with caplog.at_level("WARNING", logger="mmir.encoders.ocr_engines"):
        assert engines.resolve_device("cuda") == "cpu"
    assert "running RapidOCR on cpu" in caplog.text
    assert engines.resolve_device(None) == "cpu" and engines.resolve_device("cpu") == "cpu"
    monkeypatch.setattr(engines, "cuda_available", lambda: True)
    assert engines.resolve_device(None) == "cuda" and engines.resolve_device("cpu") == "cpu"


def test_tables_name_a_tesseract_captioner_and_leave_the_default_alone(tmp_path):
    default = _config(tmp_path / "a", 4, 2)
    notes = RULES["report"].job(default, {"task": "task2"}).params["notes"]
    assert not any("Tesseract" in n for n in notes)
    tess = _config(tmp_path / "b", 4, 2, engine="tesseract")
    for rule, w, key in (("report", {"task": "task2"}, "notes"), ("report", {"task": "task1"}, "notes")):
        lines = RULES[rule].job(tess, w).params[key]
        assert "OCR captioner `ocr` reads images with Tesseract (lang eng), not RapidOCR: its image text differs." in lines


# ------------------------------------------------------------------------------------------ speed, same output
def test_engine_settings_give_rapidocr_defaults_outputs_bitwise():
    """mmir's RapidOCR (memory arena, no spinning, table normalisation) returns exactly what RapidOCR built with its own
    session options returns: boxes, texts and scores, bit for bit."""
    pytest.importorskip("rapidocr_onnxruntime")
    import numpy as np
    from rapidocr_onnxruntime import RapidOCR

    reference = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)
    ours = engines.EngineSpec("rapidocr", "cpu").build()
    assert isinstance(ours._ocr.text_det.get_preprocess(600), engines.TableDetPreProcess)
    for words, size in [("SPEED ONE", (420, 110)), ("2 + 3 = 5", (300, 300)), ("", (90, 60))]:
        img = Image.open(io.BytesIO(_png(words, size=size))).convert("RGB")
        bgr = np.ascontiguousarray(np.asarray(img)[:, :, ::-1])
        expected = [(tuple(map(tuple, box)), text, score) for box, text, score in reference(bgr)[0] or []]
        got = [(tuple(map(tuple, l.box)), l.text, l.score) for l in ours.read(img)]
        assert got == [(tuple((float(x), float(y)) for x, y in b), t, float(s)) for b, t, s in expected]
        assert bool(got) == bool(words)


def _openvino_and_onnxruntime_lines(cases):
    """In a spawned worker (OpenVINO stays out of the test process, see :mod:`mmir.encoders.ocr_pool`): the
    OpenVINO sessions' settings and both runtimes' lines for each ``(words, size)``."""
    ort = engines.EngineSpec("rapidocr", "cpu").build()
    ov = engines.EngineSpec("rapidocr", "cpu", runtime="openvino").build()
    sessions = (ov._ocr.text_det.infer, ov._ocr.text_cls.infer, ov._ocr.text_rec.session)
    settings = [(type(s).__name__, str(s.compiled.get_property("INFERENCE_PRECISION_HINT")),
                 s.compiled.get_property("INFERENCE_NUM_THREADS"), s.compiled.get_property("ENABLE_CPU_PINNING")) for s in sessions]
    images = [Image.open(io.BytesIO(_png(words, size=size))).convert("RGB") for words, size in cases]
    return settings, [(ort.read(img), ov.read(img)) for img in images]


def test_openvino_runtime_reads_what_onnxruntime_reads():
    """The same ONNX models on OpenVINO (float32): the same lines and texts; boxes within a pixel, scores within 1e-4
    (other kernels, other rounding)."""
    pytest.importorskip("openvino")
    pytest.importorskip("rapidocr_onnxruntime")
    cases = [("SPEED ONE", (420, 110)), ("2 + 3 = 5", (300, 300)), ("LINE A\nLINE B", (500, 260)), ("", (90, 60))]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        settings, results = pool.submit(_openvino_and_onnxruntime_lines, cases).result()
    # float32 even where the CPU has bfloat16 (AMX); one thread, not pinned (workers share the cores)
    assert settings == [("OpenVinoSession", "<Type: 'float32'>", 1, False)] * 3
    for (words, _), (want, got) in zip(cases, results):
        assert [l.text for l in got] == [l.text for l in want] and bool(got) == bool(words)
        for g, w in zip(got, want):
            assert g.score == pytest.approx(w.score, abs=1e-4)
            assert max(abs(a - b) for p, q in zip(g.box, w.box) for a, b in zip(p, q)) <= 1.0


def test_openvino_captioner_on_one_worker_keeps_openvino_out_of_this_process(tmp_path):
    """OpenVINO loaded next to torch and pyarrow corrupted the interpreter's heap (a segfault minutes later), so even
    ``workers=1`` reads on a spawned worker; checked in a fresh interpreter, where nothing else imported it."""
    pytest.importorskip("openvino")
    pytest.importorskip("rapidocr_onnxruntime")
    png = tmp_path / "x.png"
    png.write_bytes(_png("HELLO", size=(300, 120)))
    code = ("import sys\nfrom pathlib import Path\nfrom mmir.encoders.ocr import OcrCaptioner\n"
            "if __name__ == '__main__':\n"
            f"    with OcrCaptioner(None, device='cpu', runtime='openvino', workers=1) as cap:\n"
            f"        print(repr(cap.caption(Path({str(png)!r}).read_bytes())), 'openvino' in sys.modules)\n")
    script = tmp_path / "ocr_one.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=True).stdout.split()
    assert out == ["'HELLO'", "False"]


def test_table_normalisation_equals_rapidocr_preprocessing():
    pytest.importorskip("rapidocr_onnxruntime")
    import numpy as np
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DetPreProcess

    rng = np.random.default_rng(0)
    for mean, std, shape in [([0.5] * 3, [0.5] * 3, (333, 517, 3)), ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225], (800, 64, 3))]:
        pre = DetPreProcess(736, "min", mean, std)
        img = rng.integers(0, 256, size=shape, dtype=np.uint8)
        want = pre(img)
        got = engines.TableDetPreProcess(pre)(img)
        assert got.dtype == want.dtype == np.float32 and got.shape == want.shape and np.array_equal(got, want)
    floats = rng.random((40, 50, 3)).astype(np.float32)  # not 8-bit: RapidOCR's own code
    assert np.array_equal(engines.TableDetPreProcess(pre)(floats), pre(floats))


def test_work_estimates_rapidocr_detector_pixels():
    from mmir.encoders.ocr_pool import DET_SHORT_SIDE, work

    strip, square = _png(size=(2000, 100)), _png(size=(600, 600))
    # RapidOCR scales the short side up to 736: a 2000 x 100 strip becomes 14,720 x 736, a 600 x 600 square 736 x 736
    assert work(strip) == pytest.approx(2000 * DET_SHORT_SIDE / 100 * DET_SHORT_SIDE)
    assert work(square) == pytest.approx(DET_SHORT_SIDE * DET_SHORT_SIDE)
    assert work(strip, "tesseract") == 2000 * 100 < work(square, "tesseract") == 600 * 600
    assert work(_png(size=(1000, 800))) == 1000 * 800  # no scaling above the short side
    assert work(b"not an image") == 0.0


def test_pool_keeps_all_its_workers_after_a_small_first_call():
    """The pool is sized by ``workers``, not by its first call: OpenVINO's first call may hold a single image."""
    pytest.importorskip("rapidocr_onnxruntime")
    datas = [_png("ONE", size=(240, 160)), b"broken", _png("TWO", size=(240, 160))]
    pool = OcrPool(engines.EngineSpec("rapidocr", "cpu"), workers=3)
    try:
        first = dict(pool.map_unordered([(d, f"a{i}.png") for i, d in enumerate(datas[:2])]))
        second = dict(pool.map_unordered([(d, f"b{i}.png") for i, d in enumerate(datas)]))
        assert pool._executor._max_workers == 3
    finally:
        pool.close()
    assert [first[i].corrupt for i in range(2)] == [False, True] and "ONE" in " ".join(l.text for l in first[0].lines).upper()
    assert [second[i].corrupt for i in range(3)] == [False, True, False]
    assert "TWO" in " ".join(l.text for l in second[2].lines).upper()


def test_pool_returns_each_result_at_its_index_and_errors_in_input_order():
    pytest.importorskip("rapidocr_onnxruntime")
    datas = [b"broken-0", _png(size=(200, 120)), b"broken-2", _png("WIDE", size=(900, 100)), b"broken-4", b"broken-5",
             b"broken-6", b"broken-7"]
    sources = [f"img{i}.png" for i in range(len(datas))]
    with OcrCaptioner(None, device="cpu", workers=2) as ocr:
        out = ocr.read_many(datas, sources=sources)
        assert [o.status for o in out] == ["corrupt", "read", "corrupt", "read", "corrupt", "corrupt", "corrupt", "corrupt"]
        assert "WIDE" in out[3].text.upper() and out[1].text == ""
        assert [e.split(":")[0] for e in ocr.errors] == ["img0.png", "img2.png", "img4.png", "img5.png", "img6.png"]
