"""Conflicts across passages about the same subject, whatever their titles (issue 25).

The seeds' case: a blog says a model has 70 billion parameters, the official
documentation (another title) says 130 billion. The subject is established by
the text (named in the sentence, or named alone in the sentence right before
"It ..."/"The model ..."), titles only narrow it ("Orion-7 (robot)", a longer
name the text uses). The more credible source leads; both are cited. Passages
about different things that both carry a number never conflict.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.models import HashingEmbedder
from actors.rerank import Credibility
from reactive_rag import Engine
from reactive_rag.agent import verify
from reactive_rag.index import CorpusIndex, Document
from reactive_rag.judgement.offline import conflict_claims, find_conflicts
from streams import ConflictDetected, EvidenceChunk

QUESTION = "How many parameters does Orion-7 have?"
DOCS_URL = "https://orion-lm.readthedocs.io/en/latest/model.html"  # *.readthedocs.io: 1.2
BLOG_URL = "https://techjournal.example.com/2024/orion-7-first-look"  # unlisted: 1.0


def chunk(cid: str, text: str, title: str, url: str = "", position: int = 0) -> EvidenceChunk:
    return EvidenceChunk(id=cid, text=text, title=title, url=url, position=position)


OFFICIAL = chunk("doc", "Orion-7 is a large language model. It has 130 billion parameters "
                        "and a context window of 32,000 tokens.",
                 title="Orion-7 model reference", url=DOCS_URL)
BLOG = chunk("blog", "I tried Orion-7 for a week. The model has 70 billion parameters, "
                     "which makes it fast on one card.",
             title="First look: a week with a new model", url=BLOG_URL)


# --- the seeds' case ----------------------------------------------------------------------


def test_a_blog_and_the_official_docs_with_different_titles_conflict() -> None:
    (conflict,) = find_conflicts(QUESTION, [BLOG, OFFICIAL], Credibility.defaults())
    assert conflict.subject == "Orion-7" and conflict.attribute == "parameters"
    assert [s.chunk_id for s in conflict.sides] == ["doc", "blog"]  # the official value leads
    assert [s.value for s in conflict.sides] == ["130 billion parameters",
                                                 "70 billion parameters"]
    assert [s.credibility for s in conflict.sides] == [1.2, 1.0]
    assert conflict.preferred == 0
    # a side read through "It"/"The model" quotes the sentence that names the subject too
    assert conflict.sides[0].quote == OFFICIAL.text
    assert conflict.sides[1].quote == BLOG.text
    by_id = {"doc": OFFICIAL, "blog": BLOG}
    for side in conflict.sides:
        assert side.quote in by_id[side.chunk_id].text and side.value in side.quote


def test_without_credibility_no_side_is_preferred() -> None:
    (conflict,) = find_conflicts(QUESTION, [BLOG, OFFICIAL])
    assert [s.chunk_id for s in conflict.sides] == ["blog", "doc"]  # evidence order
    assert conflict.preferred is None


def test_both_sides_become_cited_claims_the_verifier_keeps() -> None:
    (conflict,) = find_conflicts(QUESTION, [BLOG, OFFICIAL], Credibility.defaults())
    claims = conflict_claims([conflict])
    assert [c.source_id for c in claims] == ["doc", "blog"]
    assert claims[0].statement == ("Orion-7: 130 billion parameters in "
                                   "\u201cOrion-7 model reference\u201d")
    assert claims[1].statement == ("but 70 billion parameters in "
                                   "\u201cFirst look: a week with a new model\u201d")
    result = verify(claims, {"doc": OFFICIAL, "blog": BLOG}, question=QUESTION)
    assert result.passed and result.dropped == 0


def test_a_statement_leaves_out_a_figure_the_verifier_would_not_find() -> None:
    # a chunk titled after the subject, read through "It": its quote has a figure of its
    # own (32,000), so the "7" of "Orion-7" in the subject or title would be an added number
    own = chunk("doc", "It has 130 billion parameters and a context window of 32,000 tokens.",
                title="Orion-7", url=DOCS_URL)
    (conflict,) = find_conflicts(QUESTION, [BLOG, own], Credibility.defaults())
    claims = conflict_claims([conflict])
    assert claims[0].statement == "130 billion parameters"
    assert verify(claims, {"doc": own, "blog": BLOG}, question=QUESTION).dropped == 0
    # without a figure of its own, the title's figures are found in the chunk: kept
    plain = own.model_copy(update={"text": "It has 130 billion parameters."})
    (conflict,) = find_conflicts(QUESTION, [BLOG, plain], Credibility.defaults())
    claims = conflict_claims([conflict])
    assert claims[0].statement == "Orion-7: 130 billion parameters in \u201cOrion-7\u201d"
    assert verify(claims, {"doc": plain, "blog": BLOG}, question=QUESTION).dropped == 0


@pytest.mark.parametrize(("blog_text", "blog_title"), [
    ("Orion-7 has 70 billion parameters.", "Notes from the conference"),  # named in the sentence
    ("Orion-7 is fast. It has 70 billion parameters.", "Weekend reading"),  # a pronoun after it
    ("Orion-7 has 70 billion parameters.", "Orion-7 review"),  # a title that mentions it
])
def test_the_subject_comes_from_the_text_not_from_matching_titles(blog_text: str,
                                                                  blog_title: str) -> None:
    blog = chunk("blog", blog_text, title=blog_title, url=BLOG_URL)
    (conflict,) = find_conflicts(QUESTION, [blog, OFFICIAL], Credibility.defaults())
    assert [s.chunk_id for s in conflict.sides] == ["doc", "blog"]
    assert conflict.preferred == 0


# --- different things that both carry a number ---------------------------------------------


@pytest.mark.parametrize(("text", "title"), [
    ("Vega-3 has 70 billion parameters.", "Vega-3 release notes"),  # another model
    ("We compared both. Vega-3 has 70 billion parameters.", "Orion-7 vs Vega-3"),
    ("Orion-8 has 70 billion parameters.", "Model notes"),  # another version
    ("Orion-7 Mini has 70 billion parameters.", "Model notes"),  # a longer name
    ("Orion-7 Mini is a small model. It has 70 billion parameters.", "Model notes"),
    ("Orion-7 was compared with Vega-3. It has 70 billion parameters.", "Model notes"),
    ("Orion-7's teacher model is large. It has 70 billion parameters.", "Model notes"),
    ("The chatbot built on Orion-7 is new. It has 70 billion parameters.", "Model notes"),
    ("Orion-7 2 is the successor. It has 70 billion parameters.", "Model notes"),
    ("Orion-7 2 has 70 billion parameters.", "Model notes"),
    ("Vega-3 is a model. Orion-7 is older. Vega-3 has 70 billion parameters.", "Model notes"),
    ("It has 70 billion parameters.", "Orion-7 review"),  # "it": nothing named it here
    ("Orion-7 impressed me. The teacher has 70 billion parameters.", "Orion-7 review"),
    ("Orion-7 was trained on 70 billion tokens.", "Model notes"),  # another attribute
    ("Orion-7 reportedly has 70 billion parameters.", "Rumours"),  # hedged
    ("Orion-7 has 70 billion parameters.", "Orion-7 (robot)"),  # a qualified homonym
])
def test_passages_about_something_else_do_not_conflict(text: str, title: str) -> None:
    other = chunk("other", text, title=title, url=BLOG_URL)
    assert find_conflicts(QUESTION, [OFFICIAL, other], Credibility.defaults()) == ()


def test_a_longer_name_the_text_uses_is_another_subject() -> None:
    question = "How many stars does Orion have?"
    nebula = chunk("n", "The Orion Nebula is bright. Orion has 700 stars in this count.",
                   title="Orion Nebula")
    constellation = chunk("c", "Orion has 81 stars visible to the naked eye.", title="Orion")
    assert find_conflicts(question, [constellation, nebula]) == ()
    # a title-case title the text does not use as a name only mentions the subject
    review = chunk("r", "Orion has 700 stars in this count.", title="Orion Guide")
    assert len(find_conflicts(question, [constellation, review])) == 1


def test_cjk_passages_about_different_subjects_do_not_conflict() -> None:
    # (a Chinese question is not one the offline detector reads: it finds nothing there)
    vega = chunk("v", "Vega-3 是一个语言模型。Vega-3 has 70 billion parameters.",
                 title="Vega-3 模型介绍")
    assert find_conflicts(QUESTION, [OFFICIAL, vega]) == ()
    zh_question = "Orion-7 有多少参数\uff1f"
    zh_orion = chunk("a", "Orion-7 是一个语言模型\uff0c有 1300 亿参数。", title="Orion-7 文档")
    zh_vega = chunk("b", "Vega-3 是一个语言模型\uff0c有 700 亿参数。", title="Vega-3 博客")
    assert find_conflicts(zh_question, [zh_orion, zh_vega]) == ()


def test_the_same_value_in_two_passages_is_no_conflict() -> None:
    agree = chunk("blog", "Orion-7 has 130 billion parameters.", title="Weekend reading",
                  url=BLOG_URL)
    assert find_conflicts(QUESTION, [agree, OFFICIAL], Credibility.defaults()) == ()


# --- end to end: an engine run over a small local corpus ------------------------------------

CORPUS = [
    Document(id="orion-reference", title="Orion-7 model reference", url=DOCS_URL,
             text=OFFICIAL.text),
    Document(id="first-look", title="First look: a week with a new model", url=BLOG_URL,
             text=BLOG.text),
    Document(id="vega", title="Vega-3 release notes",
             url="https://vega.example.org/releases",
             text="Vega-3 is a translation model. It has 12 billion parameters and was "
                  "released in May."),
    Document(id="tea", title="Tea", text=(
        "Tea is an aromatic beverage prepared by pouring hot water over cured leaves of "
        "Camellia sinensis. After water, it is the most widely consumed drink in the world.")),
]


@pytest.fixture(scope="module")
def models_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusIndex]:
    idx = CorpusIndex(Path(tmp_path_factory.mktemp("models-idx")), HashingEmbedder())
    idx.index_documents("models", CORPUS)
    yield idx
    idx.close()


async def test_an_engine_run_announces_the_conflict_and_cites_both_sides(
        models_index: CorpusIndex) -> None:
    engine = Engine(models_index)  # the built-in credibility table
    result = await engine.ask(QUESTION, collections=["models"])
    assert result.outcome == "answered", result.reason
    (detected,) = [e for e in result.events if isinstance(e, ConflictDetected)]
    assert detected.type == "conflict.detected"
    assert [s.value for s in detected.sides] == ["130 billion parameters",
                                                 "70 billion parameters"]
    assert detected.preferred == 0  # the official documentation
    official_id, blog_id = (s.chunk_id for s in detected.sides)
    assert result.evidence[official_id].url == DOCS_URL
    assert result.evidence[blog_id].url == BLOG_URL
    # both sides are cited in the verified answer, the official value first
    cited = [c.claim.source_id for c in result.citations]
    assert official_id in cited and blog_id in cited
    assert result.answer.index("130 billion") < result.answer.index("70 billion parameters")
    for cite in result.citations:
        assert cite.chunk is not None and cite.claim.quote in cite.chunk.text
    by_value = {c.claim.source_id: c for c in result.citations}
    assert by_value[official_id].credibility == 1.2 and by_value[blog_id].credibility == 1.0
