"""The offline whole-document rules: a request form plus exactly one named document."""

from __future__ import annotations

import pytest

from reactive_rag.judgement import DocumentRef
from reactive_rag.judgement.offline import offline_judgement, whole_document_request

DOCS = [DocumentRef("docs", "guides/deployment.md", "Deployment guide"),
        DocumentRef("docs", "faq.md", "Frequently asked questions"),
        DocumentRef("handbook", "ops/backup-policy.txt", ""),
        DocumentRef("zh", "bushu", "部署指南")]


@pytest.mark.parametrize(("question", "doc_id"), [
    ("Summarise the deployment guide", "guides/deployment.md"),
    ("Can you give me an overview of the Deployment Guide?", "guides/deployment.md"),
    ("tl;dr of faq.md", "faq.md"),
    ("What are the key points of the backup policy?", "ops/backup-policy.txt"),
    ("请总结一下部署指南", "bushu"),
])
def test_a_request_for_one_named_document_is_handed_off(question: str, doc_id: str) -> None:
    found = whole_document_request(question, DOCS)
    assert found is not None and found.document.doc_id == doc_id and found.by == "offline"


@pytest.mark.parametrize("question", [
    "What port does the deployment guide use?",  # a fact: no whole-document request
    "Summarise the security handbook",  # no such document
    "Summarise what the deployment guide says about TLS certificates and proxies",  # a part
    "Give me a summary",  # no document named
])
def test_other_questions_are_not(question: str) -> None:
    assert whole_document_request(question, DOCS) is None


def test_two_documents_named_equally_are_ambiguous() -> None:
    twins = [DocumentRef("a", "guide-1.md", "Deployment guide"),
             DocumentRef("b", "guide-2.md", "Deployment guide")]
    assert whole_document_request("Summarise the deployment guide", twins) is None


def test_the_family_switches_off() -> None:
    assert offline_judgement().whole_document is whole_document_request
    assert offline_judgement(off={"whole_document"}).whole_document is None
