"""A fitted answerability score: how likely the chosen evidence answers the question.

The offline judge used to demand fixed shares of the question's words
(0.6 with a name, 0.85 without), tuned on two English data sets: a user's
rewording ("silently", "out of the box") or a Chinese question's own
segmentation failed it though the answer was there. The judge now measures
a few signals that mean the same thing in any corpus and any language, and a
logistic regression fitted on labelled evidence from several sources (English
multi-hop Wikipedia questions, Chinese reading comprehension, a software
manual, library documentation: ``bench/fit_sufficiency.py``) weighs them:

- ``share``: the weighted share of the question's words (rare words weigh
  more) that the best one or two linked passages, or the best window of a
  passage, hold;
- ``rare_share``: the same over the question's specific words alone (a word
  rarer than everyday vocabulary): what a question about something absent
  misses;
- ``soft_share``: ``share`` with a word also counted when a passage holds a
  longer or shorter form of it (a shared stem of five letters or more:
  "enumeration" and "enum", "concurrently" and "concurrent");
- ``rarest_held``: 1 less the specificity of the most specific question word the
  passages lack (1 when they lack none): a question about something absent
  misses its most specific word, a reworded one its common words;
- ``names``: the share of the question's named things the passages mention;
- ``value``: a sentence bearing on the question holds a value of the asked
  kind (a year for "when", a number for "how many", a new name for "who");
- ``about``: a passage is titled after a named thing of the question;
- ``no_names``: the question names nothing (its words must then carry it);
- ``dense``: the best cosine of a chosen passage to the question by the run's
  embedder (the final rerank measures it), with ``dense_known`` 1; cosines of
  another embedder than the one the head was fitted on mean something else, so
  then (or with no rerank) ``dense`` is the fitted fill value and ``dense_known``
  0, and the other signals decide. A reworded question ("copy a whole folder")
  is close to its answer in meaning though it shares few of its words;
- ``asks_value``: the question asks for a value (who, when, where, how many),
  and ``asks_value_share`` / ``asks_value_dense`` the two measures again for
  such questions alone: a passage on the right topic without the asked fact
  is close in meaning, so these questions lean on their words more than a
  "how do I" question does.

The weights ship in ``data/sufficiency_head.json`` with the sources they
were fitted on and each left-out source's figures; ``[judgement]
sufficiency_head = false`` in config goes back to the fixed shares.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import astuple, dataclass, fields
from pathlib import Path

__all__ = [
    "DEFAULT_SUFFICIENCY_HEAD_PATH",
    "SufficiencyFeatures",
    "SufficiencyHead",
    "SufficiencyHeadError",
    "load_sufficiency_head",
]

DEFAULT_SUFFICIENCY_HEAD_PATH = Path(__file__).parent / "data" / "sufficiency_head.json"


@dataclass(frozen=True, slots=True)
class SufficiencyFeatures:
    """The signals the head weighs (see the module docstring); each in [0, 1]."""

    share: float
    rare_share: float
    soft_share: float
    rarest_held: float
    names: float
    value: float
    about: float
    no_names: float
    dense: float
    dense_known: float
    asks_value: float
    asks_value_share: float
    asks_value_dense: float

    def vector(self) -> tuple[float, ...]:
        """The features in the order of :attr:`SufficiencyHead.weights`."""
        return astuple(self)

    @staticmethod
    def names_in_order() -> tuple[str, ...]:
        """Feature names, in vector order (the JSON file's keys)."""
        return tuple(f.name for f in fields(SufficiencyFeatures))


@dataclass(frozen=True, slots=True)
class SufficiencyHead:
    """Logistic weights over :class:`SufficiencyFeatures` and the answerable threshold."""

    weights: tuple[float, ...]
    bias: float
    threshold: float = 0.5
    dense_model: str = ""  # the embedder whose cosines ``dense`` was fitted on
    dense_fill: float = 0.0  # ``dense`` when the run's cosines are not that embedder's

    def probability(self, features: SufficiencyFeatures) -> float:
        """The fitted probability that the evidence answers the question."""
        z = self.bias + sum(w * x for w, x in zip(self.weights, features.vector(), strict=True))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def answerable(self, features: SufficiencyFeatures) -> bool:
        """Whether the probability reaches the threshold."""
        return self.probability(features) >= self.threshold


class SufficiencyHeadError(ValueError):
    """The head's JSON file is missing a feature or holds a bad number."""


@functools.lru_cache(maxsize=4)
def load_sufficiency_head(path: Path = DEFAULT_SUFFICIENCY_HEAD_PATH) -> SufficiencyHead:
    """Read the fitted head (cached: the judge runs on every answerability check).

    Raises:
        SufficiencyHeadError: the file lacks a feature's weight or a number is not finite.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    names = SufficiencyFeatures.names_in_order()
    try:
        weights = tuple(float(data["weights"][n]) for n in names)
        bias = float(data["bias"])
        threshold = float(data.get("threshold", 0.5))
        dense_model = str(data.get("dense_model", ""))
        dense_fill = float(data.get("dense_fill", 0.0))
    except (KeyError, TypeError, ValueError) as exc:
        raise SufficiencyHeadError(f"{path}: not a sufficiency head ({exc})") from exc
    if not all(math.isfinite(v) for v in (*weights, bias, threshold, dense_fill)):
        raise SufficiencyHeadError(f"{path}: weights must be finite numbers")
    return SufficiencyHead(weights, bias, threshold, dense_model, dense_fill)
