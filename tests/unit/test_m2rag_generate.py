"""M2RAG generation strategies (spec §4-5) with canned replies, and HTML rendering."""

import base64
import io
import re

import numpy as np
import pytest
from PIL import Image
from scripted import ScriptedBackend

from mmir.benchmarks.m2rag.generate import (
    Answer,
    input_segments,
    multi_stage,
    parse_output_images,
    render_html,
    render_html_with_report,
    separate,
    single_stage,
)
from mmir.benchmarks.m2rag.records import (
    PLACEHOLDER,
    Chunk,
    ImageItem,
    M2RAGQuery,
    Webpage,
)
from mmir.benchmarks.m2rag.selection import SelectionConfig, select_input
from mmir.llm.backends import GenerationFailure
from mmir.llm.client import LLMClient


def png(color, size=(6, 4)):
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def query():
    cat = ImageItem(0, "cache/p0/0.png", image_url="http://web/cat.png", split_id=0, final_score=9,
                    caption="A tabby cat\non a sofa", data=png((200, 100, 0)))
    dog = ImageItem(1, "cache/p1/1.png", image_url="http://web/dog.png", split_id=1, final_score=8,
                    caption="A dog barking", data=png((0, 100, 200)))
    aux = ImageItem("aux-0", "cache/aux/0.jpg", final_score=5, caption="aux pic", is_aux=True, data=png((9, 9, 9)))
    p0 = Webpage(0, "Cats", "http://cats", [Chunk(0, "Cats purr. <IMAGE_PLACEHOLDER>[0] Cats sleep.", 9)], [cat])
    p1 = Webpage(1, "Dogs", "http://dogs", [Chunk(0, "Intro. ", 5), Chunk(1, "Dogs bark. <IMAGE_PLACEHOLDER>[1]", 8)], [dog])
    return M2RAGQuery("q7", "Cats or dogs?", [p0, p1], [aux])


def test_input_layout_llm_and_mllm():
    sel = select_input(query())
    segs = input_segments(sel, "INSTRUCTION\n", "llm")
    text = "".join(segs)
    assert text.startswith("INSTRUCTION\n## Webpage 0\n```markdown\nCats purr. ![A tabby cat on a sofa](images/0.png) Cats sleep.")
    assert "## Webpage 1\n```markdown\nIntro. Dogs bark. ![A dog barking](images/1.png)\n```" in text
    assert "# Auxiliary Images\n![aux pic](images/2.jpg)\n" in text
    assert text.endswith("# Generated Document\n")
    segs = input_segments(sel, "I\n", "mllm")
    kinds = [type(s).__name__ for s in segs]
    assert kinds.count("ImagePart") == 3
    i = kinds.index("ImagePart")
    assert segs[i - 1] == "![" and segs[i + 1] == "](images/0.png)"


def test_single_stage_accepts_rejects_and_resolves():
    reply = ("Sure:\n```markdown\n# Answer\nCats are calm.\n![Calm cat](images/0.png)\n"
             "See ![oops](images/7.png) and again ![dup](images/0.png).\n![A dog](https://x/images/1.jpg)\nEnd.\n```")
    stub = ScriptedBackend(lambda text: reply)
    sel = select_input(query())
    ans = single_stage(sel, LLMClient(stub))
    assert [o.id for o in ans.output_images] == [0, 1]
    assert [o.image_caption for o in ans.output_images] == ["Calm cat", "A dog"]
    assert ans.output_images[0].cached_image_url == "cache/p0/0.png"
    assert ans.stats == {"rejected_images": 2}
    assert ans.placeholder_response == ("# Answer\nCats are calm.\n<IMAGE_PLACEHOLDER>\nSee  and again .\n"
                                        "<IMAGE_PLACEHOLDER>\nEnd.")
    assert ans.processed_response.count("<figure") == 2 and 'src="http://web/cat.png"' in ans.processed_response
    assert "<figcaption>Calm cat</figcaption>" in ans.processed_response
    assert ans.markdown.count("![Calm cat](images/0.png)") == 1 and "![A dog](images/1.png)" in ans.markdown
    assert ans.response == "# Answer\nCats are calm.\n\nSee  and again .\n\nEnd."
    assert [c.label for c in ans.calls] == ["single_stage"]
    # the LLM prompt carries descriptions, the model sees the pseudo URLs
    assert "![A tabby cat on a sofa](images/0.png)" in stub.calls[0].messages[0]["content"]


