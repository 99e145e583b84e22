"""Toy bAbI-1 classifiers whose reading of the input is known: two that ignore the question, one that reads it.

All three score each location by the sentences of segment A (the paragraph) that name it, and go
through :func:`fmmlearn.explain` like a fitted classifier (:class:`~helpers.faithfulness.WrappedClassifier`):

* :class:`BagOfLocations` -- ``logit_L`` = the number of times ``L`` is named: a bag of words;
* :class:`LatestLocations` -- a later sentence weighs more (weight ``2^k`` for sentence ``k``): the
  explanation ranks every occurrence differently, yet nothing in it depends on the question;
* :class:`QuestionReader` -- only the sentences whose subject is the person the question (segment
  B) asks about count, a later one more: the bAbI-1 answer, from the supporting fact.
"""

import numpy as np
import torch

from fmmlearn.datasets import BABI_LOCATIONS
from fmmlearn.encoding import SEGMENT_A, SEGMENT_B
from helpers.faithfulness import WrappedClassifier

__all__ = ["BagOfLocations", "LatestLocations", "QuestionReader", "babi_classifier"]

PEOPLE = ("mary", "john", "daniel", "sandra")


class _SentenceScorer(torch.nn.Module):
    """``logits[L] = sum over segment-A sentences that name L of weight(sentence)``.

    Sentences are the segment-A tokens between periods; a masked token names nothing.  Subclasses
    set :meth:`weight`, from the sentence's index, its subject token and the question's tokens.
    """

    def __init__(self, tokenizer):
        super().__init__()
        def ids(word):
            return tokenizer(word, add_special_tokens=False)["input_ids"]

        self.location_ids = {ids(loc)[0]: k for k, loc in enumerate(BABI_LOCATIONS)}
        assert all(len(ids(loc)) == 1 for loc in BABI_LOCATIONS), "each location must be one token"
        self.period_id, self.person_ids = ids(".")[0], {ids(p)[0] for p in PEOPLE}
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def get_input_embeddings(self):
        return None

    def weight(self, index, subject, question) -> float:
        raise NotImplementedError

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None):
        logits = torch.zeros(len(input_ids), len(BABI_LOCATIONS), dtype=torch.float64)
        for row, (ids, seg, keep) in enumerate(zip(input_ids.tolist(), token_type_ids.tolist(),
                                                   attention_mask.tolist())):
            question = {t for t, s, k in zip(ids, seg, keep) if k and s == SEGMENT_B} & self.person_ids
            paragraph = [t for t, s, k in zip(ids[1:], seg[1:], keep[1:]) if k and s == SEGMENT_A][:-1]  # no CLS/SEP
            sentence, index = [], 0
            for token in paragraph + [self.period_id]:
                if token != self.period_id:
                    sentence.append(token)
                    continue
                if sentence:
                    w = self.weight(index, sentence[0], question)
                    for t in sentence:
                        if t in self.location_ids:
                            logits[row, self.location_ids[t]] += w
                sentence, index = [], index + 1
        return logits.float()


class BagOfLocations(_SentenceScorer):
    def weight(self, index, subject, question):
        return 1.0


class LatestLocations(_SentenceScorer):
    def weight(self, index, subject, question):
        return 2.0 ** index


class QuestionReader(_SentenceScorer):
    def weight(self, index, subject, question):
        return 2.0 ** index if subject in question else 0.0


def babi_classifier(tokenizer, model_class):
    """``model_class`` as a classifier over the six locations (classes in the paper's order)."""
    clf = WrappedClassifier(tokenizer, model_class(tokenizer), classes=BABI_LOCATIONS)
    clf.classes_ = np.asarray(BABI_LOCATIONS)
    return clf
