"""Image descriptions for text-only models: OCR text, context-conditioned captions, the description string."""

import io

from PIL import Image
from scripted import ScriptedBackend

from mmir.benchmarks.m2rag.describe import add_ocr, caption_images, page_context
from mmir.benchmarks.m2rag.records import (
    Chunk,
    ImageItem,
    M2RAGQuery,
    Webpage,
    image_description,
)
from mmir.data.images import CorruptImage
from mmir.llm.client import LLMClient


def png():
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 20, 30)).save(buf, format="PNG")
    return buf.getvalue()


def test_image_description_combines_what_is_known():
    assert image_description(ImageItem(0, "a", caption="A chart\nof sales")) == "A chart of sales"
    both = ImageItem(0, "a", caption="A chart", alt="bar chart", ocr="Q1 Q2\n10 20")
    assert image_description(both) == "A chart Alt text: bar chart Text in the image: Q1 Q2 10 20"
    assert image_description(ImageItem(0, "a", alt="only alt")) == "only alt"
    assert image_description(ImageItem(0, "a")) == "(no description available)"


def test_page_context_around_placeholder():
    page = Webpage(0, "t", "u", [Chunk(0, "one two three\n<IMAGE_PLACEHOLDER>[0]\n"),
                                 Chunk(1, "four <IMAGE_PLACEHOLDER>[1] five")])
    anchored = ImageItem(0, "a", split_id=0)
    assert page_context(page, anchored) == ("one two three\n", "\nfour  five")
    assert page_context(page, anchored, max_tokens=2) == (" three\n", "\nfour  five")
    loose = ImageItem(5, "b", anchored=False, split_id=None)
    assert page_context(page, loose) == ("one two three\n\nfour  five", "")


def test_caption_images_and_ocr():
    seen = []

    def caption(call):
        seen.append(call.messages[0]["content"])
        return f"caption {len(seen)}\nsecond line"

    page = Webpage(0, "t", "u", [Chunk(0, "Before text <IMAGE_PLACEHOLDER>[0] after text")],
                   [ImageItem(0, "p.png", data=png(), split_id=0), ImageItem(1, "bad.png", data=b"x", split_id=0),
                    ImageItem(2, "done.png", data=png(), caption="kept")])
    aux = [ImageItem("aux-0", "x.png", data=png(), is_aux=True)]
    q = M2RAGQuery("q", "What is shown?", [page], aux)
    rep = caption_images(q, LLMClient(ScriptedBackend(caption)))
    assert page.images[0].caption == "caption 1 second line" and page.images[2].caption == "kept"
    assert aux[0].caption == "caption 2 second line"
    assert rep.counts == {"captioned": 2, "caption_failed": 1}
    assert [p["type"] for p in seen[0]] == ["text", "image", "text"]
    assert "Before text" in seen[0][0]["text"] and "after text" in seen[0][2]["text"]
    assert "What is shown?" in seen[1][0]["text"]

    class Ocr:
        def caption(self, data, *, source):
            if data == b"x":
                raise CorruptImage(source, "not an image")
            return "TEXT"

    rep = add_ocr(page.images, Ocr())
    assert [im.ocr for im in page.images] == ["TEXT", "", "TEXT"]
    assert rep.counts == {"ocr_done": 2, "ocr_failed": 1}