def test_parse_output_images_edge_cases():
    sel = select_input(query())
    proc, place, outs, rej = parse_output_images("no images at all", sel.images)
    assert (proc, place, outs, rej) == ("no images at all", "no images at all", [], 0)
    _, place, outs, rej = parse_output_images("![](images/2.jpg)", sel.images)
    assert place == PLACEHOLDER and outs[0].image_caption == "" and rej == 0


def _piece(text):
    m = re.search(r"# Piece of the answer\n```markdown\n(.*?)\n```", text, re.S)
    return m.group(1)


def test_multi_stage_placement_segments_and_refinement():
    def reply(text):
        if "text only" in text:
            return "```markdown\nL0\nL1\nL2\nL3\n```"
        if "Find the place" in text:
            if "A tabby cat" in text:
                return "Cat caption\n2"
            if "A dog barking" in text:
                return "Dog caption\n-1"
            return "Aux caption\n1"
        if "You polish one piece" in text:
            piece = _piece(text)
            if not piece:
                return "I can't refine an empty piece."
            return f"R({piece}) see ![img](images/0.png) and [a link](http://x)"
        raise AssertionError(text[:80])

    stub = ScriptedBackend(reply)
    sel = select_input(query())
    ans = multi_stage(sel, LLMClient(stub))
    # aux before line 1, cat before line 2; the dog does not fit
    assert [o.id for o in ans.output_images] == [2, 0]
    assert [o.image_caption for o in ans.output_images] == ["Aux caption", "Cat caption"]
    assert ans.placeholder_response == ("L0\n<IMAGE_PLACEHOLDER>\nR(L1) see img and a link"
                                        "\n<IMAGE_PLACEHOLDER>\nR(L2\nL3) see img and a link")
    assert ans.processed_response.startswith("L0") and ans.processed_response.count("<figure") == 2
    assert ans.stats == {"placement_unplaced": 1}
    stages = [c.label + (f"[{c.context['image']}]" if "image" in c.context else "") for c in ans.calls]
    assert stages == ["multi_stage.text", "multi_stage.place[0]", "multi_stage.place[1]", "multi_stage.place[2]",
                      "multi_stage.refine[2]", "multi_stage.refine[0]"]
    # every placement prompt numbers the stage-1 lines
    assert "[0] L0\n[1] L1\n[2] L2\n[3] L3" in stub.calls[1].messages[0]["content"]


def test_multi_stage_shared_line_gives_empty_segment_and_refusal_is_kept():
    def reply(text):
        if "text only" in text:
            return "L0\nL1"
        if "Find the place" in text:
            return "cap\n1" if "A tabby cat" in text or "A dog" in text else "no\n-1"
        piece = _piece(text)
        return "I can't do that." if not piece else f"R({piece})"

    ans = multi_stage(select_input(query()), LLMClient(ScriptedBackend(reply)))
    assert [o.id for o in ans.output_images] == [0, 1]
    assert ans.placeholder_response == "L0\n<IMAGE_PLACEHOLDER>\nI can't do that.\n<IMAGE_PLACEHOLDER>\nR(L1)"
    assert ans.stats["refusals"] == 1


def test_multi_stage_without_placement_returns_stage1_text():
    ans = multi_stage(select_input(query()), LLMClient(ScriptedBackend(lambda t: "only text" if "text only" in t else "x\n-1")))
    assert ans.placeholder_response == "only text" and ans.output_images == []


def test_generation_failure_propagates():
    stub = ScriptedBackend(lambda text: GenerationFailure("timeout", "slow"))
    caller = LLMClient(stub)
    with pytest.raises(GenerationFailure):
        single_stage(select_input(query()), caller)
    assert caller.audit.records[-1].ok is False


def word_encoder(texts):
    vocab = ["cat", "dog"]
    return np.array([[t.lower().count(w) for w in vocab] + [0.01] for t in texts], dtype=float)


