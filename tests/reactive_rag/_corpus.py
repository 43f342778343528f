"""A tiny corpus shared by the end-to-end tests (engine, web page): four short documents."""

from __future__ import annotations

from reactive_rag.index import Document

__all__ = ["DOCS"]

DOCS = [
    Document(id="aspirin", title="Aspirin", text=(
        "Aspirin is a medication used to reduce pain, fever, or inflammation. "
        "Aspirin was first isolated by Felix Hoffmann, a chemist at Bayer, in 1897. "
        "It is one of the most widely used medications globally.")),
    Document(id="bayer", title="Bayer", text=(
        "Bayer AG is a German multinational pharmaceutical and biotechnology company. "
        "Bayer was founded in Barmen in 1863 by Friedrich Bayer and Johann Friedrich Weskott. "
        "Its headquarters are in Leverkusen.")),
    Document(id="cats", title="Cat", text=(
        "The cat is a small domesticated carnivorous mammal. Cats are kept as pets and "
        "valued for companionship and hunting rodents.")),
    Document(id="tea", title="Tea", text=(
        "Tea is an aromatic beverage prepared by pouring hot water over cured leaves of "
        "Camellia sinensis. After water, it is the most widely consumed drink in the world.")),
]