def test_separate_murar():
    summary = "# Title\nCats are great pets.\n\nDogs bark loudly.\n# References\n0 1 1 5"

    def reply(text):
        if "Write a well organised" in text:
            assert "IMAGE_PLACEHOLDER" not in text and "![" not in text
            return f"```markdown\n{summary}\n```"
        m = re.search(r"# Answer\n```markdown\n(.*)\n```", text, re.S)
        return m.group(1)  # the polish keeps everything

    sel = select_input(query(), SelectionConfig.murar())
    stub = ScriptedBackend(reply)
    ans = separate(sel, LLMClient(stub), word_encoder)
    refine_prompt = stub.calls[1].messages[0]["content"]
    assert "![A tabby cat on a sofa](images/0.png)\nCats are great pets." in refine_prompt
    assert "![A dog barking](images/1.png)\nDogs bark loudly." in refine_prompt
    assert [o.cached_image_url for o in ans.output_images] == ["cache/p0/0.png", "cache/p1/1.png"]
    assert [o.id for o in ans.output_images] == [0, 1]  # global input indices
    assert ans.processed_response.endswith("## References\n1. Cats - http://cats\n2. Dogs - http://dogs\n")
    assert "0 1 1 5" in ans.placeholder_response  # references are rebuilt in the processed text only
    assert ans.stats["references"] == 2 and ans.stats["images_matched"] == 2
    # the released counter never advances: every image is images/0 and only the first survives
    quirky = separate(sel, LLMClient(ScriptedBackend(reply)), word_encoder, released_quirks=True)
    assert len(quirky.output_images) == 1 and quirky.stats["rejected_images"] == 1


# -------------------------------------------------------------------------------------------- rendering
def test_render_html_embeds_images_and_resolves_placeholders():
    sel = select_input(query())
    reply = "```markdown\n# Pets <script>alert(1)</script>\n![Calm cat](images/0.png)\nText.\n![Aux](images/2.jpg)\n```"
    ans = single_stage(sel, LLMClient(ScriptedBackend(lambda t: reply)))
    page, rep = render_html_with_report(ans, sel.images)
    assert rep.embedded == 2 and rep.dangling == []
    uris = re.findall(r'src="data:(image/[a-z]+);base64,([^"]+)"', page)
    assert [u[0] for u in uris] == ["image/png", "image/png"]
    assert base64.b64decode(uris[0][1]) == sel.images[0].image.data
    assert "<IMAGE_PLACEHOLDER>" not in page and "<script>" not in page and "&lt;script&gt;" in page
    assert "<figcaption>Calm cat</figcaption>" in page and "Cats or dogs?" in page
    assert page.startswith("<!DOCTYPE html>") and "http" not in page.split("<body>")[1].split("Cats or dogs?")[0]
    # the markdown form renders the same images
    page2, rep2 = render_html_with_report(ans.markdown, sel.images)
    assert rep2.embedded == 2 and rep2.dangling == []


def test_render_html_reports_dangling_placeholders(caplog):
    sel = select_input(query())
    ans = Answer("single_stage", "llm", "q7", "Cats or dogs?", "", f"a {PLACEHOLDER} b {PLACEHOLDER} c",
                 [], "", [])
    ans.output_images = single_stage(sel, LLMClient(ScriptedBackend(lambda t: "![x](images/1.png)"))).output_images
    page, rep = render_html_with_report(ans, sel.images)
    assert rep.embedded == 1 and len(rep.dangling) == 1 and "placeholder 1 has no output image" in rep.dangling[0]
    assert 'class="dangling-image"' in page
    page, rep = render_html_with_report("see ![gone](images/42.png) and <IMAGE_PLACEHOLDER>", sel.images)
    assert rep.embedded == 0 and len(rep.dangling) == 2
    with caplog.at_level("WARNING"):
        render_html("![gone](images/42.png)", sel.images)
    assert "dangling" in caplog.text
    # an image whose bytes are unreadable is dangling too
    broken = [ImageItem(0, "x.png", data=b"not an image")]
    _, rep = render_html_with_report("![b](images/0.png)", broken)
    assert rep.embedded == 0 and len(rep.dangling) == 1


def test_multi_stage_mllm_sends_pixels():
    stub = ScriptedBackend(lambda t: "L0\nL1" if "text only" in t else ("cap\n0" if "Find the place" in t else "R"))
    ans = multi_stage(select_input(query()), LLMClient(stub), mode="mllm")
    place_msgs = [m.messages for m in stub.calls if "Find the place" in m]
    assert len(place_msgs) == 3
    assert all([p["type"] for p in m[0]["content"]] == ["text", "image", "text"] for m in place_msgs)
    assert Image.open(io.BytesIO(place_msgs[0][0]["content"][1]["image"])).size == (6, 4)  # never enlarged
    assert len(ans.output_images) == 3 and ans.mode == "mllm"
